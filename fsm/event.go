package fsm

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Event is one order lifecycle event, as the message contract of docs/design.md
// defines it. Every event is a full snapshot of the order.
type Event struct {
	EventID     string    `json:"event_id"`
	OrderID     string    `json:"order_id"`
	UserID      int64     `json:"user_id"`
	Status      Status    `json:"status"`
	Version     int64     `json:"version"`
	AmountCents int64     `json:"amount_cents"`
	OccurredAt  time.Time `json:"occurred_at"`
	ProducerID  string    `json:"producer_id,omitempty"`
	Seq         int64     `json:"seq,omitempty"`
}

// Key is the business key of an event: (order_id, version).
type Key struct {
	OrderID string
	Version int64
}

// String renders the key as "order_id@version".
func (k Key) String() string { return k.OrderID + "@" + strconv.FormatInt(k.Version, 10) }

// Key returns the event's business key.
func (e Event) Key() Key { return Key{OrderID: e.OrderID, Version: e.Version} }

// MaxOrderIDLen is the longest order ID the contract accepts.
const MaxOrderIDLen = 64

// OrderIDRule is the order ID rule of the message contract, as errors state
// it.
const OrderIDRule = "1-64 characters of [A-Za-z0-9_.:-]"

var orderIDPattern = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,64}$`)

// MaxProducerIDLen is the longest producer ID the contract accepts.
const MaxProducerIDLen = 64

// ProducerIDRule is the producer ID rule of the message contract, as errors
// state it.
const ProducerIDRule = "1-64 characters of [A-Za-z0-9._:-]"

var producerIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,64}$`)

// ValidProducerID reports whether id follows ProducerIDRule.
func ValidProducerID(id string) bool { return producerIDPattern.MatchString(id) }

// ErrInvalidEvent is wrapped by every validation error.
var ErrInvalidEvent = errors.New("invalid event")

// ValidationError says which field of an event breaks the contract and why.
type ValidationError struct {
	Field  string
	Reason string
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("invalid event: %s %s", e.Field, e.Reason)
}

// Unwrap lets errors.Is(err, ErrInvalidEvent) match.
func (e *ValidationError) Unwrap() error { return ErrInvalidEvent }

// ValidOrderID reports whether id follows OrderIDRule.
func ValidOrderID(id string) bool { return orderIDPattern.MatchString(id) }

// CheckOrderID returns a *ValidationError of field order_id when id does not
// follow OrderIDRule.
func CheckOrderID(id string) error {
	switch {
	case id == "":
		return &ValidationError{"order_id", "is required"}
	case !ValidOrderID(id):
		return &ValidationError{"order_id", fmt.Sprintf("%q must be %s", cut(id, 80), OrderIDRule)}
	}
	return nil
}

// storableText reports whether s can be stored as PostgreSQL text: valid
// UTF-8 without NUL characters.
func storableText(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

// cut shortens s to at most n bytes, on a character boundary, for messages.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// Validate checks the event against the message contract. It returns a
// *ValidationError for the first field that breaks it.
func (e Event) Validate() error {
	switch {
	case e.EventID == "":
		return &ValidationError{"event_id", "is required"}
	case !storableText(e.EventID):
		return &ValidationError{"event_id", "must be valid UTF-8 without NUL characters"}
	case e.OrderID == "":
		return &ValidationError{"order_id", "is required"}
	case !ValidOrderID(e.OrderID):
		return &ValidationError{"order_id", "must be " + OrderIDRule}
	case !storableText(e.ProducerID):
		return &ValidationError{"producer_id", "must be valid UTF-8 without NUL characters"}
	case e.UserID <= 0:
		return &ValidationError{"user_id", "must be > 0"}
	case e.Status == "":
		return &ValidationError{"status", "is required"}
	case !e.Status.Valid():
		return &ValidationError{"status", fmt.Sprintf("%q is not a lifecycle state", string(e.Status))}
	case e.Version < 1:
		return &ValidationError{"version", "must be >= 1"}
	case e.AmountCents < 0:
		return &ValidationError{"amount_cents", "must be >= 0"}
	case e.OccurredAt.IsZero():
		return &ValidationError{"occurred_at", "is required"}
	}
	return nil
}

// Body is e as a producer sends it, the JSON of Event, its sequence
// fields checked (CheckSequence); the other fields are the caller's to
// validate.
func (e Event) Body() ([]byte, error) {
	if err := e.CheckSequence(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("encode event %s: %w", e.Key(), err)
	}
	return b, nil
}

// CheckSequence checks the event's loss-detection fields against the
// message contract: a producer_id, when set, follows ProducerIDRule; a seq,
// when set (not 0), is at least 1 and comes with a producer_id. It returns a
// *ValidationError for the first field that breaks it.
//
// Validate leaves these fields out, so that the workflows, which replay
// events validated under earlier rules, judge them as they did; the bridge
// and the producers check both.
func (e Event) CheckSequence() error {
	switch {
	case e.ProducerID != "" && !ValidProducerID(e.ProducerID):
		return &ValidationError{"producer_id", fmt.Sprintf("%q must be %s", cut(e.ProducerID, 80), ProducerIDRule)}
	case e.Seq < 0:
		return &ValidationError{"seq", "must be >= 1"}
	case e.Seq > 0 && e.ProducerID == "":
		return &ValidationError{"seq", "needs a producer_id"}
	}
	return nil
}

// ContentHash is the hex SHA-256 of the event's content: order_id, version,
// user_id, status, amount_cents and occurred_at (UTC, microseconds, the
// precision PostgreSQL keeps). event_id, producer_id and seq are tracing
// metadata and do not count: a producer retry that re-sends the same event
// is a duplicate, whatever its tracing fields say.
func (e Event) ContentHash() string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%d\x00%d\x00%s\x00%d\x00%s",
		e.OrderID, e.Version, e.UserID, e.Status, e.AmountCents,
		e.OccurredAt.UTC().Truncate(time.Microsecond).Format(time.RFC3339Nano))
	return hex.EncodeToString(h.Sum(nil))
}
