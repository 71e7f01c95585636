package workflows_test

import (
	"bytes"
	"compress/zlib"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/converter"

	"github.com/orderflow/orderflow/message"
	"github.com/orderflow/orderflow/wire"
	"github.com/orderflow/orderflow/workflows"
)

// fuzzSeeds are the bodies FuzzDelivery starts from: the +24:00 offset
// that once passed message.Parse and then failed to encode for Temporal,
// the largest deliveries a body within the contract can make, and the
// seeds of message's FuzzDecode and bridge's FuzzReceive.
func fuzzSeeds() []string {
	valid := `{"event_id":"e","order_id":"o-1","user_id":1,"status":"PAID","version":2,"amount_cents":500,"occurred_at":"2025-01-02T03:04:05Z"}`
	event := func(eventID, occurredAt string) string {
		return `{"event_id":"` + eventID + `","order_id":"o-1","user_id":1,"status":"PAID","version":2,"amount_cents":500,"occurred_at":"` + occurredAt + `"}`
	}
	// A body of the contract's largest size whose event ID is all '<',
	// which JSON encoders write as \u003c: six bytes each.
	widest := event(strings.Repeat("<", wire.MaxBodySize-len(event("", "2025-01-02T03:04:05Z"))), "2025-01-02T03:04:05Z")
	zlibOf := func(b []byte) string {
		var out bytes.Buffer
		zw, _ := zlib.NewWriterLevel(&out, zlib.BestCompression)
		_, _ = zw.Write(b)
		_ = zw.Close()
		return out.String()
	}
	seeds := []string{
		event("e", "2026-11-25T12:00:00+24:00"),
		event("e", "2026-11-25T12:00:00-24:00"),
		event("e", "2026-11-25T12:00:00+23:59"),
		event("e", "0000-01-01T00:00:00+00:01"),
		event("e", "9999-12-31T23:59:59.999999999-00:01"),
		widest,
		strings.Replace(widest, `"<<<<<<`, `"\u2028`, 1),
		// FuzzDecode's.
		`{"event_id":"e-1","order_id":"o-1","user_id":7,"status":"PAID","version":2,` +
			`"amount_cents":12345,"occurred_at":"2025-03-01T10:00:00.123456Z","producer_id":"p1","seq":9}`,
		`{"event_id":"e","order_id":"o","user_id":1,"status":"CREATED","version":1,"amount_cents":0,"occurred_at":"2025-01-01T00:00:00Z"}`,
		`{"event_id":"e","order_id":"o","user_id":1,"status":"CANCELLED","version":9223372036854775807,"amount_cents":0,"occurred_at":"9999-12-31T23:59:59.999999999-23:59"}`,
		``, ` `, `{`, `}`, `{"a":`, `{"event_id":"e",}`, `{'event_id':'e'}`, `nul`, `[]`, `[{}]`, `"x"`, `42`, `-0`, `true`, `null`, `{}`,
		`{"user_id":1e400}`, `{"user_id":-9223372036854775809}`, `{"version":18446744073709551616}`, `{"seq":0.0000001}`,
		`{"user_id":"١٢٣"}`, `{"order_id":"ｏｒｄｅｒ"}`, `{"order_id":"o\u202e1"}`, `{"event_id":"\ud800"}`, "{\"event_id\":\"\xed\xa0\x80\"}",
		`{"status":"paid"}`, `{"status":"PAID\u0000"}`, `{"occurred_at":"2025-13-45T99:99:99Z"}`, `{"occurred_at":"2025-01-01T00:00:00+24:00"}`,
		`{"order_id":["o"]}`, `{"order_id":{"id":"o"}}`, `{"a":[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]}`,
		strings.Repeat("[", 200) + strings.Repeat("]", 200),
		`{"order_id":"o","order_id":"p"}`, "\ufeff{}", "{\"event_id\":\"e\"}\x00",
		`{"pad":"` + strings.Repeat("x", wire.MaxBodySize-9) + `"}`,
		`{"pad":"` + strings.Repeat("x", wire.MaxBodySize-10) + `"}`,
		// FuzzReceive's (as bodies: compressed ones as stored).
		valid, zlibOf([]byte(valid)), zlibOf([]byte(valid))[:10],
		strings.Repeat("x", wire.MaxBodySize+1),
		zlibOf(bytes.Repeat([]byte("a"), wire.MaxBodySize)),
	}
	return seeds
}

// FuzzDelivery: every body message.Parse accepts becomes a delivery, alone
// (order-event) and in a batch (order-events), that the SDK's default data
// converter encodes without error, within SignalBudget (under the engine's
// blob limit), and that decodes back to the same event; every body Parse
// rejects has a reason whose first word is one of wire.Kinds. The keys
// and tag are the envelope's text, which the delivery carries too.
func FuzzDelivery(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add([]byte(s), "o-1", "PAID")
	}
	f.Add([]byte(fuzzSeeds()[5]), strings.Repeat("<", 2000), strings.Repeat("&", 2000))
	f.Fuzz(func(t *testing.T, body []byte, keys, tags string) {
		env := wire.NewEnvelope("ORDER_EVENTS", "7F0000010000000000000000", keys, tags, body,
			time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC), false)
		r := message.Parse(env)
		if r.Rejection != nil {
			kind, _, _ := strings.Cut(r.Rejection.Reason, ":")
			if r.Rejection.Reason == "" || !slices.Contains(wire.Kinds, kind) {
				t.Fatalf("rejection reason %q: its first word is not one of %v", r.Rejection.Reason, wire.Kinds)
			}
			return
		}
		d := workflows.Delivery{Event: r.Event, Source: &env}
		for name, v := range map[string]any{"order-event": d, "order-events": workflows.Batch{Deliveries: []workflows.Delivery{d}}} {
			n, err := workflows.EncodedSize(v)
			if err != nil {
				t.Fatalf("%s of accepted body %.200q: the data converter refuses it: %v", name, body, err)
			}
			if n > workflows.SignalBudget {
				t.Fatalf("%s of accepted body %.200q: %d bytes encoded, over the signal budget %d", name, body, n, workflows.SignalBudget)
			}
		}
		p, err := converter.GetDefaultDataConverter().ToPayloads(d)
		if err != nil {
			t.Fatal(err)
		}
		var back workflows.Delivery
		if err := converter.GetDefaultDataConverter().FromPayloads(p, &back); err != nil {
			t.Fatalf("delivery of %.200q does not decode: %v", body, err)
		}
		if back.Key() != r.Event.Key() || back.ContentHash() != r.Event.ContentHash() || back.EventID != r.Event.EventID ||
			!back.OccurredAt.Equal(r.Event.OccurredAt) || back.Source == nil || !bytes.Equal(back.Source.Body, body) {
			t.Fatalf("delivery of %.200q decodes as %+v, want %+v", body, back.Event, r.Event)
		}
	})
}
