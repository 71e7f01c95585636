package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/store"
	"github.com/orderflow/orderflow/wire"
)

// at is the place of the message at offset off of queue q of topic t on
// broker b.
func at(t string, q int, off int64) wire.QueueOffset {
	return wire.QueueOffset{Topic: t, Broker: "broker-a", QueueID: q, Offset: off}
}

// pointsByQueue reads the recovery points as next offsets by queue ID.
func pointsByQueue(t *testing.T, s *store.Store) map[int]store.RecoveryPoint {
	t.Helper()
	ps, err := s.RecoveryPoints(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]store.RecoveryPoint{}
	for _, p := range ps {
		out[p.QueueID] = p
	}
	return out
}

// A queue's point is the first offset from its seed up that has no
// receipt: receipts above a hole do not move it, and a point moved
// (MoveRecoveryPoints) keeps its place while the receipts below it go.
// A seed is recorded once.
func TestRecoveryPointsStopAtTheFirstMissingReceipt(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	n, err := s.SeedRecoveryPoints(ctx, []wire.QueueOffset{at("T", 0, 10), at("T", 1, 0), at("T", 2, 5)})
	if err != nil || n != 3 {
		t.Fatalf("seed: %d, %v", n, err)
	}
	// Queue 0: 10, 11, 12, then a hole at 13, then 14 and 15.
	// Queue 1: 1 and 2, but 0 is missing.
	// Queue 2: nothing. A receipt below a seed (4) counts for nothing.
	rs := []wire.QueueOffset{at("T", 0, 12), at("T", 0, 10), at("T", 0, 11), at("T", 0, 14), at("T", 0, 15),
		at("T", 1, 1), at("T", 1, 2), at("T", 2, 4)}
	if err := s.RecordReceipts(ctx, rs); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordReceipts(ctx, rs[:2]); err != nil { // a repeat is harmless
		t.Fatal(err)
	}
	want := map[int][2]int64{0: {13, 2}, 1: {0, 2}, 2: {5, 0}} // next, receipts above it
	check := func(when string) {
		t.Helper()
		got := pointsByQueue(t, s)
		for q, w := range want {
			if p := got[q]; p.Next != w[0] || p.Receipts != w[1] {
				t.Errorf("%s: queue %d: next %d with %d receipts above, want %d with %d", when, q, p.Next, p.Receipts, w[0], w[1])
			}
		}
	}
	check("before moving")
	moved, err := s.MoveRecoveryPoints(ctx)
	if err != nil || moved != 1 {
		t.Fatalf("MoveRecoveryPoints: %d moved, %v; want queue 0 alone", moved, err)
	}
	check("after moving")
	if p := pointsByQueue(t, s)[0]; p.Recorded != 13 {
		t.Errorf("queue 0's recorded point is %d, want 13", p.Recorded)
	}
	// The hole fills: queue 0's point runs to 16.
	if err := s.RecordReceipts(ctx, []wire.QueueOffset{at("T", 0, 13)}); err != nil {
		t.Fatal(err)
	}
	want[0] = [2]int64{16, 0}
	check("after the hole filled")
	// A second seed changes nothing.
	if n, err := s.SeedRecoveryPoints(ctx, []wire.QueueOffset{at("T", 0, 100), at("T", 1, 100)}); err != nil || n != 0 {
		t.Fatalf("a second seed recorded %d points, %v", n, err)
	}
	check("after a second seed")
	if err := s.RecordReceipts(ctx, []wire.QueueOffset{{Topic: "T", QueueID: 0, Offset: 1}}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a receipt with no broker: %v, want ErrInvalid", err)
	}
}

// ApplyEvent records its message's receipt with the event's effect,
// whatever the decision (applied, a repeat, stale), and an invalid event's
// message is settled too; an event with no queue records none.
func TestApplyEventRecordsTheReceipt(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	if _, err := s.SeedRecoveryPoints(ctx, []wire.QueueOffset{at("T", 0, 0)}); err != nil {
		t.Fatal(err)
	}
	orderID := uniq.Name("receipt")
	ev := func(version int64, status fsm.Status) fsm.Event {
		return fsm.Event{EventID: "e" + string(status), OrderID: orderID, UserID: 7, Status: status, Version: version,
			AmountCents: 1000, OccurredAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	}
	src := func(off int64) wire.Envelope {
		q := at("T", 0, off)
		return wire.Envelope{Topic: "T", MessageID: "m", Body: []byte("{}"), Queue: &q}
	}
	steps := []struct {
		e   fsm.Event
		off int64
	}{
		{ev(1, fsm.Created), 0}, // applied
		{ev(1, fsm.Created), 1}, // a repeat
		{ev(3, fsm.Shipped), 3}, // out of order: offset 2 is not there yet
	}
	for i, st := range steps {
		res, err := s.ApplyEvent(ctx, st.e, src(st.off))
		if err != nil {
			t.Fatalf("ApplyEvent at offset %d: %v", st.off, err)
		}
		if repeat := i == 1; res.Repeat != repeat {
			t.Fatalf("ApplyEvent at offset %d: repeat %v, want %v", st.off, res.Repeat, repeat)
		}
	}
	if p := pointsByQueue(t, s)[0]; p.Next != 2 || p.Receipts != 1 {
		t.Fatalf("point %d with %d receipts above, want 2 with 1 (offset 3)", p.Next, p.Receipts)
	}
	bad := ev(2, fsm.Paid)
	bad.UserID = 0
	if _, err := s.ApplyEvent(ctx, bad, src(2)); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("an invalid event: %v, want ErrInvalid", err)
	}
	if p := pointsByQueue(t, s)[0]; p.Next != 4 {
		t.Errorf("after the invalid event's message was settled: point %d, want 4", p.Next)
	}
	if _, err := s.ApplyEvent(ctx, ev(4, fsm.Delivered), wire.Envelope{Topic: "T"}); err != nil {
		t.Fatal(err)
	}
	if p := pointsByQueue(t, s)[0]; p.Next != 4 || p.Receipts != 0 {
		t.Errorf("an event with no queue moved the point: %+v", p)
	}
}
