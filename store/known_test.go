package store_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/store"
	"github.com/orderflow/orderflow/wire"
)

// ApplyKnown decides against what its caller knows only while the
// database holds the same: a known order that is ahead of the stored one
// (a restored backup), behind it, or absent from it is overruled, and the
// stored order decides.
func TestApplyKnownNeverDecidesAgainstTheDatabase(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	ev := func(id string, v int64, st fsm.Status) fsm.Event {
		return fsm.Event{EventID: "e", OrderID: id, UserID: 7, Status: st, Version: v, AmountCents: 5000,
			OccurredAt: at.Add(time.Duration(v) * time.Minute)}
	}
	// stored is the orders row as the table holds it (Found false when
	// absent), read here rather than through the store.
	stored := func(id string) store.Known {
		t.Helper()
		k := store.Known{Order: fsm.Order{OrderID: id}}
		var purchaser sql.NullInt64
		err := s.DB().Raw(`SELECT user_id, status, version, amount_cents, content_hash, purchased, purchase_points,
			purchase_user_id, refunded FROM orders WHERE order_id = ?`, id).Row().
			Scan(&k.Order.UserID, &k.Order.Status, &k.Order.Version, &k.Order.AmountCents, &k.Order.ContentHash,
				&k.Order.Purchased, &k.Order.PurchasePoints, &purchaser, &k.Order.Refunded)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return store.Known{}
		case err != nil:
			t.Fatal(err)
		}
		k.Found, k.Order.PurchaseUserID = true, purchaser.Int64
		return k
	}
	apply := func(name string, e fsm.Event, known store.Known) store.Applied {
		t.Helper()
		res, err := s.ApplyKnown(ctx, e, wire.Envelope{}, known)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return res
	}
	want := func(name, id string, outcome fsm.Outcome, repeat bool, res store.Applied, status fsm.Status, version int64) {
		t.Helper()
		if res.Decision.Outcome != outcome || res.Repeat != repeat {
			t.Errorf("%s: %s (repeat %v), want %s (repeat %v)", name, res.Decision.Outcome, res.Repeat, outcome, repeat)
		}
		if l := stored(id); !l.Found || l.Order.Status != status || l.Order.Version != version {
			t.Errorf("%s: stored %s v%d (found %v), want %s v%d", name, l.Order.Status, l.Order.Version, l.Found, status, version)
		}
	}

	id := uniq.Name("known")
	for _, e := range []fsm.Event{ev(id, 1, fsm.Created), ev(id, 2, fsm.Paid)} {
		if _, err := s.ApplyEvent(ctx, e, wire.Envelope{}); err != nil {
			t.Fatal(err)
		}
	}
	atPaid := stored(id).Order

	// The caller knows the stored row: its decision is written.
	res := apply("known row", ev(id, 3, fsm.Shipped), store.Known{Found: true, Order: atPaid})
	want("known row", id, fsm.Applied, false, res, fsm.Shipped, 3)

	// A retry of that step (its completion was lost) finds the key
	// recorded: a repeat of the first decision, nothing written twice.
	res = apply("retried step", ev(id, 3, fsm.Shipped), store.Known{Found: true, Order: atPaid})
	want("retried step", id, fsm.Applied, true, res, fsm.Shipped, 3)

	// The caller is ahead (the database was restored to an older state):
	// it would call v4 stale against its v5, the database applies it.
	ahead := stored(id).Order
	ahead.Version, ahead.Status = 5, fsm.Completed
	res = apply("caller ahead", ev(id, 4, fsm.Delivered), store.Known{Found: true, Order: ahead})
	want("caller ahead", id, fsm.Applied, false, res, fsm.Delivered, 4)

	// The caller is ahead by the version alone: without a gap by its
	// count, with one by the database's.
	ahead = stored(id).Order
	ahead.Version = 5
	res = apply("caller ahead by a version", ev(id, 6, fsm.Completed), store.Known{Found: true, Order: ahead})
	want("caller ahead by a version", id, fsm.Applied, false, res, fsm.Completed, 6)
	if !res.Decision.Gap {
		t.Errorf("caller ahead by a version: v4 to v6 is not a gap")
	}

	// The caller thinks the order new: the stored order decides.
	other := uniq.Name("known-other")
	if _, err := s.ApplyEvent(ctx, ev(other, 1, fsm.Created), wire.Envelope{}); err != nil {
		t.Fatal(err)
	}
	res = apply("caller thinks it new", ev(other, 2, fsm.Paid), store.Known{})
	want("caller thinks it new", other, fsm.Applied, false, res, fsm.Paid, 2)
	if res.Decision.Gap {
		t.Errorf("caller thinks it new: v1 to v2 is a gap")
	}

	// The caller is behind, at PAID: a cancel it would apply meets a key
	// recorded with another event (a conflict), a later one an order
	// COMPLETED (illegal); neither takes points back.
	res = apply("caller behind", ev(id, 3, fsm.Cancelled), store.Known{Found: true, Order: atPaid})
	want("caller behind", id, fsm.Conflict, false, res, fsm.Completed, 6)
	res = apply("caller behind, new key", ev(id, 7, fsm.Cancelled), store.Known{Found: true, Order: atPaid})
	want("caller behind, new key", id, fsm.Illegal, false, res, fsm.Completed, 6)
	if l := stored(id); l.Order.Refunded {
		t.Errorf("caller behind: the order was refunded")
	}

	// The caller knows a row the database lost: the event is judged as
	// the first of a new order (a gap, since it is not version 1).
	lost := uniq.Name("known-lost")
	known := atPaid
	known.OrderID = lost
	res = apply("row lost", ev(lost, 3, fsm.Shipped), store.Known{Found: true, Order: known})
	want("row lost", lost, fsm.Applied, false, res, fsm.Shipped, 3)
	if !res.Decision.Gap {
		t.Errorf("row lost: the first event of the order at version 3 is not a gap")
	}
}
