package bridge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/wire"
)

const goodBody = `{"event_id":"e1","order_id":"o-1","user_id":3,"status":"PAID","version":2,"amount_cents":500,"occurred_at":"2025-01-02T03:04:05Z"}`

func testHandler(t *testing.T, deliver DeliverFunc, park ParkFunc) *Handler {
	t.Helper()
	m, err := NewMetrics(prometheus.NewRegistry(), NewConsumerStats(func() ConsumerSource { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	return &Handler{log: slog.New(slog.NewTextHandler(io.Discard, nil)), deliver: deliver, park: park, metrics: m,
		retry: RetryPolicy{For: 300 * time.Millisecond, Attempt: 100 * time.Millisecond, Initial: 20 * time.Millisecond, Max: 50 * time.Millisecond},
		now:   time.Now}
}

func msg(body string) *primitive.MessageExt {
	m := &primitive.MessageExt{MsgId: "MSG1", StoreTimestamp: time.Now().Add(-time.Second).UnixMilli()}
	m.Topic = "T"
	m.Body = []byte(body)
	m.WithKeys([]string{"o-1"})
	m.WithTag("PAID")
	return m
}

func noPark(t *testing.T) ParkFunc {
	return func(context.Context, wire.DeadLetter) error {
		t.Error("a valid message was parked")
		return nil
	}
}

func noDeliver(t *testing.T) DeliverFunc {
	return func(context.Context, fsm.Event, wire.Envelope) error {
		t.Error("an invalid message was delivered")
		return nil
	}
}

func TestHandlerRetriesThenAcks(t *testing.T) {
	var calls atomic.Int32
	h := testHandler(t, func(_ context.Context, e fsm.Event, _ wire.Envelope) error {
		if e.OrderID != "o-1" || e.Version != 2 {
			t.Errorf("delivered %+v", e)
		}
		if calls.Add(1) < 3 {
			return errors.New("unavailable")
		}
		return nil
	}, noPark(t))
	if err := h.Handle(context.Background(), msg(goodBody)); err != nil {
		t.Fatalf("handle: %v", err)
	}
	if calls.Load() != 3 {
		t.Fatalf("%d delivery attempts, want 3", calls.Load())
	}
	if v := counterValue(t, h.metrics.messages.WithLabelValues(ResultSignalled)); v != 1 {
		t.Fatalf("signalled = %v", v)
	}
	if v := counterValue(t, h.metrics.attemptErrors.WithLabelValues(targetTemporal)); v != 2 {
		t.Fatalf("temporal attempt errors = %v", v)
	}
}

func TestHandlerGivesUpWithoutAck(t *testing.T) {
	var calls atomic.Int32
	h := testHandler(t, func(ctx context.Context, _ fsm.Event, _ wire.Envelope) error {
		calls.Add(1)
		<-ctx.Done() // each attempt runs into its timeout
		return ctx.Err()
	}, noPark(t))
	start := time.Now()
	err := h.Handle(context.Background(), msg(goodBody))
	if err == nil {
		t.Fatal("handle acked a message Temporal never accepted")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("handle took %s, beyond its retry budget", d)
	}
	if calls.Load() < 2 {
		t.Fatalf("%d attempts, want retries", calls.Load())
	}
	if v := counterValue(t, h.metrics.messages.WithLabelValues(ResultRetry)); v != 1 {
		t.Fatalf("retry = %v", v)
	}
}

func TestHandlerStopsRetryingWhenCancelled(t *testing.T) {
	h := testHandler(t, func(context.Context, fsm.Event, wire.Envelope) error { return errors.New("down") }, noPark(t))
	h.retry.For, h.retry.Initial, h.retry.Max = time.Minute, 10*time.Second, 10*time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := h.Handle(ctx, msg(goodBody)); err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("handle = %v, want the cancellation", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("handle took %s after cancellation", d)
	}
}

func TestHandlerParksInvalidAndKeepsItWhenParkingFails(t *testing.T) {
	var got wire.DeadLetter
	fail := true
	h := testHandler(t, noDeliver(t), func(_ context.Context, dl wire.DeadLetter) error {
		if fail {
			return errors.New("database down")
		}
		got = dl
		return nil
	})
	m := msg(`{"order_id":`)
	m.WithKeys([]string{"k\x00ey\xff"})
	m.WithProperty(primitive.PropertyOriginMessageId, "ORIGINAL")
	if err := h.Handle(context.Background(), m); err == nil {
		t.Fatal("handle acked an invalid message it could not park")
	}
	fail = false
	if err := h.Handle(context.Background(), m); err != nil {
		t.Fatalf("handle: %v", err)
	}
	want := wire.DeadLetter{Envelope: wire.Envelope{Topic: "T", MessageID: "ORIGINAL", Keys: "key\uFFFD", Tags: "PAID",
		Body: []byte(`{"order_id":`)}, Reason: "malformed_json: unexpected end of JSON input"}
	if got.Topic != want.Topic || got.MessageID != want.MessageID || got.Keys != want.Keys || got.Tags != want.Tags ||
		string(got.Body) != string(want.Body) || got.Reason != want.Reason || got.StoredAt.IsZero() {
		t.Fatalf("dead letter %+v, want %+v", got, want)
	}
	if v := counterValue(t, h.metrics.rejections.WithLabelValues("malformed_json")); v != 1 {
		t.Fatalf("malformed_json rejections = %v", v)
	}
	if v := counterValue(t, h.metrics.attemptErrors.WithLabelValues(targetPostgres)); v < 1 {
		t.Fatalf("postgres attempt errors = %v", v)
	}
}

func TestHandlerCountsEnvelopeMismatch(t *testing.T) {
	h := testHandler(t, func(context.Context, fsm.Event, wire.Envelope) error { return nil }, noPark(t))
	m := msg(goodBody)
	m.WithTag("CANCELLED")
	if err := h.Handle(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	if v := counterValue(t, h.metrics.mismatches.WithLabelValues("tag")); v != 1 {
		t.Fatalf("tag mismatches = %v", v)
	}
	if v := counterValue(t, h.metrics.mismatches.WithLabelValues("keys")); v != 0 {
		t.Fatalf("keys mismatches = %v", v)
	}
}

// counterValue reads a counter.
func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// batchMsg is a message of a batch whose body is an event of order at
// version v (or body itself when v is 0).
func batchMsg(id, order string, v int64, status string) *primitive.MessageExt {
	body := fmt.Sprintf(`{"event_id":"%s","order_id":"%s","user_id":3,"status":"%s","version":%d,"amount_cents":500,"occurred_at":"2025-01-02T03:04:05Z"}`,
		id, order, status, v)
	m := msg(body)
	m.MsgId = id
	m.WithKeys([]string{order})
	m.WithTag(status)
	return m
}

// TestHandleBatchGroupsByOrder: a batch of messages of three orders and an
// invalid one; the events of each order reach the delivery together, in
// the batch's order; an order with one event goes through the single-event
// delivery; the invalid message is parked; every message counts once.
func TestHandleBatchGroupsByOrder(t *testing.T) {
	var mu sync.Mutex
	many := map[string][]int64{}
	var single []string
	var parked int
	h := testHandler(t, func(_ context.Context, e fsm.Event, _ wire.Envelope) error {
		mu.Lock()
		defer mu.Unlock()
		single = append(single, e.Key().String())
		return nil
	}, func(context.Context, wire.DeadLetter) error {
		mu.Lock()
		defer mu.Unlock()
		parked++
		return nil
	})
	calls := 0
	h.WithDeliverMany(func(_ context.Context, orderID string, items []Item) error {
		mu.Lock()
		defer mu.Unlock()
		calls++
		for _, it := range items {
			if it.Event.OrderID != orderID || it.Source.MessageID == "" {
				t.Errorf("item %+v of order %s", it.Event.Key(), orderID)
			}
			many[orderID] = append(many[orderID], it.Event.Version)
		}
		return nil
	})
	bad := msg(`{"order_id":`)
	bad.MsgId = "BAD"
	batch := []*primitive.MessageExt{
		batchMsg("a3", "A", 3, "SHIPPED"), batchMsg("b1", "B", 1, "CREATED"), batchMsg("a1", "A", 1, "CREATED"),
		bad, batchMsg("c1", "C", 1, "CREATED"), batchMsg("a2", "A", 2, "PAID"), batchMsg("b2", "B", 2, "PAID"),
	}
	if err := h.HandleBatch(context.Background(), batch); err != nil {
		t.Fatalf("handle batch: %v", err)
	}
	if calls != 2 || !slices.Equal(many["A"], []int64{3, 1, 2}) || !slices.Equal(many["B"], []int64{1, 2}) {
		t.Errorf("%d batch deliveries: %v, want A [3 1 2] and B [1 2]", calls, many)
	}
	if !slices.Equal(single, []string{"C@1"}) || parked != 1 {
		t.Errorf("single deliveries %v, parked %d; want [C@1] and 1", single, parked)
	}
	if v := counterValue(t, h.metrics.messages.WithLabelValues(ResultSignalled)); v != 6 {
		t.Errorf("signalled = %v, want 6", v)
	}
	if v := counterValue(t, h.metrics.messages.WithLabelValues(ResultParked)); v != 1 {
		t.Errorf("parked = %v, want 1", v)
	}
}

// TestHandleBatchFailsWholeWhenOneOrderFails: one order's delivery keeps
// failing; the batch is not acknowledged (the broker delivers all of it
// again) and its messages count as retries, though the other order's went
// through.
func TestHandleBatchFailsWholeWhenOneOrderFails(t *testing.T) {
	h := testHandler(t, noDeliver(t), noPark(t))
	h.WithDeliverMany(func(_ context.Context, orderID string, _ []Item) error {
		if orderID == "B" {
			return errors.New("temporal unavailable")
		}
		return nil
	})
	batch := []*primitive.MessageExt{batchMsg("a1", "A", 1, "CREATED"), batchMsg("b1", "B", 1, "CREATED"),
		batchMsg("a2", "A", 2, "PAID"), batchMsg("b2", "B", 2, "PAID")}
	if err := h.HandleBatch(context.Background(), batch); err == nil || !strings.Contains(err.Error(), "temporal unavailable") {
		t.Fatalf("handle batch: %v, want the delivery's error", err)
	}
	if v := counterValue(t, h.metrics.messages.WithLabelValues(ResultRetry)); v != 2 {
		t.Errorf("retry = %v, want 2 (order B's messages)", v)
	}
	if v := counterValue(t, h.metrics.messages.WithLabelValues(ResultSignalled)); v != 2 {
		t.Errorf("signalled = %v, want 2 (order A's messages)", v)
	}
}

// A dead letter names the message by the ID its producer's send returned:
// UNIQ_KEY, kept across redeliveries, rather than the broker's ID of the
// first copy that a redelivery carries as ORIGIN_MESSAGE_ID.
func TestDeadLetterKeepsTheProducersMessageID(t *testing.T) {
	var parked []wire.DeadLetter
	h := testHandler(t, noDeliver(t), func(_ context.Context, dl wire.DeadLetter) error {
		parked = append(parked, dl)
		return nil
	})
	first := msg(`{"order_id":`)
	first.MsgId = "C0A8000100002A9F0000000000000001"
	first.WithProperty(primitive.PropertyUniqueClientMessageIdKeyIndex, first.MsgId)
	again := msg(`{"order_id":`)
	again.MsgId = first.MsgId
	again.WithProperty(primitive.PropertyUniqueClientMessageIdKeyIndex, first.MsgId)
	again.WithProperty(primitive.PropertyOriginMessageId, "7F00000100002A9F00000000000004D2")
	again.ReconsumeTimes = 1
	legacy := msg(`{"order_id":`)
	legacy.MsgId = "7F00000100002A9F0000000000000999"
	legacy.WithProperty(primitive.PropertyOriginMessageId, "7F00000100002A9F00000000000004D2")
	for _, m := range []*primitive.MessageExt{first, again, legacy} {
		if err := h.Handle(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"C0A8000100002A9F0000000000000001", "C0A8000100002A9F0000000000000001", "7F00000100002A9F00000000000004D2"}
	if len(parked) != len(want) {
		t.Fatalf("%d dead letters, want %d", len(parked), len(want))
	}
	for i, d := range parked {
		if d.MessageID != want[i] {
			t.Errorf("dead letter %d: message ID %s, want %s", i, d.MessageID, want[i])
		}
	}
}
