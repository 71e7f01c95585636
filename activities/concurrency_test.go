package activities_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/orderflow/orderflow/activities"
	"github.com/orderflow/orderflow/fsm"
)

// lifecycleArrows lists the lifecycle's transitions.
var lifecycleArrows = map[fsm.Status][]fsm.Status{
	fsm.Created:   {fsm.Paid, fsm.Cancelled},
	fsm.Paid:      {fsm.Shipped, fsm.Cancelled},
	fsm.Shipped:   {fsm.Delivered},
	fsm.Delivered: {fsm.Completed},
}

// randomPath returns the events a producer publishes for one order: versions
// 1..n from CREATED along random arrows, cancel branches and data updates
// (same status, new amount) included.
func randomPath(rng *rand.Rand, id string) []fsm.Event {
	status, amount := fsm.Created, rng.Int64N(100_000)
	var path []fsm.Event
	for v := int64(1); ; v++ {
		path = append(path, event(id, v, status, amount))
		opts := lifecycleArrows[status]
		switch r := rng.IntN(10); {
		case len(opts) == 0 && r < 7, len(path) == 8, r == 9 && len(path) > 1:
			return path
		case r < 2 || len(opts) == 0:
			amount = rng.Int64N(100_000)
		default:
			status = opts[rng.IntN(len(opts))]
		}
	}
}

// paidStatuses are the statuses at which purchase points are due
// (docs/design.md), written by hand.
var paidStatuses = map[fsm.Status]bool{fsm.Paid: true, fsm.Shipped: true, fsm.Delivered: true, fsm.Completed: true}

// checkLedgerOfPath checks an order's ledger rows against the path that
// generated its events. Which event the order was first applied at a paid
// status by depends on the order of the deliveries, so the purchase may
// name any event of the path at a paid status; its points are one per
// whole 100 cents of that event's amount (the rule, written here), earned
// by user 42, the user of every event. A path ending at a paid status has
// that purchase row only; one ending CANCELLED has none, or the purchase
// and its refund at a CANCELLED event of the path (the cancel may have been
// applied before any paid event); one ending CREATED has none.
func checkLedgerOfPath(t *testing.T, id string, path []fsm.Event, l map[string]ledgerRow) {
	t.Helper()
	at := func(v int64) (fsm.Event, bool) {
		if v < 1 || v > int64(len(path)) {
			return fsm.Event{}, false
		}
		return path[v-1], true
	}
	purchase, purchased := l["purchase"]
	if purchased {
		e, ok := at(purchase.Version)
		if !ok || !paidStatuses[e.Status] || purchase.Points != e.AmountCents/100 || purchase.UserID != 42 {
			t.Errorf("order %s: purchase row %+v; the path's v%d is %+v", id, purchase, purchase.Version, e)
		}
	}
	refund, refunded := l["refund"]
	if refunded {
		e, ok := at(refund.Version)
		if !ok || e.Status != fsm.Cancelled || !purchased || refund.Points != -purchase.Points || refund.UserID != 42 {
			t.Errorf("order %s: refund row %+v after purchase %+v; the path's v%d is %+v", id, refund, purchase, refund.Version, e)
		}
	}
	switch last := path[len(path)-1].Status; {
	case paidStatuses[last]:
		if !purchased || len(l) != 1 {
			t.Errorf("order %s ends %s: ledger %+v, want one purchase row", id, last, l)
		}
	case last == fsm.Cancelled:
		if len(l) != 0 && (!purchased || !refunded || len(l) != 2) {
			t.Errorf("order %s ends CANCELLED: ledger %+v, want none or a purchase and its refund", id, l)
		}
	default:
		if len(l) != 0 {
			t.Errorf("order %s ends %s: ledger %+v, want none", id, last, l)
		}
	}
}

