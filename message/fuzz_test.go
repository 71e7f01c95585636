package message

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/orderflow/orderflow/wire"
)

// FuzzDecode checks that no body makes Decode panic, that every rejection is
// a *Rejection with a known kind and a non-empty, storable reason, and that
// every accepted event passes Validate and survives a round trip through its
// own JSON encoding unchanged.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		validBody,
		`{"event_id":"e","order_id":"o","user_id":1,"status":"CREATED","version":1,"amount_cents":0,"occurred_at":"2025-01-01T00:00:00Z"}`,
		`{"event_id":"e","order_id":"o","user_id":1,"status":"CANCELLED","version":9223372036854775807,"amount_cents":0,"occurred_at":"9999-12-31T23:59:59.999999999-23:59"}`,
		``, ` `, `{`, `}`, `{"a":`, `{"event_id":"e",}`, `{'event_id':'e'}`, `nul`, `[]`, `[{}]`, `"x"`, `42`, `-0`, `true`, `null`, `{}`,
		`{"user_id":1e400}`, `{"user_id":-9223372036854775809}`, `{"version":18446744073709551616}`, `{"seq":0.0000001}`,
		`{"user_id":"١٢٣"}`, `{"order_id":"ｏｒｄｅｒ"}`, `{"order_id":"o\u202e1"}`, `{"event_id":"\ud800"}`, "{\"event_id\":\"\xed\xa0\x80\"}",
		`{"status":"paid"}`, `{"status":"PAID\u0000"}`, `{"occurred_at":"2025-13-45T99:99:99Z"}`, `{"occurred_at":"2025-01-01T00:00:00+24:00"}`,
		`{"order_id":["o"]}`, `{"order_id":{"id":"o"}}`, `{"a":[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]}`,
		strings.Repeat("[", 200) + strings.Repeat("]", 200),
		`{"order_id":"o","order_id":"p"}`, "\ufeff{}", "{\"event_id\":\"e\"}\x00",
		// Oversized: one byte past the bound, and exactly at it.
		`{"pad":"` + strings.Repeat("x", wire.MaxBodySize-9) + `"}`,
		`{"pad":"` + strings.Repeat("x", wire.MaxBodySize-10) + `"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		e, err := Decode(body)
		if err != nil {
			var r *Rejection
			if !errors.As(err, &r) || !errors.Is(err, ErrRejected) {
				t.Fatalf("error %v (%T) is not a *Rejection", err, err)
			}
			if !slices.Contains(wire.Kinds, r.Kind) {
				t.Fatalf("unknown rejection kind %q", r.Kind)
			}
			if r.Reason == "" || !strings.HasPrefix(r.Reason, r.Kind+": ") || len(r.Reason) > maxReasonLen ||
				!utf8.ValidString(r.Reason) || strings.ContainsRune(r.Reason, 0) {
				t.Fatalf("bad reason %q for kind %q", r.Reason, r.Kind)
			}
			return
		}
		if verr := e.Validate(); verr != nil {
			t.Fatalf("accepted event fails Validate: %v", verr)
		}
		again, err := json.Marshal(e)
		if err != nil {
			t.Fatalf("accepted event does not encode: %v", err)
		}
		e2, err := Decode(again)
		if err != nil {
			t.Fatalf("re-encoded event %s rejected: %v", again, err)
		}
		if e2.ContentHash() != e.ContentHash() || e2.EventID != e.EventID || e2.ProducerID != e.ProducerID || e2.Seq != e.Seq {
			t.Fatalf("round trip changed the event: %+v -> %+v", e, e2)
		}
	})
}
