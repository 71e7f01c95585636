package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/message"
	"github.com/orderflow/orderflow/store"
	"github.com/orderflow/orderflow/wire"
)

// times_seen counts distinct messages: a retry of the same delivery (same
// message ID) counts once, another message carrying the same event counts
// again, and a call without a message ID always counts.
func TestTimesSeenCountsDistinctMessages(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	e := fsm.Event{EventID: "e-1", OrderID: uniq.Name("seen"), UserID: 3, Status: fsm.Created, Version: 1,
		AmountCents: 100, OccurredAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	from := func(id string) wire.Envelope { return wire.Envelope{Topic: "T", MessageID: id, Keys: e.OrderID} }
	timesSeen := func() (n int) {
		t.Helper()
		if err := s.DB().Raw(`SELECT times_seen FROM order_events WHERE order_id = ? AND version = 1`, e.OrderID).
			Scan(&n).Error; err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, c := range []struct {
		src  wire.Envelope
		want int
	}{
		{from("m-1"), 1}, // the first delivery
		{from("m-1"), 1}, // a retry of it (a local activity run again, a redelivery)
		{from("m-2"), 2}, // a producer retry: a new message, same event
		{from("m-1"), 2},
		{wire.Envelope{}, 3}, // no message ID: every call counts
	} {
		if _, err := s.ApplyEvent(ctx, e, c.src); err != nil {
			t.Fatal(err)
		}
		if got := timesSeen(); got != c.want {
			t.Fatalf("after a call from %q: times_seen %d, want %d", c.src.MessageID, got, c.want)
		}
	}
}

// Ping answers while the pool is open and fails once it is closed: the
// readiness checks of the worker and the bridge rely on it.
func TestPing(t *testing.T) {
	s := newStore(t)
	if err := s.Ping(context.Background()); err != nil {
		t.Fatalf("ping a live database: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(context.Background()); err == nil {
		t.Error("ping of a closed pool succeeded")
	}
}

// RecordedEvent answers with the content hash and first outcome of a
// recorded business key, found false for a key never recorded, and refuses
// an order ID the contract forbids.
func TestRecordedEvent(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	e := fsm.Event{EventID: "e-1", OrderID: uniq.Name("rec"), UserID: 3, Status: fsm.Created, Version: 1,
		AmountCents: 100, OccurredAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	if _, found, err := s.RecordedEvent(ctx, e.Key()); err != nil || found {
		t.Fatalf("before the event: found %v, err %v; want not found", found, err)
	}
	if _, err := s.ApplyEvent(ctx, e, wire.Envelope{}); err != nil {
		t.Fatal(err)
	}
	r, found, err := s.RecordedEvent(ctx, e.Key())
	if err != nil || !found || r.ContentHash != e.ContentHash() || r.Outcome != fsm.Applied {
		t.Fatalf("RecordedEvent(%s) = %+v, %v, %v; want hash %s, applied", e.Key(), r, found, err, e.ContentHash())
	}
	if _, found, err := s.RecordedEvent(ctx, fsm.Key{OrderID: e.OrderID, Version: 2}); err != nil || found {
		t.Fatalf("another version: found %v, err %v; want not found", found, err)
	}
	if _, _, err := s.RecordedEvent(ctx, fsm.Key{OrderID: "no spaces", Version: 1}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("invalid order ID: err %v, want ErrInvalid", err)
	}
}

// A conflicting copy applied without its message parks the event as a
// producer would have sent it: a body the decoder reads back as the event,
// keyed by the order and tagged with the status.
func TestConflictWithoutMessageParksTheEventsBody(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	e := fsm.Event{EventID: "e-1", OrderID: uniq.Name("cfl"), UserID: 3, Status: fsm.Created, Version: 1,
		AmountCents: 100, OccurredAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), ProducerID: "p-1", Seq: 4}
	if _, err := s.ApplyEvent(ctx, e, wire.Envelope{}); err != nil {
		t.Fatal(err)
	}
	other := e
	other.AmountCents = 200
	res, err := s.ApplyEvent(ctx, other, wire.Envelope{})
	if err != nil || res.Decision.Outcome != fsm.Conflict {
		t.Fatalf("conflicting copy: %+v, %v; want a conflict", res, err)
	}
	rows, err := s.DeadLetters(ctx, store.DeadLetterFilter{OrderID: e.OrderID})
	if err != nil || len(rows) != 1 {
		t.Fatalf("dead letters of %s: %d, %v; want 1", e.OrderID, len(rows), err)
	}
	d := rows[0]
	got, err := message.Decode(d.Body)
	if err != nil || got != other || d.Keys != e.OrderID || d.Tags != string(e.Status) {
		t.Errorf("parked %q (keys %q, tags %q) decodes to %+v, %v; want %+v keyed %q tagged %q",
			d.Body, d.Keys, d.Tags, got, err, other, e.OrderID, e.Status)
	}
}