// TestConcurrentDeliveries delivers the events of 200 orders, each event
// three times, shuffled, from 32 goroutines: every order must end at its
// highest version with one order_events row per business key and points per
// the rule.
func TestConcurrentDeliveries(t *testing.T) {
	const (
		orders     = 200
		goroutines = 32
		copies     = 3
	)
	a, rec := newActivities(t)
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0x5eed))

	paths := map[string][]fsm.Event{}
	var deliveries []fsm.Event
	for i := range orders {
		id := fmt.Sprintf("conc-%d-%d", seed%1e6, i)
		p := randomPath(rng, id)
		paths[id] = p
		for range copies {
			deliveries = append(deliveries, p...)
		}
	}
	rng.Shuffle(len(deliveries), func(i, j int) { deliveries[i], deliveries[j] = deliveries[j], deliveries[i] })
	events := len(deliveries) / copies

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	work := make(chan fsm.Event)
	errs := make(chan error, len(deliveries))
	var wg sync.WaitGroup
	start := time.Now()
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e := range work {
				e.EventID = fmt.Sprintf("%s-%d", e.EventID, rand.Int()) // redeliveries differ in tracing only
				res, err := deliverErr(ctx, a, e)
				if err == nil && res.Repeat && res.Decision.Points != fsm.PointsNone {
					// A repeat of an event that moved points: award again,
					// as a workflow retrying after a lost completion would.
					_, err = a.AwardPoints(ctx, activities.AwardPointsInput{OrderID: e.OrderID, UserID: e.UserID,
						Kind: res.Decision.Points, Points: res.Decision.PointsDelta, Version: e.Version})
				}
				if err != nil {
					errs <- fmt.Errorf("%s %s: %w", e.Key(), e.Status, err)
				}
			}
		}()
	}
	for _, e := range deliveries {
		work <- e
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	elapsed := time.Since(start)
	t.Logf("%d deliveries of %d events of %d orders in %v (%.0f deliveries/s)",
		len(deliveries), events, orders, elapsed, float64(len(deliveries))/elapsed.Seconds())

	if n := count(t, a.Store.DB(), "orders"); n != orders {
		t.Errorf("%d orders, want %d", n, orders)
	}
	if n := count(t, a.Store.DB(), "order_events"); n != int64(events) {
		t.Errorf("%d order_events rows, want one per business key: %d", n, events)
	}
	if n := count(t, a.Store.DB(), "dead_letters"); n != 0 {
		t.Errorf("%d dead letters, want none", n)
	}
	for id, p := range paths {
		last := p[len(p)-1]
		o, ok := loadOrderRow(t, a.Store.DB(), id)
		if !ok || o.Version != last.Version || o.Status != string(last.Status) || o.ContentHash != last.ContentHash() {
			t.Errorf("order %s ends at %+v, want %s@%d", id, o, last.Status, last.Version)
		}
		rows := eventRows(t, a.Store.DB(), id)
		for _, e := range p {
			r, ok := rows[e.Version]
			if !ok || r.ContentHash != e.ContentHash() || r.TimesSeen != copies || r.Conflicts != 0 {
				t.Errorf("order_events %s: %+v", e.Key(), r)
			}
			if r.Outcome == "illegal" {
				t.Errorf("order_events %s: illegal on a valid path: %s", e.Key(), r.Reason)
			}
		}
		if r := rows[last.Version]; r.Outcome != "applied" {
			t.Errorf("highest version %s judged %s", last.Key(), r.Outcome)
		}
		checkLedgerOfPath(t, id, p, ledgerRows(t, a.Store.DB(), id))
	}
	checkInvariants(t, a.Store.DB())
	total := 0
	for _, o := range fsm.Outcomes {
		total += rec.outcome(o)
	}
	if total != len(deliveries) || rec.outcome(fsm.Duplicate) != events*(copies-1) {
		t.Errorf("metrics: %v for %d deliveries of %d events", rec.outcomes, len(deliveries), events)
	}
}

// TestConcurrentFirstEvents races every event of a new order at once: only
// one may create the order, none may fail, the highest version wins.
func TestConcurrentFirstEvents(t *testing.T) {
	a, _ := newActivities(t)
	ctx := context.Background()
	for round := range 5 {
		id := orderID(fmt.Sprintf("race%d", round))
		statuses := []fsm.Status{fsm.Created, fsm.Created, fsm.Paid, fsm.Paid, fsm.Shipped, fsm.Shipped,
			fsm.Delivered, fsm.Delivered, fsm.Completed, fsm.Completed}
		var wg sync.WaitGroup
		gate := make(chan struct{})
		errs := make(chan error, len(statuses))
		for i, s := range statuses {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-gate
				if _, err := deliverErr(ctx, a, event(id, int64(i+1), s, 1_500)); err != nil {
					errs <- err
				}
			}()
		}
		close(gate)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		o, _ := loadOrderRow(t, a.Store.DB(), id)
		if o.Version != int64(len(statuses)) || o.Status != "COMPLETED" {
			t.Errorf("order %s: %+v", id, o)
		}
		if l := ledger(t, a.Store.DB(), id); len(l) != 1 || l["purchase"] != 15 {
			t.Errorf("order %s ledger %v", id, l)
		}
		if rows := eventRows(t, a.Store.DB(), id); len(rows) != len(statuses) {
			t.Errorf("order %s: %d order_events rows", id, len(rows))
		}
	}
	checkInvariants(t, a.Store.DB())
}

// TestConcurrentConflictingFirstEvents races eight different contents of the
// same business key of a new order: exactly one is recorded and applied,
// every other one is a conflict, parked once.
func TestConcurrentConflictingFirstEvents(t *testing.T) {
	a, _ := newActivities(t)
	ctx := context.Background()
	const variants = 8
	for round := range 5 {
		id := orderID(fmt.Sprintf("conflict-race%d", round))
		var wg sync.WaitGroup
		gate := make(chan struct{})
		results := make([]activities.ApplyEventResult, variants)
		errs := make([]error, variants)
		for i := range variants {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-gate
				results[i], errs[i] = a.ApplyEvent(ctx, activities.ApplyEventInput{Event: event(id, 1, fsm.Paid, int64(1000*(i+1)))})
			}()
		}
		close(gate)
		wg.Wait()
		winner := -1
		for i, r := range results {
			switch {
			case errs[i] != nil:
				t.Errorf("variant %d: %v", i, errs[i])
			case r.Decision.Outcome == fsm.Applied && !r.Repeat:
				if winner >= 0 {
					t.Errorf("variants %d and %d both applied", winner, i)
				}
				winner = i
			case r.Decision.Outcome != fsm.Conflict:
				t.Errorf("variant %d: %+v", i, r)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no variant applied", round)
		}
		o, _ := loadOrderRow(t, a.Store.DB(), id)
		if o.AmountCents != int64(1000*(winner+1)) || o.PurchasePoints != int64(10*(winner+1)) {
			t.Errorf("order %+v, want the winner's content (variant %d)", o, winner)
		}
		if row := eventRows(t, a.Store.DB(), id)[1]; row.Conflicts != variants-1 || row.TimesSeen != 1 {
			t.Errorf("order_events row %+v", row)
		}
	}
	if n := count(t, a.Store.DB(), "dead_letters"); n != 5*(variants-1) {
		t.Errorf("%d dead letters, want %d", n, 5*(variants-1))
	}
}
