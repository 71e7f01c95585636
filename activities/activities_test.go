package activities_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/orderflow/orderflow/activities"
	"github.com/orderflow/orderflow/api"
	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/wire"
)

func TestCancelAfterPayRefunds(t *testing.T) {
	a, rec := newActivities(t)
	id := orderID("cancel-after-pay")
	deliver(t, a, event(id, 1, fsm.Created, 12_345))
	paid := deliver(t, a, event(id, 2, fsm.Paid, 12_345))
	if d := paid.Decision; d.Outcome != fsm.Applied || d.Points != fsm.Purchase || d.PointsDelta != 123 {
		t.Fatalf("PAID: %+v", d)
	}
	cancel := deliver(t, a, event(id, 3, fsm.Cancelled, 12_345))
	if d := cancel.Decision; d.Outcome != fsm.Applied || d.Points != fsm.Refund || d.PointsDelta != -123 {
		t.Fatalf("CANCELLED: %+v", d)
	}
	l := ledger(t, a.Store.DB(), id)
	if l["purchase"] != 123 || l["refund"] != -123 || len(l) != 2 {
		t.Errorf("ledger %v, want purchase 123 and refund -123", l)
	}
	o, _ := loadOrderRow(t, a.Store.DB(), id)
	if o.Status != "CANCELLED" || o.Version != 3 || !o.Purchased || !o.Refunded || o.PurchasePoints != 123 {
		t.Errorf("order %+v", o)
	}
	if rec.outcome(fsm.Applied) != 3 || rec.points[fsm.Purchase] != 123 || rec.points[fsm.Refund] != -123 {
		t.Errorf("metrics %+v %+v", rec.outcomes, rec.points)
	}
	checkInvariants(t, a.Store.DB())
}

// The refund takes the points back from the user who earned them, even when
// the cancelling event names another user.
func TestRefundGoesToThePurchaser(t *testing.T) {
	a, _ := newActivities(t)
	id := orderID("refund-purchaser")
	const payer, canceller = 42, 77
	deliver(t, a, withUser(event(id, 1, fsm.Created, 50_000), payer))
	deliver(t, a, withUser(event(id, 2, fsm.Paid, 50_000), payer))
	deliver(t, a, withUser(event(id, 3, fsm.Cancelled, 50_000), canceller))
	if got := balances(t, a.Store.DB(), id); got[payer] != 0 || got[canceller] != 0 || len(got) != 1 {
		t.Errorf("balances by user %v, want user %d at 0 (+500 -500) and no row for user %d", got, payer, canceller)
	}
	rows := ledgerUsers(t, a.Store.DB(), id)
	if rows["purchase"] != payer || rows["refund"] != payer {
		t.Errorf("ledger users %v, want both rows on user %d", rows, payer)
	}
	checkInvariants(t, a.Store.DB())
}

