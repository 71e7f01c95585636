// Package message decodes and validates the body of an ORDER_EVENTS message
// against the message contract of docs/design.md, and explains every rejection
// with a short, stable reason.
//
// Decoding is strict about the fields the contract defines and lenient about
// the rest: a field of the wrong JSON type, a number that is not an integer or
// does not fit in int64, or a time that is not RFC 3339 is rejected with a
// reason naming the field, while fields the contract does not define are
// ignored, so that producers can add fields without breaking older bridges.
// A JSON null counts as an absent field. A body whose keys repeat within
// one object is rejected: decoders disagree on which copy wins.
//
// The message keys and tag are routing hints; the body is authoritative.
// CheckEnvelope reports where they disagree so that the caller can log and
// count it, but a disagreement never rejects a message.
package message

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/wire"
)

// ErrRejected is wrapped by every *Rejection.
var ErrRejected = errors.New("message rejected")

// maxReasonLen bounds a reason, which may quote a field's value.
const maxReasonLen = 512

// Rejection explains why a message body breaks the contract.
type Rejection struct {
	// Kind is one of the rejection kinds of package wire (wire.Kinds).
	Kind string
	// Field is the offending field, or empty when the body as a whole is bad.
	Field string
	// Reason is the full explanation, "kind: detail" or "kind: field: detail",
	// at most 512 bytes of valid UTF-8 without NUL bytes, fit to store as text.
	Reason string
	// Err is the underlying error, if any.
	Err error
}

// Error returns "message rejected: " followed by the reason.
func (r *Rejection) Error() string { return "message rejected: " + r.Reason }

// Unwrap lets errors.Is match ErrRejected and the underlying error.
func (r *Rejection) Unwrap() []error {
	if r.Err == nil {
		return []error{ErrRejected}
	}
	return []error{ErrRejected, r.Err}
}

func reject(kind, field, detail string, err error) *Rejection {
	reason := kind + ": "
	if field != "" {
		reason += field + ": "
	}
	return &Rejection{Kind: kind, Field: field, Reason: wire.Sanitize(reason+detail, maxReasonLen), Err: err}
}

// OversizeCompressed is the rejection of a compressed body that would
// inflate past wire.MaxBodySize; the consumer refused to inflate it. Its
// reason is wire.InflateRefusedReason, by which a parked message is known
// to hold its body as stored.
func OversizeCompressed() *Rejection {
	return &Rejection{Kind: wire.KindOversize, Reason: wire.InflateRefusedReason()}
}

// Undecodable is the rejection of a body still in the named compression
// that cannot be decoded, with the decoder's error:
// "undecodable: zstd body: unexpected EOF".
func Undecodable(compression, decodeError string) *Rejection {
	if decodeError == "" {
		decodeError = "not decoded"
	}
	return reject(wire.KindUndecodable, "", compression+" body: "+decodeError, nil)
}

// Received is what Parse makes of one message: a valid event, or a
// rejection and the dead letter that parks the message.
type Received struct {
	// Event is the valid event (zero when rejected).
	Event fsm.Event
	// Mismatch lists the envelope fields that disagree with the body
	// (MismatchKeys, MismatchTag); the body is authoritative.
	Mismatch []string
	// Rejection says why the message breaks the contract; nil for a valid
	// event.
	Rejection *Rejection
	// DeadLetter is the message with the rejection's reason, set with
	// Rejection.
	DeadLetter wire.DeadLetter
}

// Parse judges one message against the contract: the size of its body
// (inflated or not), the body, and the envelope against the body. A body
// still compressed is never read as JSON: it is oversize when the consumer
// refused to inflate it, undecodable otherwise.
func Parse(env wire.Envelope) Received {
	var (
		e   fsm.Event
		rej *Rejection
	)
	switch {
	case env.InflateRefused:
		rej = OversizeCompressed()
	case env.Compression != "":
		rej = Undecodable(env.Compression, env.DecodeError)
	default:
		var err error
		if e, err = Decode(env.Body); err != nil {
			if !errors.As(err, &rej) {
				rej = reject(wire.KindMalformedJSON, "", err.Error(), err)
			}
		}
	}
	if rej != nil {
		return Received{Rejection: rej, DeadLetter: wire.DeadLetter{Envelope: env, Reason: rej.Reason}}
	}
	return Received{Event: e, Mismatch: CheckEnvelope(e, env.Keys, env.Tags)}
}

// Encode is the message body of e, as producers send it.
func Encode(e fsm.Event) ([]byte, error) {
	if err := e.Validate(); err != nil {
		return nil, err
	}
	return e.Body()
}

