package activities_test

import (
	"context"
	"testing"

	"github.com/orderflow/orderflow/activities"
	"github.com/orderflow/orderflow/api"
	"github.com/orderflow/orderflow/fsm"
)

// ApplyEventAndAward writes the ledger row its decision moves points with,
// on the user who paid, once: a redelivery finds it in place; an event that
// moves no points writes none; invalid input writes nothing.
func TestApplyEventAndAwardWritesTheRowOfItsDecision(t *testing.T) {
	a, rec := newActivities(t)
	ctx := context.Background()
	id := orderID("one-step")
	const payer, canceller = 42, 77
	step := func(e fsm.Event) activities.ApplyEventAndAwardResult {
		t.Helper()
		res, err := a.ApplyEventAndAward(ctx, activities.ApplyEventInput{Event: e})
		if err != nil {
			t.Fatalf("%s %s: %v", e.Key(), e.Status, err)
		}
		return res
	}
	if res := step(withUser(event(id, 1, fsm.Created, 12_345), payer)); res.Decision.Outcome != fsm.Applied || res.Award != nil {
		t.Fatalf("CREATED: %+v award %+v, want applied and no row", res.Decision, res.Award)
	}
	paid := step(withUser(event(id, 2, fsm.Paid, 12_345), payer))
	if w := paid.Award; w == nil || w.Row.Kind != fsm.Purchase || w.Row.Points != 123 || w.Row.UserID != payer ||
		!w.Inserted || w.Refused != "" {
		t.Fatalf("PAID: award %+v, want purchase +123 for user %d inserted", w, payer)
	}
	again := step(withUser(event(id, 2, fsm.Paid, 12_345), payer))
	if w := again.Award; !again.Repeat || w == nil || w.Row.Kind != fsm.Purchase || w.Inserted {
		t.Fatalf("PAID again: repeat %v award %+v, want a repeat finding the purchase row in place", again.Repeat, w)
	}
	cancel := step(withUser(event(id, 3, fsm.Cancelled, 12_345), canceller))
	if w := cancel.Award; w == nil || w.Row.Kind != fsm.Refund || w.Row.Points != -123 || w.Row.UserID != payer || !w.Inserted {
		t.Fatalf("CANCELLED: award %+v, want refund -123 for user %d inserted", w, payer)
	}
	if l := ledger(t, a.Store.DB(), id); l["purchase"] != 123 || l["refund"] != -123 || len(l) != 2 {
		t.Errorf("ledger %v, want purchase 123 and refund -123", l)
	}
	if rec.points[fsm.Purchase] != 123 || rec.points[fsm.Refund] != -123 {
		t.Errorf("points metrics %+v, want each row counted once", rec.points)
	}

	bad := event(id, 4, fsm.Shipped, 12_345)
	bad.Status = "LOST"
	_, err := a.ApplyEventAndAward(ctx, activities.ApplyEventInput{Event: bad})
	wantNonRetryable(t, err, api.ErrTypeInvalidEvent)
	if n := len(eventRows(t, a.Store.DB(), id)); n != 3 {
		t.Errorf("%d order_events rows after an invalid event, want 3", n)
	}
	checkInvariants(t, a.Store.DB())
}

// LoadOrderAndApply returns the order as the database held it before the
// event's write (read here with the test's own queries), and then applies
// the event as ApplyEventAndAward does: a new order, an event that moves
// points, and a redelivery that finds its key and its ledger row in place.
func TestLoadOrderAndApplyLoadsBeforeItsWrite(t *testing.T) {
	a, _ := newActivities(t)
	ctx := context.Background()
	db := a.Store.DB()
	id := orderID("load-apply")
	const payer = 42
	step := func(e fsm.Event) activities.LoadOrderAndApplyResult {
		t.Helper()
		before, found := loadOrderRow(t, db, id)
		keys := eventRows(t, db, id)
		res, err := a.LoadOrderAndApply(ctx, activities.ApplyEventInput{Event: e})
		if err != nil {
			t.Fatalf("%s %s: %v", e.Key(), e.Status, err)
		}
		l := res.Loaded
		if l.Found != found || (found && (string(l.Order.Status) != before.Status || l.Order.Version != before.Version)) {
			t.Fatalf("%s %s: loaded found=%v %s v%d, want found=%v %s v%d (as stored before the step)",
				e.Key(), e.Status, l.Found, l.Order.Status, l.Order.Version, found, before.Status, before.Version)
		}
		if len(l.Versions) != len(keys) {
			t.Fatalf("%s %s: loaded keys %v, want the %d stored before the step", e.Key(), e.Status, l.Versions, len(keys))
		}
		for v, row := range keys {
			if l.Versions[v] != row.ContentHash {
				t.Fatalf("%s %s: loaded hash of v%d %q, want %q", e.Key(), e.Status, v, l.Versions[v], row.ContentHash)
			}
		}
		return res
	}
	created := step(withUser(event(id, 1, fsm.Created, 12_345), payer))
	if created.Decision.Outcome != fsm.Applied || created.Repeat {
		t.Fatalf("CREATED: %+v repeat %v, want applied", created.Decision, created.Repeat)
	}
	paid := step(withUser(event(id, 2, fsm.Paid, 12_345), payer))
	if w := paid.Award; paid.Decision.Outcome != fsm.Applied || w == nil || w.Row.Kind != fsm.Purchase || !w.Inserted {
		t.Fatalf("PAID: %+v award %+v, want applied with the purchase row inserted", paid.Decision, w)
	}
	if len(paid.Loaded.Awarded) != 0 {
		t.Fatalf("PAID: loaded ledger %v, want none before the step", paid.Loaded.Awarded)
	}
	again := step(withUser(event(id, 2, fsm.Paid, 12_345), payer))
	if w := again.Award; !again.Repeat || w == nil || w.Inserted {
		t.Fatalf("PAID again: repeat %v award %+v, want a repeat finding the purchase row in place", again.Repeat, w)
	}
	if len(again.Loaded.Awarded) != 1 || again.Loaded.Awarded[0] != fsm.Purchase {
		t.Fatalf("PAID again: loaded ledger %v, want the purchase row", again.Loaded.Awarded)
	}
	if row, ok := loadOrderRow(t, db, id); !ok || row.Status != string(fsm.Paid) || row.Version != 2 {
		t.Errorf("order %+v (found %v), want PAID v2", row, ok)
	}
	if l := ledger(t, db, id); l["purchase"] != 123 || len(l) != 1 {
		t.Errorf("ledger %v, want purchase 123", l)
	}
	checkInvariants(t, db)
}
