package bridge

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

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

// TestHandlerRecordsABatchsNumbersAtOnce: the numbers of a batch's
// messages, three events of one order delivered one after another, are
// recorded by concurrent calls once the batch's deliveries
// are over, so that a recorder committing concurrent calls together
// (store.SeqRecorder) carries them in one commit: a recorder that answers
// only once all three calls are in flight lets the batch be acked.
func TestHandlerRecordsABatchsNumbersAtOnce(t *testing.T) {
	var inFlight atomic.Int32
	all := make(chan struct{})
	record := func(ctx context.Context, _ string, _ int64) error {
		if inFlight.Add(1) == 3 {
			close(all)
		}
		select {
		case <-all:
			return nil
		case <-time.After(3 * time.Second):
			return errors.New("the batch's numbers were recorded one after another")
		}
	}
	var delivered atomic.Int32
	h := testHandler(t, func(context.Context, fsm.Event, wire.Envelope) error { delivered.Add(1); return nil }, noPark(t)).
		WithRecorder(record)
	body := func(version, seq int) string {
		return fmt.Sprintf(`{"event_id":"e%d","order_id":"o-1","user_id":3,"status":"CREATED","version":%d,"amount_cents":500,"occurred_at":"2025-01-02T03:04:05Z","producer_id":"p","seq":%d}`,
			version, version, seq)
	}
	msgs := []*primitive.MessageExt{msg(body(1, 1)), msg(body(2, 2)), msg(body(3, 3))}
	if err := h.HandleBatch(context.Background(), msgs); err != nil {
		t.Fatal(err)
	}
	if n := inFlight.Load(); n != 3 {
		t.Fatalf("%d numbers recorded, want 3", n)
	}
	if n := delivered.Load(); n != 3 {
		t.Fatalf("%d events delivered, want 3", n)
	}
}
