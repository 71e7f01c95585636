package message

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/wire"
)

const validBody = `{"event_id":"e-1","order_id":"o-1","user_id":7,"status":"PAID","version":2,` +
	`"amount_cents":12345,"occurred_at":"2025-03-01T10:00:00.123456Z","producer_id":"p1","seq":9}`

func TestDecodeValid(t *testing.T) {
	e, err := Decode([]byte(validBody))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	want := fsm.Event{
		EventID: "e-1", OrderID: "o-1", UserID: 7, Status: fsm.Paid, Version: 2, AmountCents: 12345,
		OccurredAt: time.Date(2025, 3, 1, 10, 0, 0, 123456000, time.UTC), ProducerID: "p1", Seq: 9,
	}
	if !e.OccurredAt.Equal(want.OccurredAt) {
		t.Fatalf("occurred_at = %v, want %v", e.OccurredAt, want.OccurredAt)
	}
	e.OccurredAt = want.OccurredAt
	if e != want {
		t.Fatalf("Decode = %+v, want %+v", e, want)
	}
}

func TestDecodeIgnoresUnknownFieldsAndOptionalNulls(t *testing.T) {
	body := `{"event_id":"e","order_id":"o","user_id":1,"status":"CREATED","version":1,"amount_cents":0,` +
		`"occurred_at":"2025-03-01T10:00:00+08:00","future":{"nested":[1,2,3]},"producer_id":null,"seq":null}`
	e, err := Decode([]byte(body))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if e.ProducerID != "" || e.Seq != 0 || e.AmountCents != 0 || e.Status != fsm.Created {
		t.Fatalf("Decode = %+v", e)
	}
	if got := e.OccurredAt.UTC().Hour(); got != 2 {
		t.Fatalf("occurred_at hour in UTC = %d, want 2", got)
	}
}

// withKey returns the JSON object body with one more member, key (raw
// JSON, quotes included) and value, appended at its end.
func withKey(body, key, value string) string {
	return strings.TrimSuffix(body, "}") + "," + key + ":" + value + "}"
}

// Keys repeated in different objects, and the contract's names in other
// objects, are not duplicates.
func TestDecodeAcceptsRepeatedKeysInDifferentObjects(t *testing.T) {
	body := withKey(withKey(validBody, `"items"`, `[{"sku":"a","qty":1},{"sku":"b","qty":2}]`),
		`"meta"`, `{"order_id":"other","ORDER_ID":"again","seq":[{"seq":1}]}`)
	e, err := Decode([]byte(body))
	if err != nil {
		t.Fatalf("Decode(%s): %v", body, err)
	}
	if e.OrderID != "o-1" {
		t.Fatalf("order_id = %q, want o-1", e.OrderID)
	}
}