// Decode checks the size of body, decodes it as an event and validates it
// against the contract. Every error it returns is a *Rejection.
func Decode(body []byte) (fsm.Event, error) {
	var e fsm.Event
	if len(body) > wire.MaxBodySize {
		return e, reject(wire.KindOversize, "", fmt.Sprintf("%d bytes > %d", len(body), wire.MaxBodySize), nil)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return e, reject(wire.KindMalformedJSON, "", "empty body", nil)
	}
	if !utf8.Valid(body) {
		return e, reject(wire.KindMalformedJSON, "", "body is not valid UTF-8", nil)
	}
	var raw any
	if err := json.Unmarshal(body, &raw); err != nil {
		return e, reject(wire.KindMalformedJSON, "", err.Error(), err)
	}
	if _, ok := raw.(map[string]any); !ok {
		return e, reject(wire.KindNotObject, "", "body is a JSON "+jsonType(raw)+", want an object", nil)
	}
	if key := duplicateKey(body); key != "" {
		return e, reject(wire.KindMalformedJSON, "", "duplicate key "+key, nil)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return e, reject(wire.KindMalformedJSON, "", err.Error(), err)
	}
	d := decoder{fields: fields}
	e.EventID = d.str("event_id", true)
	e.OrderID = d.str("order_id", true)
	e.UserID = d.int("user_id", true)
	e.Status = fsm.Status(d.str("status", true))
	e.Version = d.int("version", true)
	e.AmountCents = d.int("amount_cents", true)
	e.OccurredAt = d.time("occurred_at", true)
	e.ProducerID = d.str("producer_id", false)
	e.Seq = d.int("seq", false)
	if d.err != nil {
		return fsm.Event{}, d.err
	}
	if err := e.Validate(); err != nil {
		return fsm.Event{}, invalidField(err)
	}
	if d.value("seq", false) != nil && e.Seq == 0 {
		// 0 stands for "no seq" in fsm.Event; a body that says 0 breaks
		// the contract all the same.
		return fsm.Event{}, reject(wire.KindInvalidField, "seq", "must be >= 1", nil)
	}
	if err := e.CheckSequence(); err != nil {
		return fsm.Event{}, invalidField(err)
	}
	return e, nil
}

// BodyOrderID is the order a parked body names, or "" when it names none:
// the order_id of a body Decode accepts; of a body Decode refuses only for
// its fields (missing_field, invalid_field: a JSON object of at most
// wire.MaxBodySize bytes without a repeated key), its order_id member when
// that is a valid order ID. A dead letter belongs to this order (the store's
// prune), never to the one its keys name, which the producer sets apart
// from the body.
func BodyOrderID(body []byte) string {
	e, err := Decode(body)
	if err == nil {
		return e.OrderID
	}
	var r *Rejection
	if !errors.As(err, &r) || r.Kind != wire.KindMissingField && r.Kind != wire.KindInvalidField {
		return ""
	}
	var fields map[string]json.RawMessage
	var id string
	if json.Unmarshal(body, &fields) != nil || json.Unmarshal(fields["order_id"], &id) != nil || fsm.CheckOrderID(id) != nil {
		return ""
	}
	return id
}

// invalidField is the rejection of an event that fails err, a validation
// error of package fsm.
func invalidField(err error) *Rejection {
	var ve *fsm.ValidationError
	if errors.As(err, &ve) {
		return reject(wire.KindInvalidField, ve.Field, ve.Reason, err)
	}
	return reject(wire.KindInvalidField, "", err.Error(), err)
}

// contractFields are the body's fields the contract defines.
var contractFields = []string{"event_id", "order_id", "user_id", "status", "version", "amount_cents", "occurred_at",
	"producer_id", "seq"}

// jsonFrame is an object or array duplicateKey is inside of.
type jsonFrame struct {
	object  bool
	path    string
	seen    map[string]string // an object's keys (top level: contract fields folded), as written
	wantKey bool              // an object's next token is a key (or its end)
	key     string            // an object's key whose value comes next
	next    int               // an array's index of the next element
}

// duplicateKey returns where body, a valid JSON value, repeats a key within
// one object ("order_id", "items[1].qty"), or "" when no object does. Which
// of the two values a consumer takes is up to its decoder (encoding/json
// takes the last, others the first), so such a body is ambiguous. At the top
// level a key that differs from one of the contract's fields only in case
// repeats that field too, as the case-folding decoders (encoding/json into
// a struct among them) read it as the field.
func duplicateKey(body []byte) string {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var stack []*jsonFrame
	for {
		tok, err := dec.Token()
		if err != nil {
			return "" // io.EOF: the end of the value
		}
		var top *jsonFrame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			continue
		}
		if top != nil && top.object && top.wantKey {
			k, _ := tok.(string)
			if dup := top.add(k, len(stack) == 1); dup != "" {
				return dup
			}
			top.key, top.wantKey = k, false
			continue
		}
		path := ""
		switch {
		case top != nil && top.object:
			path = joinKey(top.path, top.key)
			top.wantKey = true
		case top != nil:
			path = fmt.Sprintf("%s[%d]", top.path, top.next)
			top.next++
		}
		if d, ok := tok.(json.Delim); ok {
			f := &jsonFrame{object: d == '{', path: path, wantKey: d == '{'}
			if f.object {
				f.seen = map[string]string{}
			}
			stack = append(stack, f)
		}
	}
}

