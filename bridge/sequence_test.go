package bridge

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/message"
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

func TestHandlerRecordsSequenceNumbers(t *testing.T) {
	var delivered, parked int
	var order []string
	rec := &recorder{fail: 1}
	h := testHandler(t, func(context.Context, fsm.Event, message.Envelope) error {
		delivered++
		order = append(order, "deliver")
		return nil
	}, func(context.Context, message.DeadLetter) error {
		parked++
		order = append(order, "park")
		return nil
	}).WithRecorder(func(ctx context.Context, p string, s int64) error {
		order = append(order, "record")
		return rec.record(ctx, p, s)
	})
	numbered := `{"event_id":"e1","order_id":"o-1","user_id":3,"status":"PAID","version":2,"amount_cents":500,"occurred_at":"2025-01-02T03:04:05Z","producer_id":"p","seq":7}`
	badNumbered := `{"event_id":"e2","order_id":"o-1","user_id":3,"status":"REFUNDED","version":3,"amount_cents":500,"occurred_at":"2025-01-02T03:04:05Z","producer_id":"p","seq":8}`
	for _, body := range []string{numbered, goodBody, badNumbered, `{"producer_id":"p","seq":"9"}`, `not json`} {
		if err := h.Handle(context.Background(), msg(body)); err != nil {
			t.Fatalf("handle %s: %v", body, err)
		}
	}
	if want := []recorded{{"p", 7}, {"p", 8}}; len(rec.got) != 2 || rec.got[0] != want[0] || rec.got[1] != want[1] {
		t.Fatalf("recorded %v, want %v", rec.got, want)
	}
	if delivered != 2 || parked != 3 {
		t.Fatalf("delivered %d, parked %d", delivered, parked)
	}
	// The number is recorded after the effect, and retried like it.
	if want := []string{"deliver", "record", "record", "deliver", "park", "record", "park", "park"}; len(order) != len(want) {
		t.Fatalf("calls %v, want %v", order, want)
	} else {
		for i := range want {
			if order[i] != want[i] {
				t.Fatalf("calls %v, want %v", order, want)
			}
		}
	}
}

func TestHandlerDoesNotAckAnUnrecordedNumber(t *testing.T) {
	rec := &recorder{fail: 1 << 30}
	h := testHandler(t, func(context.Context, fsm.Event, message.Envelope) error { return nil }, noPark(t)).
		WithRecorder(rec.record)
	body := `{"event_id":"e1","order_id":"o-1","user_id":3,"status":"PAID","version":2,"amount_cents":500,"occurred_at":"2025-01-02T03:04:05Z","producer_id":"p","seq":7}`
	if err := h.Handle(context.Background(), msg(body)); err == nil {
		t.Fatal("a message whose number could not be recorded was acked")
	}
	if v := counterValue(t, h.metrics.messages.WithLabelValues(ResultRetry)); v != 1 {
		t.Fatalf("retry = %v, want 1", v)
	}
}
