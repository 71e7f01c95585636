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

// Judge answers what ApplyEvent then decides, for every kind of outcome,
// and writes nothing.
func TestJudgeAgreesWithApplyEvent(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	id := uniq.Name("judge")
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	ev := func(v int64, st fsm.Status, amount int64) fsm.Event {
		return fsm.Event{EventID: "e", OrderID: id, UserID: 7, Status: st, Version: v, AmountCents: amount,
			OccurredAt: at.Add(time.Duration(v) * time.Minute)}
	}
	conflicting := ev(3, fsm.Paid, 5000)
	conflicting.OccurredAt = conflicting.OccurredAt.Add(time.Second)
	rows := func() (n int64) {
		t.Helper()
		if err := s.DB().Raw(`SELECT (SELECT count(*) FROM order_events) + (SELECT count(*) FROM orders) +
			(SELECT count(*) FROM dead_letters)`).Scan(&n).Error; err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, c := range []struct {
		name string
		e    fsm.Event
		want fsm.Outcome
	}{
		{"new order", ev(1, fsm.Created, 5000), fsm.Applied},
		{"repeat", ev(1, fsm.Created, 5000), fsm.Duplicate},
		{"gap", ev(3, fsm.Paid, 5000), fsm.Applied},
		{"conflicting copy", conflicting, fsm.Conflict},
		{"late skipped version", ev(2, fsm.Created, 5000), fsm.Stale},
		{"cancel", ev(4, fsm.Cancelled, 5000), fsm.Applied},
		{"after a terminal status", ev(5, fsm.Shipped, 5000), fsm.Illegal},
	} {
		before := rows()
		j, err := s.Judge(ctx, c.e)
		if err != nil {
			t.Fatalf("%s: judge: %v", c.name, err)
		}
		if rows() != before {
			t.Fatalf("%s: Judge wrote rows", c.name)
		}
		res, err := s.ApplyEvent(ctx, c.e, wire.Envelope{})
		if err != nil {
			t.Fatalf("%s: apply: %v", c.name, err)
		}
		applied := res.Decision.Outcome
		if res.Repeat {
			applied = fsm.Duplicate
		}
		if j.Decision.Outcome != c.want || applied != c.want {
			t.Errorf("%s: Judge says %s, ApplyEvent %s; want %s", c.name, j.Decision.Outcome, applied, c.want)
		}
		if j.Decision.Points != res.Decision.Points && !res.Repeat {
			t.Errorf("%s: Judge moves %q points, ApplyEvent %q", c.name, j.Decision.Points, res.Decision.Points)
		}
	}
	if _, err := s.Judge(ctx, fsm.Event{OrderID: id}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("judge of an invalid event: %v, want ErrInvalid", err)
	}
}

// A dead letter is marked replayed once, with its outcome; the outcome can
// be filled in later, the first time is kept.
func TestMarkReplayed(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	p, err := s.ParkDeadLetter(ctx, wire.DeadLetter{Envelope: wire.NewEnvelope("T", "m-1", "o-1", "PAID",
		[]byte(`{}`), time.Time{}, false), Reason: "missing_field: event_id: is required"})
	if err != nil {
		t.Fatal(err)
	}
	if d, _, _ := s.DeadLetter(ctx, p.ID); d.ReplayedAt != nil || d.ReplayOutcome != "" {
		t.Fatalf("fresh dead letter looks replayed: %+v", d)
	}
	if ok, err := s.MarkReplayed(ctx, p.ID, store.ReplayDelivered); !ok || err != nil {
		t.Fatalf("mark: %v %v", ok, err)
	}
	first, _, _ := s.DeadLetter(ctx, p.ID)
	if first.ReplayedAt == nil || first.ReplayOutcome != store.ReplayDelivered {
		t.Fatalf("after mark: %+v", first)
	}
	if ok, err := s.MarkReplayed(ctx, p.ID, string(fsm.Applied)); !ok || err != nil {
		t.Fatalf("mark again: %v %v", ok, err)
	}
	second, _, _ := s.DeadLetter(ctx, p.ID)
	if !second.ReplayedAt.Equal(*first.ReplayedAt) || second.ReplayOutcome != string(fsm.Applied) {
		t.Errorf("after the outcome was filled in: %+v (first replay %v)", second, first.ReplayedAt)
	}
	if ok, err := s.MarkReplayed(ctx, 1<<40, string(fsm.Applied)); ok || err != nil {
		t.Errorf("mark of a missing dead letter: %v %v", ok, err)
	}
	if _, err := s.MarkReplayed(ctx, p.ID, "maybe"); err == nil {
		t.Error("an unknown replay outcome was stored")
	}
}
