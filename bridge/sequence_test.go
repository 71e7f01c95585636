package bridge

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/wire"
)

type recorded struct {
	producerID string
	seq        int64
}

// recorder records into a slice, failing the first fail calls.
type recorder struct {
	mu   sync.Mutex
	got  []recorded
	fail int
}

func (r *recorder) record(_ context.Context, producerID string, seq int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail > 0 {
		r.fail--
		return errors.New("database away")
	}
	r.got = append(r.got, recorded{producerID, seq})
	return nil
}

// TestHandlerRecordsSequenceNumbers: the numbers of valid events are
// recorded after their effect; a parked message records nothing, whether
// it is invalid (a bad status, a forged producer_id, a seq without a
// producer) or a valid event Temporal refuses.
func TestHandlerRecordsSequenceNumbers(t *testing.T) {
	var delivered, parked int
	var order []string
	rec := &recorder{fail: 1}
	h := testHandler(t, func(_ context.Context, e fsm.Event, _ wire.Envelope) error {
		delivered++
		order = append(order, "deliver")
		if e.EventID == "refused" {
			return blobRefusal
		}
		return nil
	}, func(context.Context, wire.DeadLetter) error {
		parked++
		order = append(order, "park")
		return nil
	}).WithRecorder(func(ctx context.Context, p string, s int64) error {
		order = append(order, "record")
		return rec.record(ctx, p, s)
	})
	numbered := `{"event_id":"e1","order_id":"o-1","user_id":3,"status":"PAID","version":2,"amount_cents":500,"occurred_at":"2025-01-02T03:04:05Z","producer_id":"p","seq":7}`
	parkedBodies := []string{
		// an invalid status
		`{"event_id":"e2","order_id":"o-1","user_id":3,"status":"REFUNDED","version":3,"amount_cents":500,"occurred_at":"2025-01-02T03:04:05Z","producer_id":"p","seq":8}`,
		// a forged producer ID
		`{"event_id":"e3","order_id":"o-1","user_id":3,"status":"PAID","version":3,"amount_cents":500,"occurred_at":"2025-01-02T03:04:05Z","producer_id":"p\u001b[2J","seq":9}`,
		// a seq without a producer
		`{"event_id":"e4","order_id":"o-1","user_id":3,"status":"PAID","version":4,"amount_cents":500,"occurred_at":"2025-01-02T03:04:05Z","seq":10}`,
		// a valid event Temporal refuses for good: parked as undeliverable
		`{"event_id":"refused","order_id":"o-2","user_id":3,"status":"PAID","version":2,"amount_cents":500,"occurred_at":"2025-01-02T03:04:05Z","producer_id":"p","seq":11}`,
		`{"producer_id":"p","seq":12}`,
		`not json`,
	}
	for _, body := range append([]string{numbered, goodBody}, parkedBodies...) {
		if err := h.Handle(context.Background(), msg(body)); err != nil {
			t.Fatalf("handle %s: %v", body, err)
		}
	}
	if want := []recorded{{"p", 7}}; len(rec.got) != 1 || rec.got[0] != want[0] {
		t.Fatalf("recorded %v, want %v", rec.got, want)
	}
	if delivered != 3 || parked != len(parkedBodies) {
		t.Fatalf("delivered %d, parked %d, want 3 and %d", delivered, parked, len(parkedBodies))
	}
	// The number is recorded after the effect, and retried like it.
	want := []string{"deliver", "record", "record", "deliver", "park", "park", "park", "deliver", "park", "park", "park"}
	if !slices.Equal(order, want) {
		t.Fatalf("calls %v, want %v", order, want)
	}
}

func TestHandlerDoesNotAckAnUnrecordedNumber(t *testing.T) {
	rec := &recorder{fail: 1 << 30}
	h := testHandler(t, func(context.Context, fsm.Event, wire.Envelope) error { return nil }, noPark(t)).
		WithRecorder(rec.record)
	body := `{"event_id":"e1","order_id":"o-1","user_id":3,"status":"PAID","version":2,"amount_cents":500,"occurred_at":"2025-01-02T03:04:05Z","producer_id":"p","seq":7}`
	if err := h.Handle(context.Background(), msg(body)); err == nil {
		t.Fatal("a message whose number could not be recorded was acked")
	}
	if v := counterValue(t, h.metrics.messages.WithLabelValues(ResultRetry)); v != 1 {
		t.Fatalf("retry = %v, want 1", v)
	}
}