// withField returns validBody with one field replaced by the raw JSON value
// (or removed when value is empty).
func withField(t *testing.T, field, value string) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(validBody), &m); err != nil {
		t.Fatal(err)
	}
	if value == "" {
		delete(m, field)
	} else {
		m[field] = json.RawMessage(value)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestDecodeRejections(t *testing.T) {
	cases := []struct {
		name, body, kind, field, reason string
	}{
		{"oversize", `{"pad":"` + strings.Repeat("x", wire.MaxBodySize) + `"}`, wire.KindOversize, "",
			"oversize: 65546 bytes > 65536"},
		{"empty", "", wire.KindMalformedJSON, "", "malformed_json: empty body"},
		{"blank", " \n\t", wire.KindMalformedJSON, "", "malformed_json: empty body"},
		{"truncated", `{"event_id":"e"`, wire.KindMalformedJSON, "", "malformed_json: unexpected end of JSON input"},
		{"trailing garbage", validBody + "x", wire.KindMalformedJSON, "", "malformed_json: invalid character 'x' after top-level value"},
		{"invalid utf8", "{\"event_id\":\"\xff\"}", wire.KindMalformedJSON, "", "malformed_json: body is not valid UTF-8"},
		{"array", `[1,2]`, wire.KindNotObject, "", "not_object: body is a JSON array, want an object"},
		{"string", `"hi"`, wire.KindNotObject, "", "not_object: body is a JSON string, want an object"},
		{"null", `null`, wire.KindNotObject, "", "not_object: body is a JSON null, want an object"},
		{"missing event_id", withField(t, "event_id", ""), wire.KindMissingField, "event_id", "missing_field: event_id: is required"},
		{"missing amount", withField(t, "amount_cents", ""), wire.KindMissingField, "amount_cents", "missing_field: amount_cents: is required"},
		{"null version", withField(t, "version", "null"), wire.KindMissingField, "version", "missing_field: version: is required"},
		{"missing occurred_at", withField(t, "occurred_at", ""), wire.KindMissingField, "occurred_at", "missing_field: occurred_at: is required"},
		{"user_id string", withField(t, "user_id", `"7"`), wire.KindInvalidField, "user_id", "invalid_field: user_id: must be an integer"},
		{"user_id float", withField(t, "user_id", `7.5`), wire.KindInvalidField, "user_id", "invalid_field: user_id: must be an integer"},
		{"user_id exponent", withField(t, "user_id", `1e3`), wire.KindInvalidField, "user_id", "invalid_field: user_id: must be an integer"},
		{"version huge", withField(t, "version", `92233720368547758070`), wire.KindInvalidField, "version",
			"invalid_field: version: must be an integer within int64 range"},
		{"seq bool", withField(t, "seq", `true`), wire.KindInvalidField, "seq", "invalid_field: seq: must be an integer"},
		{"order_id number", withField(t, "order_id", `12`), wire.KindInvalidField, "order_id", "invalid_field: order_id: must be a string"},
		{"status object", withField(t, "status", `{"s":"PAID"}`), wire.KindInvalidField, "status", "invalid_field: status: must be a string"},
		{"event_id NUL", withField(t, "event_id", `"a\u0000b"`), wire.KindInvalidField, "event_id", "invalid_field: event_id: must not contain NUL characters"},
		{"occurred_at not rfc3339", withField(t, "occurred_at", `"2025-03-01 10:00:00"`), wire.KindInvalidField, "occurred_at",
			"invalid_field: occurred_at: must be an RFC 3339 time"},
		{"occurred_at empty", withField(t, "occurred_at", `""`), wire.KindInvalidField, "occurred_at",
			"invalid_field: occurred_at: must be an RFC 3339 time"},
		{"occurred_at offset +24:00", withField(t, "occurred_at", `"2026-11-25T12:00:00+24:00"`), wire.KindInvalidField, "occurred_at",
			"invalid_field: occurred_at: offset must be within ±23:59 (RFC 3339)"},
		{"occurred_at offset -24:30", withField(t, "occurred_at", `"2026-11-25T12:00:00-24:30"`), wire.KindInvalidField, "occurred_at",
			"invalid_field: occurred_at: offset must be within ±23:59 (RFC 3339)"},
		{"occurred_at year 10000 in UTC", withField(t, "occurred_at", `"9999-12-31T23:00:00-05:00"`), wire.KindInvalidField, "occurred_at",
			"invalid_field: occurred_at: must be within years 0000–9999 in UTC"},
		{"occurred_at zero", withField(t, "occurred_at", `"0001-01-01T00:00:00Z"`), wire.KindInvalidField, "occurred_at",
			"invalid_field: occurred_at: must not be the zero time"},
		{"occurred_at zero with an offset", withField(t, "occurred_at", `"0001-01-01T01:30:00+01:30"`), wire.KindInvalidField, "occurred_at",
			"invalid_field: occurred_at: must not be the zero time"},
		{"duplicate order_id", `{"order_id":"O-1","order_id":"O-2"}`, wire.KindMalformedJSON, "", "malformed_json: duplicate key order_id"},
		{"duplicate order_id after a valid body", withKey(validBody, `"order_id"`, `"o-2"`), wire.KindMalformedJSON, "",
			"malformed_json: duplicate key order_id"},
		{"duplicate order_id escaped", withKey(validBody, `"order\u005fid"`, `"o-2"`), wire.KindMalformedJSON, "",
			"malformed_json: duplicate key order_id"},
		{"duplicate unknown field", withKey(withKey(validBody, `"note"`, `1`), `"note"`, `2`), wire.KindMalformedJSON, "",
			"malformed_json: duplicate key note"},
		{"order_id in another case", withKey(validBody, `"ORDER_ID"`, `"o-2"`), wire.KindMalformedJSON, "",
			`malformed_json: duplicate key order_id (as "ORDER_ID")`},
		{"duplicate nested key", withKey(validBody, `"items"`, `[{"sku":"a"},{"sku":"b","qty":1,"qty":2}]`), wire.KindMalformedJSON, "",
			"malformed_json: duplicate key items[1].qty"},
		{"duplicate deeply nested key", withKey(validBody, `"x"`, `{"y":{"a b":{"z":1,"z":2}}}`), wire.KindMalformedJSON, "",
			`malformed_json: duplicate key x.y."a b".z`},
		{"bad status", withField(t, "status", `"REFUNDED"`), wire.KindInvalidField, "status",
			`invalid_field: status: "REFUNDED" is not a lifecycle state`},
		{"empty event_id", withField(t, "event_id", `""`), wire.KindInvalidField, "event_id", "invalid_field: event_id: is required"},
		{"bad order_id", withField(t, "order_id", `"o/1"`), wire.KindInvalidField, "order_id",
			"invalid_field: order_id: must be 1-64 characters of [A-Za-z0-9_.:-]"},
		{"user_id zero", withField(t, "user_id", `0`), wire.KindInvalidField, "user_id", "invalid_field: user_id: must be > 0"},
		{"version zero", withField(t, "version", `0`), wire.KindInvalidField, "version", "invalid_field: version: must be >= 1"},
		{"negative amount", withField(t, "amount_cents", `-1`), wire.KindInvalidField, "amount_cents", "invalid_field: amount_cents: must be >= 0"},
		{"producer_id too long", withField(t, "producer_id", `"`+strings.Repeat("p", 65)+`"`), wire.KindInvalidField, "producer_id",
			`invalid_field: producer_id: "` + strings.Repeat("p", 65) + `" must be 1-64 characters of [A-Za-z0-9._:-]`},
		{"producer_id with a space", withField(t, "producer_id", `"shop 1"`), wire.KindInvalidField, "producer_id",
			`invalid_field: producer_id: "shop 1" must be 1-64 characters of [A-Za-z0-9._:-]`},
		{"producer_id with an ESC", withField(t, "producer_id", `"p\u001b[31m"`), wire.KindInvalidField, "producer_id",
			`invalid_field: producer_id: "p\x1b[31m" must be 1-64 characters of [A-Za-z0-9._:-]`},
		{"producer_id not ASCII", withField(t, "producer_id", `"prodücer"`), wire.KindInvalidField, "producer_id",
			`invalid_field: producer_id: "prodücer" must be 1-64 characters of [A-Za-z0-9._:-]`},
		{"seq zero", withField(t, "seq", `0`), wire.KindInvalidField, "seq", "invalid_field: seq: must be >= 1"},
		{"seq negative", withField(t, "seq", `-3`), wire.KindInvalidField, "seq", "invalid_field: seq: must be >= 1"},
		{"seq without producer_id", withField(t, "producer_id", ""), wire.KindInvalidField, "seq", "invalid_field: seq: needs a producer_id"},
		{"seq with a null producer_id", withField(t, "producer_id", "null"), wire.KindInvalidField, "seq", "invalid_field: seq: needs a producer_id"},
		{"seq with an empty producer_id", withField(t, "producer_id", `""`), wire.KindInvalidField, "seq", "invalid_field: seq: needs a producer_id"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, err := Decode([]byte(c.body))
			if err == nil {
				t.Fatalf("Decode accepted %q as %+v", c.body, e)
			}
			var r *Rejection
			if !errors.As(err, &r) || !errors.Is(err, ErrRejected) {
				t.Fatalf("error %v (%T) is not a *Rejection wrapping ErrRejected", err, err)
			}
			if r.Kind != c.kind || r.Field != c.field || r.Reason != c.reason {
				t.Fatalf("rejection = {kind %q field %q reason %q}, want {%q %q %q}", r.Kind, r.Field, r.Reason, c.kind, c.field, c.reason)
			}
			if e != (fsm.Event{}) {
				t.Fatalf("rejected decode returned a non-zero event %+v", e)
			}
		})
	}
}