// add records key k of an object and returns the path of the repeat when
// the object already has it ("" otherwise); top says the object is the
// body itself, whose keys are compared with the contract's fields folded.
func (f *jsonFrame) add(k string, top bool) string {
	name := k
	if top {
		for _, c := range contractFields {
			if strings.EqualFold(k, c) {
				name = c
			}
		}
	}
	first, ok := f.seen[name]
	if !ok {
		f.seen[name] = k
		return ""
	}
	dup := joinKey(f.path, name)
	switch {
	case k != name:
		dup += fmt.Sprintf(" (as %q)", k)
	case first != name:
		dup += fmt.Sprintf(" (as %q)", first)
	}
	return dup
}

// joinKey is the path of key k of the object at path: bare when it is a
// plain name, quoted otherwise.
func joinKey(path, k string) string {
	plain := k != ""
	for _, r := range k {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			plain = false
			break
		}
	}
	if !plain {
		k = strconv.Quote(k)
	}
	if path == "" {
		return k
	}
	return path + "." + k
}

// decoder reads the contract's fields, keeping the first error.
type decoder struct {
	fields map[string]json.RawMessage
	err    *Rejection
}

// value returns the raw value of a field, or nil when absent or null (and
// then records a missing_field rejection if required).
func (d *decoder) value(name string, required bool) json.RawMessage {
	if d.err != nil {
		return nil
	}
	v, ok := d.fields[name]
	if ok && !bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
		return bytes.TrimSpace(v)
	}
	if required {
		d.err = reject(wire.KindMissingField, name, "is required", nil)
	}
	return nil
}

func (d *decoder) str(name string, required bool) string {
	v := d.value(name, required)
	if v == nil {
		return ""
	}
	var s string
	if v[0] != '"' || json.Unmarshal(v, &s) != nil {
		d.err = reject(wire.KindInvalidField, name, "must be a string", nil)
		return ""
	}
	if strings.ContainsRune(s, 0) {
		// PostgreSQL text cannot hold NUL; such an event could never be stored.
		d.err = reject(wire.KindInvalidField, name, "must not contain NUL characters", nil)
		return ""
	}
	return s
}

func (d *decoder) int(name string, required bool) int64 {
	v := d.value(name, required)
	if v == nil {
		return 0
	}
	if v[0] != '-' && (v[0] < '0' || v[0] > '9') {
		d.err = reject(wire.KindInvalidField, name, "must be an integer", nil)
		return 0
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			d.err = reject(wire.KindInvalidField, name, "must be an integer within int64 range", err)
		} else {
			d.err = reject(wire.KindInvalidField, name, "must be an integer", err)
		}
		return 0
	}
	return n
}

func (d *decoder) time(name string, required bool) time.Time {
	s := d.str(name, required)
	if d.err != nil || s == "" && !required {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		d.err = reject(wire.KindInvalidField, name, "must be an RFC 3339 time", err)
		return time.Time{}
	}
	if t.IsZero() {
		// Go's zero time, what an encoder writes for an unset time.
		d.err = reject(wire.KindInvalidField, name, "must not be the zero time", nil)
		return time.Time{}
	}
	// time.Parse accepts offsets up to ±99:59; RFC 3339 allows ±23:59,
	// and a time beyond it (or whose UTC year leaves 0000–9999) cannot be
	// written back as RFC 3339, which every encoder downstream does.
	if _, off := t.Zone(); off <= -24*3600 || off >= 24*3600 {
		d.err = reject(wire.KindInvalidField, name, "offset must be within ±23:59 (RFC 3339)", nil)
		return time.Time{}
	}
	if y := t.UTC().Year(); y < 0 || y > 9999 {
		d.err = reject(wire.KindInvalidField, name, "must be within years 0000–9999 in UTC", nil)
		return time.Time{}
	}
	return t
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	default:
		return "value"
	}
}

// Envelope mismatches reported by CheckEnvelope.
const (
	MismatchKeys = "keys"
	MismatchTag  = "tag"
)

// CheckEnvelope compares a message's keys and tag with its decoded body and
// returns which of them disagree (MismatchKeys when no key equals the order
// ID, MismatchTag when the tag is not the status), or nil when both agree.
// The body is authoritative: callers log and count a mismatch and go on.
func CheckEnvelope(e fsm.Event, keys, tag string) []string {
	var out []string
	found := false
	for _, k := range strings.Fields(keys) {
		if k == e.OrderID {
			found = true
			break
		}
	}
	if !found {
		out = append(out, MismatchKeys)
	}
	if tag != string(e.Status) {
		out = append(out, MismatchTag)
	}
	return out
}
