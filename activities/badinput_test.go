package activities_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/orderflow/orderflow/activities"
	"github.com/orderflow/orderflow/api"
	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/store"
	"github.com/orderflow/orderflow/wire"
)

// tableCounts is the number of rows in every table.
func tableCounts(t *testing.T, a *activities.Activities) map[string]int64 {
	t.Helper()
	m := map[string]int64{}
	for _, table := range []string{"orders", "order_events", "points_ledger", "dead_letters"} {
		m[table] = count(t, a.Store.DB(), table)
	}
	return m
}

func TestBadInputWritesNothingAndSaysWhy(t *testing.T) {
	a, rec := newActivities(t)
	ctx := context.Background()
	id := orderID("bad")
	deliver(t, a, event(id, 1, fsm.Created, 100)) // so that points have an order
	before := tableCounts(t, a)
	outcomesBefore := rec.outcome(fsm.Applied)

	events := map[string]func(e *fsm.Event){
		"event_id":     func(e *fsm.Event) { e.EventID = "" },
		"order_id":     func(e *fsm.Event) { e.OrderID = "" },
		"order_id ":    func(e *fsm.Event) { e.OrderID = "not/valid" },
		"order_id  ":   func(e *fsm.Event) { e.OrderID = strings.Repeat("o", 65) },
		"user_id":      func(e *fsm.Event) { e.UserID = 0 },
		"status":       func(e *fsm.Event) { e.Status = "REFUNDED" },
		"status ":      func(e *fsm.Event) { e.Status = "" },
		"version":      func(e *fsm.Event) { e.Version = 0 },
		"version ":     func(e *fsm.Event) { e.Version = -5 },
		"amount_cents": func(e *fsm.Event) { e.AmountCents = -1 },
		"occurred_at":  func(e *fsm.Event) { e.OccurredAt = time.Time{} },
	}
	for field, edit := range events {
		t.Run("ApplyEvent/"+field, func(t *testing.T) {
			e := event(id, 2, fsm.Paid, 100)
			edit(&e)
			_, err := a.ApplyEvent(ctx, activities.ApplyEventInput{Event: e})
			wantNonRetryable(t, err, api.ErrTypeInvalidEvent, strings.TrimSpace(field))
			if !errors.Is(err, fsm.ErrInvalidEvent) {
				t.Errorf("%v does not wrap fsm.ErrInvalidEvent", err)
			}
		})
	}

	points := map[string]struct {
		in   activities.AwardPointsInput
		typ  string
		says string
	}{
		"bad order id":     {activities.AwardPointsInput{OrderID: "a b", UserID: 1, Kind: fsm.Purchase, Points: 1, Version: 1}, api.ErrTypeInvalidInput, "order_id"},
		"no user":          {activities.AwardPointsInput{OrderID: id, Kind: fsm.Purchase, Points: 1, Version: 1}, api.ErrTypeInvalidInput, "user_id"},
		"version 0":        {activities.AwardPointsInput{OrderID: id, UserID: 1, Kind: fsm.Purchase, Points: 1}, api.ErrTypeInvalidInput, "version"},
		"no kind":          {activities.AwardPointsInput{OrderID: id, UserID: 1, Points: 1, Version: 1}, api.ErrTypeInvalidInput, "kind"},
		"unknown kind":     {activities.AwardPointsInput{OrderID: id, UserID: 1, Kind: "bonus", Points: 1, Version: 1}, api.ErrTypeInvalidInput, `"bonus"`},
		"negative buy":     {activities.AwardPointsInput{OrderID: id, UserID: 1, Kind: fsm.Purchase, Points: -1, Version: 1}, api.ErrTypeInvalidInput, "purchase points -1"},
		"positive refund":  {activities.AwardPointsInput{OrderID: id, UserID: 1, Kind: fsm.Refund, Points: 3, Version: 1}, api.ErrTypeInvalidInput, "refund points 3"},
		"unknown order id": {activities.AwardPointsInput{OrderID: "nobody", UserID: 1, Kind: fsm.Purchase, Points: 1, Version: 1}, api.ErrTypeUnknownOrder, "nobody"},
	}
	for name, c := range points {
		t.Run("AwardPoints/"+name, func(t *testing.T) {
			_, err := a.AwardPoints(ctx, c.in)
			wantNonRetryable(t, err, c.typ, c.says)
		})
	}

	t.Run("ParkDeadLetter/no reason", func(t *testing.T) {
		_, err := a.Store.ParkDeadLetter(ctx, wire.DeadLetter{Envelope: wire.Envelope{Body: []byte("x")}, Reason: "  "})
		if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "reason is required") {
			t.Errorf("ParkDeadLetter without a reason: %v, want store.ErrInvalid saying the reason is required", err)
		}
	})
	t.Run("LoadOrder/bad id", func(t *testing.T) {
		_, err := a.LoadOrder(ctx, "")
		wantNonRetryable(t, err, api.ErrTypeInvalidInput, "order_id")
	})

	if after := tableCounts(t, a); after["orders"] != before["orders"] || after["order_events"] != before["order_events"] ||
		after["points_ledger"] != before["points_ledger"] || after["dead_letters"] != before["dead_letters"] {
		t.Errorf("bad input wrote rows: before %v, after %v", before, after)
	}
	if rec.outcome(fsm.Applied) != outcomesBefore || len(rec.rows) != 0 {
		t.Errorf("bad input was counted: %v %v", rec.outcomes, rec.rows)
	}
}

// TestDatabaseErrorsAreRetryable closes the pool under the activities: the
// errors must be plain (retryable) errors, not application errors that stop
// Temporal's retries.
func TestDatabaseErrorsAreRetryable(t *testing.T) {
	a, _ := newActivities(t)
	ctx := context.Background()
	id := orderID("down")
	deliver(t, a, event(id, 1, fsm.Created, 100))
	sqlDB, err := a.Store.DB().DB()
	if err != nil {
		t.Fatal(err)
	}
	_ = sqlDB.Close()
	checks := map[string]error{}
	_, checks["ApplyEvent"] = a.ApplyEvent(ctx, activities.ApplyEventInput{Event: event(id, 2, fsm.Paid, 100)})
	_, checks["AwardPoints"] = a.AwardPoints(ctx, activities.AwardPointsInput{OrderID: id, UserID: 1, Kind: fsm.Purchase, Points: 1, Version: 2})
	_, checks["ParkDeadLetter"] = a.Store.ParkDeadLetter(ctx, wire.DeadLetter{Envelope: wire.Envelope{Body: []byte("x")}, Reason: "r"})
	_, checks["LoadOrder"] = a.LoadOrder(ctx, id)
	for name, err := range checks {
		if err == nil {
			t.Errorf("%s succeeded on a closed pool", name)
			continue
		}
		var ae interface{ NonRetryable() bool }
		if errors.As(err, &ae) || errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: database error %v is not retryable", name, err)
		}
	}
}
