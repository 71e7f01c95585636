// Package activities holds orderflow's Temporal activities: the idempotent
// writes that turn an order event into its business effects in PostgreSQL.
//
// Every activity is safe to retry. ApplyEvent records each business key
// (order_id, version) once, in the same transaction as the order change, and
// answers a repeat with the decision it took the first time; AwardPoints
// inserts at most one ledger row per (order_id, kind); ParkDeadLetter stores
// a message once per fingerprint and counts repeats. Invalid input is a
// non-retryable application error and writes nothing; database trouble is
// returned wrapped and Temporal retries it.
package activities

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"
	"go.temporal.io/sdk/temporal"
	"gorm.io/gorm"

	"github.com/orderflow/orderflow/fsm"
)

// Recorder receives the activities' business metrics. Implementations must
// be safe for concurrent use. Observations are made only after the
// transaction that caused them committed.
type Recorder interface {
	// ObserveOutcome counts one ApplyEvent call by outcome: the decision
	// recorded for a new business key; Duplicate for a repeat of a
	// recorded one (redelivery, or a retry after a lost completion);
	// Conflict for each conflicting delivery.
	ObserveOutcome(outcome fsm.Outcome)
	// ObservePoints counts one points ledger row inserted, with its signed
	// points.
	ObservePoints(kind fsm.PointsKind, points int64)
}

// Activities holds the dependencies of orderflow's activities. Register it
// with a Temporal worker (worker.RegisterActivity(a)); its exported methods
// are the activities named in this package. The methods are plain Go methods
// too, usable outside an activity context (the bridge calls ParkDeadLetter
// directly).
type Activities struct {
	// DB is the orderflow database, migrated (package migrations).
	DB *gorm.DB
	// Metrics, when not nil, receives business metrics.
	Metrics Recorder
	// Topic is the RocketMQ topic recorded on dead letters that ApplyEvent
	// parks for conflicts; empty when unknown.
	Topic string
}

// Application error types of the non-retryable errors the activities return.
const (
	// ErrTypeInvalidEvent: the event breaks the message contract.
	ErrTypeInvalidEvent = "InvalidEvent"
	// ErrTypeInvalidInput: any other argument is invalid.
	ErrTypeInvalidInput = "InvalidInput"
	// ErrTypeUnknownOrder: points were awarded for an order that has no row.
	ErrTypeUnknownOrder = "UnknownOrder"
)

// ErrInvalidInput is wrapped by every error about invalid input, so callers
// outside Temporal can test for it with errors.Is. (fsm.ErrInvalidEvent is
// wrapped as well for invalid events.)
var ErrInvalidInput = errors.New("invalid input")

// invalid returns the non-retryable application error for bad input. Its
// message says why; its cause wraps ErrInvalidInput and cause.
func invalid(errType string, cause error) error {
	wrapped := fmt.Errorf("%w: %w", ErrInvalidInput, cause)
	return temporal.NewNonRetryableApplicationError(cause.Error(), errType, wrapped)
}

func (a *Activities) observeOutcome(o fsm.Outcome) {
	if a.Metrics != nil {
		a.Metrics.ObserveOutcome(o)
	}
}

func (a *Activities) observePoints(k fsm.PointsKind, n int64) {
	if a.Metrics != nil {
		a.Metrics.ObservePoints(k, n)
	}
}

// pgCode returns the SQLSTATE of a PostgreSQL error, or "".
func pgCode(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// maxReasonLen is the longest reason stored (dead_letters.reason CHECK).
const maxReasonLen = 1024

// cleanText makes s storable in a PostgreSQL text column: valid UTF-8
// without NUL bytes, at most max runes (0: no limit).
func cleanText(s string, max int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	if max > 0 && utf8.RuneCountInString(s) > max {
		r := []rune(s)
		s = string(r[:max-1]) + "…"
	}
	return s
}