func TestDecodeAcceptsExactlyMaxBodySize(t *testing.T) {
	body := []byte(validBody)
	pad := wire.MaxBodySize - len(body) - len(`,"pad":""`)
	b := strings.TrimSuffix(validBody, "}") + `,"pad":"` + strings.Repeat("x", pad) + `"}`
	if len(b) != wire.MaxBodySize {
		t.Fatalf("test body is %d bytes", len(b))
	}
	if _, err := Decode([]byte(b)); err != nil {
		t.Fatalf("Decode of a %d-byte body: %v", len(b), err)
	}
	if _, err := Decode([]byte(b + " ")); err == nil || !strings.HasPrefix(err.(*Rejection).Reason, wire.KindOversize) {
		t.Fatalf("Decode of a %d-byte body: %v, want oversize", len(b)+1, err)
	}
}

func TestLongReasonIsBoundedAndValidUTF8(t *testing.T) {
	status := strings.Repeat("é", 2000)
	_, err := Decode([]byte(withField(t, "status", `"`+status+`"`)))
	var r *Rejection
	if !errors.As(err, &r) {
		t.Fatalf("Decode: %v", err)
	}
	if len(r.Reason) > maxReasonLen || !utf8.ValidString(r.Reason) || !strings.HasPrefix(r.Reason, "invalid_field: status: ") {
		t.Fatalf("reason of %d bytes, valid UTF-8 %v: %.80q", len(r.Reason), utf8.ValidString(r.Reason), r.Reason)
	}
}