// A purchase row written after the order changed hands (the worker crashed
// between the state change and the ledger insert) still goes to the user
// who paid: the order remembers the purchaser.
func TestLatePurchaseRowGoesToThePayer(t *testing.T) {
	a, _ := newActivities(t)
	id := orderID("late-purchase")
	const payer, later = 42, 77
	apply := func(e fsm.Event) activities.ApplyEventResult {
		t.Helper()
		res, err := a.ApplyEvent(context.Background(), activities.ApplyEventInput{Event: e})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	apply(withUser(event(id, 1, fsm.Created, 30_000), payer))
	paid := apply(withUser(event(id, 2, fsm.Paid, 30_000), payer))
	next := apply(withUser(event(id, 3, fsm.Shipped, 30_000), later)).Decision.Next
	if next.UserID != later || next.PurchaseUserID != payer {
		t.Fatalf("order after SHIPPED by user %d: user %d, purchaser %d; want purchaser %d",
			later, next.UserID, next.PurchaseUserID, payer)
	}
	if _, err := a.AwardPoints(context.Background(), activities.AwardPointsInput{OrderID: id, UserID: next.PointsUser(),
		Kind: fsm.Purchase, Points: paid.Decision.PointsDelta, Version: 2}); err != nil {
		t.Fatal(err)
	}
	if got := balances(t, a.Store.DB(), id); got[payer] != 300 || len(got) != 1 {
		t.Errorf("balances by user %v, want 300 points for user %d only", got, payer)
	}
	checkInvariants(t, a.Store.DB())
}

// The ledger rows are what the order row says it is due, written in either
// order: a refund before its purchase row (two deliverers racing) takes the
// points from the purchaser all the same. A kind the order is not due is
// refused and writes nothing.
func TestLedgerRowsFollowTheOrderInAnyOrder(t *testing.T) {
	a, _ := newActivities(t)
	ctx := context.Background()
	id := orderID("refund-first")
	const payer, canceller = 42, 77
	for _, e := range []fsm.Event{withUser(event(id, 1, fsm.Paid, 1_000), payer), withUser(event(id, 2, fsm.Cancelled, 1_000), canceller)} {
		if _, err := a.ApplyEvent(ctx, activities.ApplyEventInput{Event: e}); err != nil {
			t.Fatal(err)
		}
	}
	if r, err := a.AwardPoints(ctx, activities.AwardPointsInput{OrderID: id, UserID: canceller, Kind: fsm.Refund, Points: -10, Version: 2}); err != nil || !r.Inserted {
		t.Fatalf("refund first: %+v %v", r, err)
	}
	if r, err := a.AwardPoints(ctx, activities.AwardPointsInput{OrderID: id, UserID: payer, Kind: fsm.Purchase, Points: 10, Version: 1}); err != nil || !r.Inserted {
		t.Fatalf("purchase second: %+v %v", r, err)
	}
	if got := ledgerUsers(t, a.Store.DB(), id); got["purchase"] != payer || got["refund"] != payer {
		t.Errorf("ledger users %v, want both rows on user %d", got, payer)
	}
	if got := balances(t, a.Store.DB(), id); got[payer] != 0 || len(got) != 1 {
		t.Errorf("balances %v, want user %d at 0", got, payer)
	}
	checkInvariants(t, a.Store.DB())

	open := orderID("not-due")
	deliver(t, a, event(open, 1, fsm.Created, 1_000))
	for _, k := range []fsm.PointsKind{fsm.Purchase, fsm.Refund} {
		points := int64(10)
		if k == fsm.Refund {
			points = -10
		}
		_, err := a.AwardPoints(ctx, activities.AwardPointsInput{OrderID: open, UserID: payer, Kind: k, Points: points, Version: 1})
		wantNonRetryable(t, err, api.ErrTypeInvalidInput, "not due "+string(k))
	}
	if l := ledger(t, a.Store.DB(), open); len(l) != 0 {
		t.Errorf("ledger %v, want no row for an order not due points", l)
	}
}

func TestCancelBeforePayAwardsNothing(t *testing.T) {
	a, _ := newActivities(t)
	id := orderID("cancel-before-pay")
	deliver(t, a, event(id, 1, fsm.Created, 5_000))
	d := deliver(t, a, event(id, 2, fsm.Cancelled, 5_000)).Decision
	if d.Outcome != fsm.Applied || d.Points != fsm.PointsNone {
		t.Fatalf("CANCELLED: %+v", d)
	}
	late := deliver(t, a, event(id, 3, fsm.Paid, 5_000)).Decision
	if late.Outcome != fsm.Illegal {
		t.Fatalf("PAID after CANCELLED: %+v", late)
	}
	if l := ledger(t, a.Store.DB(), id); len(l) != 0 {
		t.Errorf("ledger %v, want none", l)
	}
	checkInvariants(t, a.Store.DB())
}

func TestFirstSeenAtShippedPurchases(t *testing.T) {
	a, _ := newActivities(t)
	id := orderID("first-shipped")
	d := deliver(t, a, event(id, 3, fsm.Shipped, 9_999)).Decision
	if d.Outcome != fsm.Applied || !d.Gap || d.Points != fsm.Purchase || d.PointsDelta != 99 {
		t.Fatalf("SHIPPED first: %+v", d)
	}
	for v, s := range map[int64]fsm.Status{1: fsm.Created, 2: fsm.Paid} {
		if d := deliver(t, a, event(id, v, s, 9_999)).Decision; d.Outcome != fsm.Stale || d.Points != fsm.PointsNone {
			t.Errorf("late %s: %+v", s, d)
		}
	}
	if l := ledger(t, a.Store.DB(), id); l["purchase"] != 99 || len(l) != 1 {
		t.Errorf("ledger %v", l)
	}
	rows := eventRows(t, a.Store.DB(), id)
	if len(rows) != 3 || rows[1].Outcome != "stale" || rows[2].Outcome != "stale" || rows[3].Outcome != "applied" {
		t.Errorf("order_events %+v", rows)
	}
	checkInvariants(t, a.Store.DB())
}

func TestGap(t *testing.T) {
	a, _ := newActivities(t)
	id := orderID("gap")
	deliver(t, a, event(id, 1, fsm.Created, 100))
	d := deliver(t, a, event(id, 4, fsm.Delivered, 100)).Decision
	if d.Outcome != fsm.Applied || !d.Gap || d.Points != fsm.Purchase {
		t.Fatalf("jump to 4: %+v", d)
	}
	skipped := deliver(t, a, event(id, 2, fsm.Paid, 100)).Decision
	if skipped.Outcome != fsm.Stale || !strings.Contains(skipped.Reason, "older") {
		t.Fatalf("skipped version arriving late: %+v", skipped)
	}
	next := deliver(t, a, event(id, 5, fsm.Completed, 100)).Decision
	if next.Outcome != fsm.Applied || next.Gap {
		t.Fatalf("version 5: %+v", next)
	}
	rows := eventRows(t, a.Store.DB(), id)
	if !rows[4].Gap || rows[5].Gap || rows[1].Gap {
		t.Errorf("gap flags %+v", rows)
	}
	if o, _ := loadOrderRow(t, a.Store.DB(), id); o.Version != 5 || o.Status != "COMPLETED" {
		t.Errorf("order %+v", o)
	}
	checkInvariants(t, a.Store.DB())
}

func TestIllegal(t *testing.T) {
	a, rec := newActivities(t)
	id := orderID("illegal")
	deliver(t, a, event(id, 1, fsm.Paid, 700))
	deliver(t, a, event(id, 2, fsm.Cancelled, 700))
	before, _ := loadOrderRow(t, a.Store.DB(), id)
	d := deliver(t, a, event(id, 3, fsm.Shipped, 700)).Decision
	if d.Outcome != fsm.Illegal || !strings.Contains(d.Reason, "CANCELLED -> SHIPPED") || d.Next.Status != fsm.Cancelled {
		t.Fatalf("SHIPPED after CANCELLED: %+v", d)
	}
	after, _ := loadOrderRow(t, a.Store.DB(), id)
	if after != before {
		t.Errorf("illegal event changed the order: %+v -> %+v", before, after)
	}
	row := eventRows(t, a.Store.DB(), id)[3]
	if row.Outcome != "illegal" || row.Reason != d.Reason || row.PointsKind != "" {
		t.Errorf("order_events row %+v", row)
	}
	if rec.outcome(fsm.Illegal) != 1 {
		t.Errorf("metrics %+v", rec.outcomes)
	}
	checkInvariants(t, a.Store.DB())
}

// TestRetryAfterCommit replays ApplyEvent as Temporal does when the first
// attempt committed but its completion was lost: the same outcome comes back
// and nothing changes but the times-seen count.
func TestRetryAfterCommit(t *testing.T) {
	a, rec := newActivities(t)
	ctx := context.Background()
	id := orderID("retry")
	deliver(t, a, event(id, 1, fsm.Created, 4_200))
	paid := event(id, 2, fsm.Paid, 4_200)
	first := deliver(t, a, paid)
	orderBefore, _ := loadOrderRow(t, a.Store.DB(), id)

	retried := paid
	retried.EventID, retried.ProducerID, retried.Seq = "producer-retry", "p-9", 77 // tracing fields differ
	for i := 2; i <= 3; i++ {
		again, err := a.ApplyEvent(ctx, activities.ApplyEventInput{Event: retried})
		if err != nil {
			t.Fatal(err)
		}
		if !again.Repeat || first.Repeat {
			t.Errorf("Repeat: first %v, retry %v", first.Repeat, again.Repeat)
		}
		f, g := first.Decision, again.Decision
		if g.Outcome != f.Outcome || g.Gap != f.Gap || g.Points != f.Points || g.PointsDelta != f.PointsDelta ||
			g.Reason != f.Reason || g.Next != f.Next {
			t.Errorf("retry decision %+v, first %+v", g, f)
		}
		// The workflow awards the points again on a retry: still one row.
		res, err := a.AwardPoints(ctx, activities.AwardPointsInput{OrderID: id, UserID: 42, Kind: g.Points, Points: g.PointsDelta, Version: 2})
		if err != nil || res.Inserted {
			t.Errorf("AwardPoints on retry: %+v %v", res, err)
		}
		if row := eventRows(t, a.Store.DB(), id)[2]; row.TimesSeen != i || row.EventID != paid.EventID || row.Outcome != "applied" {
			t.Errorf("order_events row after %d deliveries: %+v", i, row)
		}
	}
	if orderAfter, _ := loadOrderRow(t, a.Store.DB(), id); orderAfter != orderBefore {
		t.Errorf("retry changed the order: %+v -> %+v", orderBefore, orderAfter)
	}

	// A retry after a later event: still the stored decision, Next is now.
	deliver(t, a, event(id, 3, fsm.Shipped, 4_200))
	late, err := a.ApplyEvent(ctx, activities.ApplyEventInput{Event: paid})
	if err != nil {
		t.Fatal(err)
	}
	if !late.Repeat || late.Decision.Outcome != fsm.Applied || late.Decision.Points != fsm.Purchase ||
		late.Decision.Next.Version != 3 || late.Decision.Next.Status != fsm.Shipped {
		t.Errorf("retry after a later event: %+v", late)
	}
	// A stale event retried stays stale.
	stale := event(id, 1, fsm.Created, 4_200)
	stale.OccurredAt = stale.OccurredAt.Add(1) // sub-microsecond: same content
	if r, err := a.ApplyEvent(ctx, activities.ApplyEventInput{Event: stale}); err != nil || !r.Repeat || r.Decision.Outcome != fsm.Applied {
		t.Errorf("repeat of version 1 (first applied): %+v %v", r, err)
	}
	if l := ledger(t, a.Store.DB(), id); len(l) != 1 || l["purchase"] != 42 {
		t.Errorf("ledger %v", l)
	}
	if rec.outcome(fsm.Duplicate) != 4 || rec.outcome(fsm.Applied) != 3 || rec.rows[fsm.Purchase] != 1 {
		t.Errorf("metrics outcomes %v rows %v", rec.outcomes, rec.rows)
	}
	checkInvariants(t, a.Store.DB())
}

func TestConflictIsParked(t *testing.T) {
	a, rec := newActivities(t)
	ctx := context.Background()
	id := orderID("conflict")
	deliver(t, a, event(id, 1, fsm.Created, 1_000))
	deliver(t, a, event(id, 2, fsm.Paid, 1_000))
	before, _ := loadOrderRow(t, a.Store.DB(), id)

	for _, v := range []int64{2, 1} { // at the current version, and below it
		bad := event(id, v, fsm.Paid, 999_999)
		bad.EventID = "forged"
		for i := 1; i <= 2; i++ { // the second is a retry of the same delivery
			res, err := a.ApplyEvent(ctx, activities.ApplyEventInput{Event: bad})
			if err != nil {
				t.Fatal(err)
			}
			d := res.Decision
			if d.Outcome != fsm.Conflict || !strings.HasPrefix(d.Reason, "conflict:") || d.Points != fsm.PointsNone ||
				d.Next.Version != 2 || d.Next.AmountCents != 1_000 {
				t.Fatalf("conflict at version %d: %+v", v, res)
			}
			if row := eventRows(t, a.Store.DB(), id)[v]; row.Conflicts != i || row.TimesSeen != 1 || row.EventID == "forged" {
				t.Errorf("order_events row %+v after %d conflicting deliveries", row, i)
			}
		}
		var dl []struct {
			Topic, Keys, Tags, Reason string
			Body                      []byte
			TimesSeen                 int
		}
		if err := a.Store.DB().Raw(`SELECT topic, keys, tags, reason, body, times_seen FROM dead_letters`).Scan(&dl).Error; err != nil {
			t.Fatal(err)
		}
		var found bool
		for _, r := range dl {
			var e fsm.Event
			if err := json.Unmarshal(r.Body, &e); err != nil {
				t.Fatalf("dead letter body %q: %v", r.Body, err)
			}
			if e.Version != v {
				continue
			}
			found = true
			if e != bad || r.Topic != testTopic || r.Keys != id || r.Tags != "PAID" || r.TimesSeen != 2 ||
				!strings.HasPrefix(r.Reason, "conflict: "+id+"@") {
				t.Errorf("dead letter %+v (event %+v)", r, e)
			}
		}
		if !found {
			t.Errorf("no dead letter for the conflict at version %d", v)
		}
	}
	if n := count(t, a.Store.DB(), "dead_letters"); n != 2 {
		t.Errorf("%d dead letters, want 2", n)
	}
	if after, _ := loadOrderRow(t, a.Store.DB(), id); after != before {
		t.Errorf("conflict changed the order: %+v -> %+v", before, after)
	}
	if rec.outcome(fsm.Conflict) != 4 {
		t.Errorf("metrics %v", rec.outcomes)
	}
	checkInvariants(t, a.Store.DB())
}

func TestLoadOrder(t *testing.T) {
	a, _ := newActivities(t)
	ctx := context.Background()
	id := orderID("load")
	res, err := a.LoadOrder(ctx, id)
	if err != nil || res.Found || len(res.Versions) != 0 {
		t.Fatalf("unknown order: %+v %v", res, err)
	}
	e1, e3, e2 := event(id, 1, fsm.Created, 250), event(id, 3, fsm.Paid, 250), event(id, 2, fsm.Paid, 250)
	deliver(t, a, e1)
	deliver(t, a, e3)
	deliver(t, a, e2) // stale, still recorded
	res, err = a.LoadOrder(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	// PAID at v3, 250 cents: 2 purchase points (one per whole 100 cents),
	// earned by user 42. The content hash is e3's, the event that set v3.
	paid := fsm.Order{OrderID: id, UserID: 42, Status: fsm.Paid, Version: 3, AmountCents: 250, ContentHash: e3.ContentHash(),
		Purchased: true, PurchasePoints: 2, PurchaseUserID: 42}
	if !res.Found || res.Order != paid {
		t.Errorf("order %+v, want %+v", res.Order, paid)
	}
	want := map[int64]string{1: e1.ContentHash(), 2: e2.ContentHash(), 3: e3.ContentHash()}
	if len(res.Versions) != 3 || res.Versions[1] != want[1] || res.Versions[2] != want[2] || res.Versions[3] != want[3] {
		t.Errorf("versions %v, want %v", res.Versions, want)
	}
	// What LoadOrder returns is what Decide needs to judge the next event
	// the same way the database does: CANCELLED after PAID is applied and
	// takes the 2 points back.
	next := event(id, 4, fsm.Cancelled, 250)
	cancelled := paid
	cancelled.Status, cancelled.Version, cancelled.ContentHash, cancelled.Refunded = fsm.Cancelled, 4, next.ContentHash(), true
	refund := fsm.Decision{Outcome: fsm.Applied, Points: fsm.Refund, PointsDelta: -2, Next: cancelled}
	if got := fsm.Decide(&res.Order, next); got != refund {
		t.Errorf("Decide on the loaded order: %+v, want %+v", got, refund)
	}
	if got := deliver(t, a, next).Decision; got != refund {
		t.Errorf("ApplyEvent: %+v, want %+v", got, refund)
	}
}

func TestAwardPointsTwiceOneRow(t *testing.T) {
	a, rec := newActivities(t)
	ctx := context.Background()
	id := orderID("award")
	if _, err := a.ApplyEvent(ctx, activities.ApplyEventInput{Event: event(id, 1, fsm.Paid, 99)}); err != nil {
		t.Fatal(err)
	}
	in := activities.AwardPointsInput{OrderID: id, UserID: 42, Kind: fsm.Purchase, Points: 0, Version: 1}
	first, err := a.AwardPoints(ctx, in)
	if err != nil || !first.Inserted {
		t.Fatalf("first AwardPoints: %+v %v", first, err)
	}
	in.Points = 5 // a buggy caller: still never a second row, nor other points
	second, err := a.AwardPoints(ctx, in)
	if err != nil || second.Inserted {
		t.Fatalf("second AwardPoints: %+v %v", second, err)
	}
	if l := ledger(t, a.Store.DB(), id); len(l) != 1 || l["purchase"] != 0 {
		t.Errorf("ledger %v, want one purchase row of 0 points (99 cents)", l)
	}
	if _, err := a.ApplyEvent(ctx, activities.ApplyEventInput{Event: event(id, 2, fsm.Cancelled, 99)}); err != nil {
		t.Fatal(err)
	}
	refund := activities.AwardPointsInput{OrderID: id, UserID: 42, Kind: fsm.Refund, Points: 0, Version: 2}
	if r, err := a.AwardPoints(ctx, refund); err != nil || !r.Inserted {
		t.Errorf("refund: %+v %v", r, err)
	}
	if rec.rows[fsm.Purchase] != 1 || rec.rows[fsm.Refund] != 1 {
		t.Errorf("metrics rows %v", rec.rows)
	}
}

// The time from the broker's store to the row is observed once per
// business key, when its row is written, from the message's store time;
// a repeat, and an event whose message has no store time, observe none.
func TestStoreToRowIsObservedOnce(t *testing.T) {
	a, rec := newActivities(t)
	id := orderID("store-to-row")
	stored := time.Now().Add(-2 * time.Second)
	in := activities.ApplyEventInput{Event: event(id, 1, fsm.Created, 100), Source: &wire.Envelope{Topic: testTopic, StoredAt: stored}}
	for range 2 {
		if _, err := a.ApplyEventAndAward(context.Background(), in); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.ApplyEventAndAward(context.Background(), activities.ApplyEventInput{Event: event(id, 2, fsm.Paid, 100)}); err != nil {
		t.Fatal(err)
	}
	if len(rec.toRow) != 1 || rec.toRow[0] < 2*time.Second || rec.toRow[0] > time.Minute {
		t.Errorf("store-to-row observations %v, want one of about 2 s", rec.toRow)
	}
}