func TestCheckEnvelope(t *testing.T) {
	e := fsm.Event{OrderID: "o-1", Status: fsm.Paid}
	for _, c := range []struct {
		keys, tag string
		want      []string
	}{
		{"o-1", "PAID", nil},
		{"x o-1", "PAID", nil},
		{"", "PAID", []string{MismatchKeys}},
		{"o-2", "SHIPPED", []string{MismatchKeys, MismatchTag}},
		{"o-1", "", []string{MismatchTag}},
	} {
		got := CheckEnvelope(e, c.keys, c.tag)
		if strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("CheckEnvelope(keys %q, tag %q) = %v, want %v", c.keys, c.tag, got, c.want)
		}
	}
}

func TestDecodeDeepNesting(t *testing.T) {
	body := `{"a":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`
	_, err := Decode([]byte(body))
	var r *Rejection
	if !errors.As(err, &r) || r.Kind != wire.KindMalformedJSON {
		t.Fatalf("Decode of 20000-deep nesting: %v, want malformed_json", err)
	}
}

// TestDecodeAcceptsContractProducerIDs: producer IDs of the contract's
// charset up to 64 characters are accepted, and so is a producer_id
// without a seq (nothing to record) or neither field.
func TestDecodeAcceptsContractProducerIDs(t *testing.T) {
	for _, body := range []string{
		withField(t, "producer_id", `"shop-1.eu:west_2"`),
		withField(t, "producer_id", `"`+strings.Repeat("P", 64)+`"`),
		withField(t, "seq", ""),
		withField(t, "seq", "null"),
	} {
		if _, err := Decode([]byte(body)); err != nil {
			t.Errorf("Decode(%s): %v", body, err)
		}
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(validBody), &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "producer_id")
	delete(m, "seq")
	b, _ := json.Marshal(m)
	if _, err := Decode(b); err != nil {
		t.Errorf("Decode without producer_id and seq: %v", err)
	}
}

// TestEncodeRefusesBadSequenceFields: producers cannot write what the
// bridge would park.
func TestEncodeRefusesBadSequenceFields(t *testing.T) {
	e, err := Decode([]byte(validBody))
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []func(*fsm.Event){
		func(e *fsm.Event) { e.ProducerID = "a b" },
		func(e *fsm.Event) { e.ProducerID = strings.Repeat("p", 65) },
		func(e *fsm.Event) { e.ProducerID = "" },
		func(e *fsm.Event) { e.Seq = -1 },
	} {
		c := e
		bad(&c)
		if _, err := Encode(c); err == nil {
			t.Errorf("Encode accepted producer_id %q seq %d", c.ProducerID, c.Seq)
		}
	}
}

// A body names its order only unambiguously: the order_id of a valid
// event, or a valid order_id of a body refused only for its fields.
func TestBodyOrderID(t *testing.T) {
	valid := `{"event_id":"e","order_id":"o-1","user_id":1,"status":"PAID","version":2,"amount_cents":5,"occurred_at":"2026-01-01T00:00:00Z"}`
	for body, want := range map[string]string{
		valid:                               "o-1",
		`{"order_id":"o-2","user_id":0}`:    "o-2", // invalid fields, a valid order ID
		`{"order_id":"o 3"}`:                "",
		`{"order_id":7}`:                    "",
		`{"order_id":null}`:                 "",
		`{"keys":"o-1"}`:                    "",
		`{"order_id":"o-1","order_id":"x"}`: "", // ambiguous
		`{"order_id":"o-1","ORDER_ID":"x"}`: "",
		`{"order_id":`:                      "",
		`["o-1"]`:                           "",
		"":                                  "",
		`{"order_id":"o-1","pad":"` + strings.Repeat("x", wire.MaxBodySize) + `"}`: "",
	} {
		if got := BodyOrderID([]byte(body)); got != want {
			t.Errorf("BodyOrderID(%.60s) = %q, want %q", body, got, want)
		}
	}
}
