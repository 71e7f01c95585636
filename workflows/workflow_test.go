package workflows

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/orderflow/orderflow/activities"
	"github.com/orderflow/orderflow/api"
	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/wire"
)

// fakeDB stands in for the activities in the SDK's test environment: it
// keeps orders, recorded keys and points in memory with the semantics of
// docs/design.md (decide with fsm, a repeat returns the first outcome).
type fakeDB struct {
	mu       sync.Mutex
	orders   map[string]fsm.Order
	keys     map[fsm.Key]string      // content hash
	outcomes map[fsm.Key]fsm.Outcome // first outcome
	points   map[string]int64        // order_id/kind -> points
	// failApply makes ApplyEvent fail with this error for the given version.
	failApply map[int64]error
	// loseCompletion makes the first ApplyEvent attempt of a version commit
	// and then fail, as a lost completion would.
	loseCompletion map[int64]bool
	// down makes this many ApplyEvent attempts fail as an unreachable
	// database would (a retryable error), whatever their version.
	down           int
	loads, applies []string
	// firstSteps counts LoadOrderAndApply calls (each also a load).
	firstSteps int
	// known says, per ApplyEvent call, what the run told it of the order:
	// "stored" (the row as stored), "other" or "none" (no Known).
	known  []string
	awards []activities.AwardPointsInput
}

func newFakeDB() *fakeDB {
	return &fakeDB{orders: map[string]fsm.Order{}, keys: map[fsm.Key]string{},
		outcomes: map[fsm.Key]fsm.Outcome{}, points: map[string]int64{},
		failApply: map[int64]error{}, loseCompletion: map[int64]bool{}}
}

func (f *fakeDB) LoadOrder(_ context.Context, orderID string) (activities.LoadOrderResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.loads = append(f.loads, orderID)
	res := activities.LoadOrderResult{Versions: map[int64]string{}}
	if o, ok := f.orders[orderID]; ok {
		res.Found, res.Order = true, o
	}
	for k, h := range f.keys {
		if k.OrderID == orderID {
			res.Versions[k.Version] = h
		}
	}
	for _, kind := range []fsm.PointsKind{fsm.Purchase, fsm.Refund} {
		if _, ok := f.points[orderID+"/"+string(kind)]; ok {
			res.Awarded = append(res.Awarded, kind)
		}
	}
	return res, nil
}

func (f *fakeDB) ApplyEvent(ctx context.Context, in activities.ApplyEventInput) (activities.ApplyEventResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e := in.Event
	f.applies = append(f.applies, e.Key().String())
	if err := f.failApply[e.Version]; err != nil {
		return activities.ApplyEventResult{}, err
	}
	if f.down > 0 {
		f.down--
		return activities.ApplyEventResult{}, errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")
	}
	var cur *fsm.Order
	if o, ok := f.orders[e.OrderID]; ok {
		cur = &o
	}
	switch k := in.Known; {
	case k == nil:
		f.known = append(f.known, "none")
	case k.Found == (cur != nil) && (cur == nil || k.Order == *cur):
		f.known = append(f.known, "stored")
	default:
		f.known = append(f.known, "other")
	}
	if h, ok := f.keys[e.Key()]; ok {
		if h == e.ContentHash() {
			d := fsm.Decision{Outcome: f.outcomes[e.Key()], Next: *cur}
			return activities.ApplyEventResult{Decision: d, Repeat: true}, nil
		}
		return activities.ApplyEventResult{Decision: fsm.Decision{Outcome: fsm.Conflict, Next: *cur,
			Reason: "conflict"}, Repeat: true}, nil
	}
	d := fsm.Decide(cur, e)
	f.keys[e.Key()] = e.ContentHash()
	f.outcomes[e.Key()] = d.Outcome
	if d.Outcome == fsm.Applied {
		f.orders[e.OrderID] = d.Next
	}
	if f.loseCompletion[e.Version] && activity.GetInfo(ctx).Attempt == 1 {
		return activities.ApplyEventResult{}, errors.New("connection reset after commit")
	}
	return activities.ApplyEventResult{Decision: d}, nil
}

func (f *fakeDB) AwardPoints(_ context.Context, in activities.AwardPointsInput) (activities.AwardPointsResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.awards = append(f.awards, in)
	k := in.OrderID + "/" + string(in.Kind)
	if _, ok := f.points[k]; ok {
		return activities.AwardPointsResult{}, nil
	}
	f.points[k] = in.Points
	return activities.AwardPointsResult{Inserted: true}, nil
}

// ApplyEventAndAward is ApplyEvent then, when the decision moves points,
// AwardPoints, as the real activity composes them.
func (f *fakeDB) ApplyEventAndAward(ctx context.Context, in activities.ApplyEventInput) (activities.ApplyEventAndAwardResult, error) {
	res, err := f.ApplyEvent(ctx, in)
	if err != nil {
		return activities.ApplyEventAndAwardResult{}, err
	}
	out := activities.ApplyEventAndAwardResult{ApplyEventResult: res}
	d := res.Decision
	if d.Points == fsm.PointsNone {
		return out, nil
	}
	row := activities.AwardPointsInput{OrderID: in.Event.OrderID, UserID: d.Next.PointsUser(), Kind: d.Points,
		Points: d.PointsDelta, Version: in.Event.Version}
	pr, err := f.AwardPoints(ctx, row)
	if err != nil {
		return activities.ApplyEventAndAwardResult{}, err
	}
	out.Award = &activities.AwardOutcome{Row: row, Inserted: pr.Inserted}
	return out, nil
}

// LoadOrderAndApply is LoadOrder then ApplyEventAndAward, with the loaded
// order as the known one when it has not recorded the event's key, as the
// real activity composes them.
func (f *fakeDB) LoadOrderAndApply(ctx context.Context, in activities.ApplyEventInput) (activities.LoadOrderAndApplyResult, error) {
	f.mu.Lock()
	f.firstSteps++
	f.mu.Unlock()
	loaded, err := f.LoadOrder(ctx, in.Event.OrderID)
	if err != nil {
		return activities.LoadOrderAndApplyResult{}, err
	}
	in.Known = nil
	if _, ok := loaded.Versions[in.Event.Version]; !ok {
		in.Known = &activities.KnownOrder{Found: loaded.Found, Order: loaded.Order}
	}
	res, err := f.ApplyEventAndAward(ctx, in)
	if err != nil {
		return activities.LoadOrderAndApplyResult{}, err
	}
	return activities.LoadOrderAndApplyResult{Loaded: loaded, ApplyEventAndAwardResult: res}, nil
}

type harness struct {
	t   *testing.T
	env *testsuite.TestWorkflowEnvironment
	db  *fakeDB
	sa  []string
}

func newHarness(t *testing.T, orderID string) *harness {
	t.Helper()
	return newHarnessOn(t, orderID, newFakeDB())
}

// testDeadlockTimeout is how long the test environment lets workflow code
// run without yielding before it reports a deadlock (newHarnessOn).
const testDeadlockTimeout = 10 * time.Second

// newHarnessOn is newHarness on an existing fake database, for the next
// run of a chain.
func newHarnessOn(t *testing.T, orderID string, db *fakeDB) *harness {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	s.SetLogger(testenv.QuietTemporalLogger())
	env := s.NewTestWorkflowEnvironment()
	h := &harness{t: t, env: env, db: db}
	env.RegisterWorkflowWithOptions(OrderWorkflow, workflow.RegisterOptions{Name: api.WorkflowType})
	env.RegisterActivityWithOptions(h.db.LoadOrder, activity.RegisterOptions{Name: api.ActivityLoadOrder})
	env.RegisterActivityWithOptions(h.db.ApplyEvent, activity.RegisterOptions{Name: api.ActivityApplyEvent})
	env.RegisterActivityWithOptions(h.db.AwardPoints, activity.RegisterOptions{Name: api.ActivityAwardPoints})
	env.RegisterActivityWithOptions(h.db.ApplyEventAndAward, activity.RegisterOptions{Name: api.ActivityApplyEventAndAward})
	env.RegisterActivityWithOptions(h.db.LoadOrderAndApply, activity.RegisterOptions{Name: api.ActivityLoadOrderAndApply})
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: api.WorkflowID(orderID), TaskQueue: "test"})
	env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		sa := args.Get(0).(temporal.SearchAttributes)
		v, _ := sa.GetKeyword(api.OrderStatusKey)
		h.sa = append(h.sa, v)
	}).Return(nil)
	env.SetTestTimeout(30 * time.Second)
	// The SDK's default fails a workflow task whose code runs 1 s without
	// yielding. Under the race detector on a loaded machine, measuring a
	// large carry (TestContinueAsNewBoundsTheCarriedBytes: 2.3 MiB as JSON)
	// takes that long; a workflow that truly blocks still fails, at
	// testDeadlockTimeout.
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: testDeadlockTimeout})
	return h
}

// send signals the events at the given offset from the start.
func (h *harness) send(at time.Duration, events ...fsm.Event) {
	h.env.RegisterDelayedCallback(func() {
		for _, e := range events {
			h.env.SignalWorkflow(api.SignalEvent, e)
		}
	}, at)
}

func (h *harness) query() State {
	h.t.Helper()
	v, err := h.env.QueryWorkflow(api.QueryState)
	if err != nil {
		h.t.Fatalf("query %s: %v", api.QueryState, err)
	}
	var s State
	if err := v.Get(&s); err != nil {
		h.t.Fatalf("decode state: %v", err)
	}
	return s
}

func (h *harness) run(in Input) Result {
	h.t.Helper()
	h.env.ExecuteWorkflow(api.WorkflowType, in)
	if !h.env.IsWorkflowCompleted() {
		h.t.Fatal("workflow did not complete")
	}
	if err := h.env.GetWorkflowError(); err != nil {
		h.t.Fatalf("workflow error: %v", err)
	}
	var r Result
	if err := h.env.GetWorkflowResult(&r); err != nil {
		h.t.Fatalf("workflow result: %v", err)
	}
	return r
}

func ev(orderID string, v int64, s fsm.Status, amount int64) fsm.Event {
	e := testEvent(orderID, v, s)
	e.AmountCents = amount
	return e
}

func lifecycle(orderID string, amount int64) []fsm.Event {
	return []fsm.Event{
		ev(orderID, 1, fsm.Created, amount), ev(orderID, 2, fsm.Paid, amount), ev(orderID, 3, fsm.Shipped, amount),
		ev(orderID, 4, fsm.Delivered, amount), ev(orderID, 5, fsm.Completed, amount),
	}
}

func params() Params { return Params{GracePeriod: time.Minute, IdleTimeout: time.Hour} }

func TestInOrderLifecycle(t *testing.T) {
	h := newHarness(t, "U-1")
	events := lifecycle("U-1", 12345)
	for i, e := range events {
		h.send(time.Duration(i)*time.Second, e)
	}
	var mid State
	h.env.RegisterDelayedCallback(func() { mid = h.query() }, 2500*time.Millisecond)
	r := h.run(Input{Params: params()})

	s := r.State
	if r.Reason != ReasonGracePeriod || s.Order.Status != fsm.Completed || s.Order.Version != 5 || !s.Exists {
		t.Fatalf("result = %s %s v%d", r.Reason, s.Order.Status, s.Order.Version)
	}
	if s.Points != 123 || s.Count(fsm.Applied) != 5 || s.Processed != 5 || len(s.Recorded) != 5 || s.Gaps != 0 {
		t.Errorf("state = %+v", s)
	}
	if mid.Order.Status != fsm.Shipped || mid.Points != 123 || mid.Count(fsm.Applied) != 3 {
		t.Errorf("state query mid-stream = %s v%d points %d", mid.Order.Status, mid.Order.Version, mid.Points)
	}
	if len(h.db.loads) != 1 || len(h.db.applies) != 5 {
		t.Errorf("loads %v, applies %v", h.db.loads, h.db.applies)
	}
	if len(h.db.awards) != 1 || h.db.awards[0].Kind != fsm.Purchase || h.db.awards[0].Points != 123 || h.db.awards[0].Version != 2 {
		t.Errorf("awards = %+v", h.db.awards)
	}
	want := []string{"CREATED", "PAID", "SHIPPED", "DELIVERED", "COMPLETED"}
	if len(h.sa) != len(want) {
		t.Fatalf("search attribute upserts = %v, want %v", h.sa, want)
	}
	for i := range want {
		if h.sa[i] != want[i] {
			t.Errorf("search attribute upserts = %v, want %v", h.sa, want)
		}
	}
	// Completed at TerminalAt + GracePeriod (the last event came at 4s).
	if got := h.env.Now().Sub(s.TerminalAt); got != time.Minute {
		t.Errorf("completed %v after becoming terminal, want the grace period", got)
	}
}

func TestReorderedWithDuplicates(t *testing.T) {
	h := newHarness(t, "R-1")
	e := lifecycle("R-1", 5000)
	// v3 first (applied, gap), then v1 (stale), v3 again (duplicate, skipped),
	// v2 (stale), v5 (applied, gap), v4 (stale), v5 again (duplicate).
	h.send(0, e[2], e[0], e[2], e[1], e[4], e[3], e[4])
	r := h.run(Input{Params: params()})
	checkReorderedWithDuplicates(t, r.State)
	// Every event reaches the database, the duplicates too: the database,
	// not the run's memory, judges them repeats, and records each business
	// key once.
	if len(h.db.applies) != 7 || len(h.db.keys) != 5 {
		t.Errorf("applies = %v", h.db.applies)
	}
	// A new business key's step is told the order as stored, which
	// spares it a read; a recorded one's (the duplicates) reads.
	if want := []string{"stored", "stored", "none", "stored", "stored", "stored", "none"}; !slices.Equal(h.db.known, want) {
		t.Errorf("what the steps were told of the order: %v, want %v", h.db.known, want)
	}
	if len(h.db.awards) != 1 {
		t.Errorf("awards = %+v", h.db.awards)
	}
}

// checkReorderedWithDuplicates checks the end of the stream v3, v1, v3,
// v2, v5, v4, v5 of a 5,000-cent lifecycle: completed at v5 with two events
// applied over gaps, three stale, two duplicates skipped and 50 points.
func checkReorderedWithDuplicates(t *testing.T, s State) {
	t.Helper()
	if s.Order.Status != fsm.Completed || s.Order.Version != 5 {
		t.Fatalf("final %s v%d", s.Order.Status, s.Order.Version)
	}
	want := map[fsm.Outcome]int64{fsm.Applied: 2, fsm.Stale: 3, fsm.Duplicate: 2}
	for o, n := range want {
		if s.Count(o) != n {
			t.Errorf("count %s = %d, want %d (counts %v)", o, s.Count(o), n, s.Counts)
		}
	}
	if s.Gaps != 2 || s.Points != 50 || s.Processed != 7 {
		t.Errorf("gaps %d points %d processed %d", s.Gaps, s.Points, s.Processed)
	}
}

func TestCancelAfterPayRefunds(t *testing.T) {
	h := newHarness(t, "C-1")
	h.send(0, ev("C-1", 1, fsm.Created, 990), ev("C-1", 2, fsm.Paid, 990), ev("C-1", 3, fsm.Cancelled, 990))
	// SHIPPED after CANCELLED is illegal even with a higher version.
	h.send(10*time.Second, ev("C-1", 4, fsm.Shipped, 990))
	r := h.run(Input{Params: params()})
	s := r.State
	if s.Order.Status != fsm.Cancelled || s.Order.Version != 3 || s.Points != 0 {
		t.Fatalf("final %s v%d points %d", s.Order.Status, s.Order.Version, s.Points)
	}
	if s.Count(fsm.Illegal) != 1 || s.Count(fsm.Applied) != 3 {
		t.Errorf("counts = %v", s.Counts)
	}
	if len(h.db.awards) != 2 || h.db.awards[0].Kind != fsm.Purchase || h.db.awards[0].Points != 9 ||
		h.db.awards[1].Kind != fsm.Refund || h.db.awards[1].Points != -9 {
		t.Errorf("awards = %+v", h.db.awards)
	}
	if _, ok := h.db.keys[fsm.Key{OrderID: "C-1", Version: 4}]; !ok {
		t.Error("the illegal event was not recorded for the audit")
	}
}

func TestConflictIsRecordedNotApplied(t *testing.T) {
	h := newHarness(t, "K-1")
	a := ev("K-1", 2, fsm.Paid, 1000)
	b := ev("K-1", 2, fsm.Paid, 2000) // same key, other content
	h.send(0, ev("K-1", 1, fsm.Created, 1000), a, b, b)
	r := h.run(Input{Params: params()})
	s := r.State
	if s.Order.Version != 2 || s.Order.AmountCents != 1000 || s.Points != 10 {
		t.Fatalf("final v%d amount %d points %d", s.Order.Version, s.Order.AmountCents, s.Points)
	}
	// Both conflicting copies reach the database (the dead letter counts
	// every sighting); the recorded hash stays the first one.
	if s.Count(fsm.Conflict) != 2 || s.Recorded[2] != a.ContentHash() {
		t.Errorf("counts = %v, recorded = %v", s.Counts, s.Recorded[2])
	}
	if r.Reason != ReasonIdleTimeout {
		t.Errorf("reason = %s, want %s", r.Reason, ReasonIdleTimeout)
	}
}

func TestGracePeriodLateEventsDoNotReset(t *testing.T) {
	h := newHarness(t, "G-1")
	e := lifecycle("G-1", 100)
	h.send(0, e[0], e[1], e[4])
	// Late events within the grace period are handled; the period is not
	// extended by them.
	h.send(40*time.Second, e[3])
	h.send(50*time.Second, ev("G-1", 6, fsm.Completed, 100))
	r := h.run(Input{Params: params()})
	s := r.State
	if s.Count(fsm.Stale) != 1 || s.Count(fsm.Applied) != 4 || s.Order.Version != 6 {
		t.Errorf("counts %v version %d", s.Counts, s.Order.Version)
	}
	if got := h.env.Now().Sub(s.TerminalAt); got != time.Minute {
		t.Errorf("completed %v after becoming terminal, want exactly the grace period", got)
	}
	if s.LastEventAt.Sub(s.TerminalAt) != 50*time.Second {
		t.Errorf("last event %v after terminal", s.LastEventAt.Sub(s.TerminalAt))
	}
}

func TestIdleTimeoutResetsOnEvents(t *testing.T) {
	h := newHarness(t, "I-1")
	h.send(0, ev("I-1", 1, fsm.Created, 100))
	h.send(40*time.Minute, ev("I-1", 2, fsm.Paid, 100))
	start := h.env.Now()
	r := h.run(Input{Params: params()})
	if r.Reason != ReasonIdleTimeout || r.State.Order.Status != fsm.Paid {
		t.Fatalf("result %s %s", r.Reason, r.State.Order.Status)
	}
	if got := h.env.Now().Sub(start); got != 100*time.Minute {
		t.Errorf("completed after %v, want 40m + the 1h idle timeout", got)
	}
}

func TestFreshRunRehydratesLateEventIsStale(t *testing.T) {
	h := newHarness(t, "L-1")
	// The previous run left the order COMPLETED at v5 with all keys recorded.
	final := fsm.Decide(nil, ev("L-1", 5, fsm.Completed, 700)).Next
	h.db.orders["L-1"] = final
	for _, e := range lifecycle("L-1", 700) {
		h.db.keys[e.Key()] = e.ContentHash()
		h.db.outcomes[e.Key()] = fsm.Applied
	}
	h.db.points["L-1/purchase"] = 7
	late := ev("L-1", 6, fsm.Shipped, 700) // illegal after COMPLETED
	h.send(0, ev("L-1", 4, fsm.Delivered, 700), ev("L-1", 3, fsm.Shipped, 1), late)
	r := h.run(Input{Params: params()})
	s := r.State
	if len(h.db.loads) != 1 || h.db.firstSteps != 1 || s.Runs != 1 {
		t.Fatalf("loads = %v (%d with the first event's step) runs %d, want one load, with the first event",
			h.db.loads, h.db.firstSteps, s.Runs)
	}
	// v4 is a recorded duplicate (skipped), v3 with other content a
	// conflict, v6 illegal. Nothing changes.
	if s.Count(fsm.Duplicate) != 1 || s.Count(fsm.Conflict) != 1 || s.Count(fsm.Illegal) != 1 {
		t.Errorf("counts = %v", s.Counts)
	}
	// The fresh run learns from LoadOrder that the purchase row is there.
	if s.Order.Status != fsm.Completed || s.Order.Version != 5 || s.Points != 7 || len(h.db.awards) != 0 ||
		len(h.db.points) != 1 || !s.PurchaseAwarded {
		t.Errorf("final %s v%d points %d awards %v", s.Order.Status, s.Order.Version, s.Points, h.db.awards)
	}
	if len(h.sa) == 0 || h.sa[0] != "COMPLETED" {
		t.Errorf("search attribute upserts = %v", h.sa)
	}
}

// A previous run ended between ApplyEvent and AwardPoints: the order is
// paid, its purchase row missing. The next run writes it as soon as it
// loads the order, even when the only signal is a duplicate.
func TestFreshRunWritesTheMissingLedgerRow(t *testing.T) {
	h := newHarness(t, "M-1")
	paid := ev("M-1", 2, fsm.Paid, 12_300)
	o := fsm.Decide(nil, paid).Next
	h.db.orders["M-1"] = o
	h.db.keys[paid.Key()] = paid.ContentHash()
	h.db.outcomes[paid.Key()] = fsm.Applied
	h.send(0, paid)
	r := h.run(Input{Params: params()})
	if got := h.db.points["M-1/purchase"]; got != 123 || !r.State.PurchaseAwarded || r.State.Count(fsm.Duplicate) != 1 {
		t.Errorf("purchase row %d, awarded %v, counts %v; want 123 points written for the duplicate-only run",
			got, r.State.PurchaseAwarded, r.State.Counts)
	}
}

// A fresh run whose only signal holds no valid event has no step to load
// the order with: it loads it before it waits, writes the ledger row the
// order is due, and ends after the grace period of the COMPLETED order.
func TestFreshRunWithoutAValidEventLoadsBeforeItWaits(t *testing.T) {
	h := newHarness(t, "N-1")
	done := ev("N-1", 5, fsm.Completed, 12_300)
	h.db.orders["N-1"] = fsm.Decide(nil, done).Next
	h.db.keys[done.Key()] = done.ContentHash()
	h.db.outcomes[done.Key()] = fsm.Applied
	bad := ev("N-1", 6, fsm.Shipped, 12_300)
	bad.UserID = 0 // invalid
	h.send(0, bad)
	start := h.env.Now()
	r := h.run(Input{Params: params()})
	if len(h.db.loads) != 1 || h.db.firstSteps != 0 || len(h.db.applies) != 0 {
		t.Fatalf("loads %v (%d with an event), applies %v; want one load on its own and no step for the invalid event",
			h.db.loads, h.db.firstSteps, h.db.applies)
	}
	if got := h.db.points["N-1/purchase"]; got != 123 || r.State.Failed != 1 {
		t.Errorf("purchase row %d, failed %d; want the row the order is due written and the event counted as failed", got, r.State.Failed)
	}
	if got := h.env.Now().Sub(start); r.Reason != ReasonGracePeriod || got != params().GracePeriod {
		t.Errorf("ended by %s after %v, want the grace period, %v", r.Reason, got, params().GracePeriod)
	}
}

// A continued run whose purchase row could not be written yet: a duplicate
// signal writes it.
func TestDuplicateWritesTheMissingLedgerRow(t *testing.T) {
	h := newHarness(t, "M-2")
	paid := ev("M-2", 2, fsm.Paid, 4_500)
	o := fsm.Decide(nil, paid).Next
	h.db.orders["M-2"] = o
	h.db.keys[paid.Key()] = paid.ContentHash()
	carry := &State{OrderID: "M-2", Exists: true, Order: o, Recorded: map[int64]string{2: paid.ContentHash()},
		Counts: map[fsm.Outcome]int64{}, Runs: 1}
	h.send(0, paid)
	r := h.run(Input{Params: params(), Carry: carry})
	if got := h.db.points["M-2/purchase"]; got != 45 || !r.State.PurchaseAwarded {
		t.Errorf("purchase row %d, awarded %v; want 45 points written on the duplicate", got, r.State.PurchaseAwarded)
	}
}

func TestInvalidInputIsCountedNotFatal(t *testing.T) {
	h := newHarness(t, "X-1")
	// Retryable by itself: only the activity options make it final.
	h.db.failApply[2] = temporal.NewApplicationError("bad event", api.ErrTypeInvalidEvent)
	bad := ev("X-1", 3, fsm.Paid, 100)
	bad.UserID = 0 // breaks the contract: never reaches the database
	other := ev("Y-9", 3, fsm.Paid, 100)
	h.send(0, ev("X-1", 1, fsm.Created, 100), ev("X-1", 2, fsm.Paid, 100), bad, other, ev("X-1", 4, fsm.Paid, 100))
	r := h.run(Input{Params: params()})
	s := r.State
	if s.Failed != 3 || s.Order.Version != 4 || s.Count(fsm.Applied) != 2 {
		t.Errorf("failed %d version %d counts %v", s.Failed, s.Order.Version, s.Counts)
	}
	// The non-retryable failure was not retried.
	n := 0
	for _, k := range h.db.applies {
		if k == "X-1@2" {
			n++
		}
	}
	if n != 1 || len(h.db.applies) != 3 {
		t.Errorf("applies = %v", h.db.applies)
	}
}

// TestLongDatabaseOutageLosesNothing: while the database stays unreachable
// for minutes (ten failed attempts: about 3.5 minutes of backoff), the
// event waits; it is applied once the database is back, not dropped when
// one attempt's timeout has passed.
func TestLongDatabaseOutageLosesNothing(t *testing.T) {
	h := newHarness(t, "D-1")
	h.db.down = 10
	h.send(0, ev("D-1", 1, fsm.Created, 4200), ev("D-1", 2, fsm.Paid, 4200))
	r := h.run(Input{Params: params()})
	s := r.State
	if s.Failed != 0 || s.Count(fsm.Applied) != 2 || s.Order.Status != fsm.Paid || s.Points != 42 {
		t.Errorf("failed %d counts %v status %s points %d", s.Failed, s.Counts, s.Order.Status, s.Points)
	}
	if len(h.db.applies) != 12 {
		t.Errorf("ApplyEvent attempts = %d (%v), want 10 failed + 2", len(h.db.applies), h.db.applies)
	}
}

func TestLostCompletionUsesStoredOutcome(t *testing.T) {
	h := newHarness(t, "P-1")
	h.db.loseCompletion[2] = true
	h.send(0, ev("P-1", 1, fsm.Created, 4200), ev("P-1", 2, fsm.Paid, 4200))
	r := h.run(Input{Params: params()})
	s := r.State
	if s.Count(fsm.Applied) != 2 || s.Order.Status != fsm.Paid || s.Points != 42 {
		t.Errorf("counts %v status %s points %d", s.Counts, s.Order.Status, s.Points)
	}
	if len(h.db.applies) != 3 || len(h.db.awards) != 1 {
		t.Errorf("applies %v awards %+v", h.db.applies, h.db.awards)
	}
}

func continuedInput(t *testing.T, err error) Input {
	t.Helper()
	var can *workflow.ContinueAsNewError
	if !errors.As(err, &can) {
		t.Fatalf("workflow error = %v, want continue-as-new", err)
	}
	if can.WorkflowType.Name != api.WorkflowType {
		t.Errorf("continued as %s", can.WorkflowType.Name)
	}
	var in Input
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &in); err != nil {
		t.Fatalf("decode continued input: %v", err)
	}
	if in.Carry == nil {
		t.Fatal("continued without carried state")
	}
	return in
}

// oldContinueAsNew makes the harness's workflow take the behaviour of runs
// recorded before ChangeCarryPendingSignals.
func (h *harness) oldContinueAsNew() {
	h.env.OnGetVersion(ChangeCarryPendingSignals, workflow.DefaultVersion, versionCarryPending).Return(workflow.DefaultVersion)
}

// Before ChangeCarryPendingSignals: the run handles every pending signal,
// then continues as new with the state alone.
func TestContinueAsNewDrainsAndCarries(t *testing.T) {
	h := newHarness(t, "N-1")
	h.oldContinueAsNew()
	e := lifecycle("N-1", 300)
	p := params()
	p.MaxEventsPerRun = 2
	// Five signals arrive together: the run reaches its limit after two,
	// drains the other three, then continues as new.
	h.send(time.Second, e[0], e[1], e[1], e[3], e[2])
	h.env.ExecuteWorkflow(api.WorkflowType, Input{Params: p})
	in := continuedInput(t, h.env.GetWorkflowError())
	c := in.Carry
	if c.Processed != 5 || c.Count(fsm.Applied) != 3 || c.Count(fsm.Duplicate) != 1 || c.Count(fsm.Stale) != 1 {
		t.Errorf("carried processed %d counts %v", c.Processed, c.Counts)
	}
	if c.Order.Status != fsm.Delivered || c.Order.Version != 4 || c.Points != 3 || len(c.Recorded) != 4 || c.Runs != 1 {
		t.Errorf("carried %s v%d points %d recorded %d runs %d", c.Order.Status, c.Order.Version, c.Points, len(c.Recorded), c.Runs)
	}
	if in.Params != p || len(in.Pending) != 0 {
		t.Errorf("carried params %+v, want %+v; pending %d", in.Params, p, len(in.Pending))
	}

	// The next run starts from the carried state without loading it.
	h2 := newHarnessOn(t, "N-1", h.db)
	h2.oldContinueAsNew()
	in.Params.MaxEventsPerRun = 10
	h2.send(time.Second, e[4], e[2])
	r := h2.run(in)
	s := r.State
	if len(h2.db.loads) != 1 {
		t.Errorf("continued run loaded the order: %v", h2.db.loads)
	}
	if s.Runs != 2 || s.Processed != 2 || s.Count(fsm.Applied) != 4 || s.Count(fsm.Duplicate) != 2 ||
		s.Order.Status != fsm.Completed || s.Points != 3 {
		t.Errorf("second run: runs %d processed %d counts %v status %s points %d",
			s.Runs, s.Processed, s.Counts, s.Order.Status, s.Points)
	}
}

// When Temporal suggests it the run continues as new after the event it
// handles, carrying the one still pending; before
// ChangeCarryPendingSignals it handled that one too.
func TestContinueAsNewWhenSuggested(t *testing.T) {
	h := newHarness(t, "S-1")
	h.env.SetContinueAsNewSuggested(true)
	paid := ev("S-1", 2, fsm.Paid, 100)
	h.send(time.Second, ev("S-1", 1, fsm.Created, 100), paid)
	h.env.ExecuteWorkflow(api.WorkflowType, Input{Params: params()})
	in := continuedInput(t, h.env.GetWorkflowError())
	if in.Carry.Processed != 1 || in.Carry.Order.Status != fsm.Created || len(in.Pending) != 1 ||
		in.Pending[0].Event != paid {
		t.Errorf("carried processed %d status %s pending %+v", in.Carry.Processed, in.Carry.Order.Status, in.Pending)
	}

	h = newHarness(t, "S-2")
	h.oldContinueAsNew()
	h.env.SetContinueAsNewSuggested(true)
	h.send(time.Second, ev("S-2", 1, fsm.Created, 100), ev("S-2", 2, fsm.Paid, 100))
	h.env.ExecuteWorkflow(api.WorkflowType, Input{Params: params()})
	in = continuedInput(t, h.env.GetWorkflowError())
	if in.Carry.Processed != 2 || in.Carry.Order.Status != fsm.Paid || len(in.Pending) != 0 {
		t.Errorf("before the change: carried processed %d status %s pending %d", in.Carry.Processed, in.Carry.Order.Status, len(in.Pending))
	}
}

func TestBadWorkflowID(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(OrderWorkflow, workflow.RegisterOptions{Name: api.WorkflowType})
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "not-an-order"})
	env.ExecuteWorkflow(api.WorkflowType, Input{})
	if err := env.GetWorkflowError(); err == nil {
		t.Fatal("workflow with a foreign ID succeeded")
	}
}

func TestCancelHandlesDeliveredSignalsFirst(t *testing.T) {
	h := newHarness(t, "Z-1")
	h.env.RegisterDelayedCallback(func() {
		h.env.SignalWorkflow(api.SignalEvent, ev("Z-1", 1, fsm.Created, 100))
		h.env.SignalWorkflow(api.SignalEvent, ev("Z-1", 2, fsm.Paid, 100))
		h.env.CancelWorkflow()
	}, time.Second)
	h.env.ExecuteWorkflow(api.WorkflowType, Input{Params: params()})
	err := h.env.GetWorkflowError()
	var canceled *temporal.CanceledError
	if !errors.As(err, &canceled) {
		t.Fatalf("workflow error = %v, want cancelled", err)
	}
	if len(h.db.applies) != 2 || len(h.db.awards) != 1 {
		t.Errorf("applies %v awards %v: delivered signals were not handled before the cancellation", h.db.applies, h.db.awards)
	}
}

// sendBatch delivers events in one order-events signal at the given time.
func (h *harness) sendBatch(at time.Duration, events ...fsm.Event) {
	h.env.RegisterDelayedCallback(func() {
		b := Batch{}
		for _, e := range events {
			b.Deliveries = append(b.Deliveries, Delivery{Event: e})
		}
		h.env.SignalWorkflow(api.SignalEvents, b)
	}, at)
}

// TestBatchIsHandledLikeSeparateSignals: the reordered, duplicated stream of
// TestReorderedWithDuplicates, delivered as order-events batches of three,
// one and three, ends the same way and reaches the database in the same
// order as seven separate signals would. All three go on the batch channel:
// signals on the two channels that are pending in one workflow task are
// taken single events first (inbox.receiveAsync), so a single signal sent
// after a batch would be handled first whenever the test environment
// delivered both before the workflow's first task ended.
func TestBatchIsHandledLikeSeparateSignals(t *testing.T) {
	h := newHarness(t, "B-1")
	e := lifecycle("B-1", 5000)
	h.sendBatch(0, e[2], e[0], e[2])
	h.sendBatch(time.Millisecond, e[1])
	h.sendBatch(2*time.Millisecond, e[4], e[3], e[4])
	r := h.run(Input{Params: params()})
	checkReorderedWithDuplicates(t, r.State)
	// In the order sent, the duplicates asked of the database too.
	if want := []string{"B-1@3", "B-1@1", "B-1@3", "B-1@2", "B-1@5", "B-1@4", "B-1@5"}; !slices.Equal(h.db.applies, want) {
		t.Errorf("applied in order %v, want %v", h.db.applies, want)
	}
}

// TestContinueAsNewAfterABatch: before ChangeCarryPendingSignals, a run
// that reaches MaxEventsPerRun in the middle of a batch handles the whole
// batch, and what else is pending, before it continues as new.
func TestContinueAsNewAfterABatch(t *testing.T) {
	h := newHarness(t, "NB-1")
	h.oldContinueAsNew()
	e := lifecycle("NB-1", 300)
	p := params()
	p.MaxEventsPerRun = 2
	h.sendBatch(time.Second, e[0], e[1], e[2])
	h.send(time.Second, e[3])
	h.env.ExecuteWorkflow(api.WorkflowType, Input{Params: p})
	in := continuedInput(t, h.env.GetWorkflowError())
	c := in.Carry
	if c.Processed != 4 || c.Count(fsm.Applied) != 4 || c.Order.Status != fsm.Delivered || c.Order.Version != 4 {
		t.Errorf("carried processed %d counts %v status %s v%d", c.Processed, c.Counts, c.Order.Status, c.Order.Version)
	}
}

// With ChangeCarryPendingSignals: the run handles events up to its limit,
// then carries the pending ones, unhandled and in order, to the next run,
// which handles them before its own.
func TestContinueAsNewCarriesPendingSignals(t *testing.T) {
	h := newHarness(t, "N-2")
	e := lifecycle("N-2", 300)
	p := params()
	p.MaxEventsPerRun = 2
	h.send(time.Second, e[0], e[1], e[1], e[3], e[2])
	var steps steps
	h.record(&steps)
	h.env.ExecuteWorkflow(api.WorkflowType, Input{Params: p})
	in := continuedInput(t, h.env.GetWorkflowError())
	c := in.Carry
	if c.Processed != 2 || c.Count(fsm.Applied) != 2 || c.Order.Status != fsm.Paid || c.Points != 3 || c.Runs != 1 {
		t.Errorf("carried processed %d counts %v status %s points %d runs %d", c.Processed, c.Counts, c.Order.Status, c.Points, c.Runs)
	}
	checkPending(t, in.Pending, e[1], e[3], e[2])
	// The database saw two events; the task that continued as new ran no
	// activity: the run ended the one that did and waited for the next
	// (its timer is the sign). v2's purchase row is written by its own
	// step (ApplyEventAndAward).
	if got := strings.Join(steps.list(), " "); got != "load apply:1 apply:2 yield" {
		t.Errorf("steps of the first run: %s", got)
	}

	h2 := newHarnessOn(t, "N-2", h.db)
	in.Params.MaxEventsPerRun = 10
	h2.send(time.Second, e[4], e[2])
	r := h2.run(in)
	s := r.State
	if len(h2.db.loads) != 1 {
		t.Errorf("continued run loaded the order: %v", h2.db.loads)
	}
	// The carried v2 (duplicate, which the database confirms), v4 (applied
	// over the gap) and v3 (stale) come first, then v5 and v3 again
	// (duplicate).
	if got := strings.Join(h2.db.applies, " "); got != "N-2@1 N-2@2 N-2@2 N-2@4 N-2@3 N-2@5 N-2@3" {
		t.Errorf("applies = %s", got)
	}
	if s.Runs != 2 || s.Carried != 3 || s.Processed != 5 || s.Count(fsm.Applied) != 4 || s.Count(fsm.Duplicate) != 2 ||
		s.Count(fsm.Stale) != 1 || s.Order.Status != fsm.Completed || s.Points != 3 {
		t.Errorf("second run: runs %d carried %d processed %d counts %v status %s points %d",
			s.Runs, s.Carried, s.Processed, s.Counts, s.Order.Status, s.Points)
	}
}

// With ChangeCarryPendingSignals a run that reaches MaxEventsPerRun in the
// middle of an order-events signal stops there: the rest of the batch is
// carried, followed by the signal still pending, and the next run handles
// them first, in that order.
func TestContinueAsNewCarriesTheRestOfABatch(t *testing.T) {
	h := newHarness(t, "NB-2")
	e := lifecycle("NB-2", 300)
	p := params()
	p.MaxEventsPerRun = 2
	h.sendBatch(time.Second, e[0], e[1], e[2])
	h.send(time.Second, e[3])
	var steps steps
	h.record(&steps)
	h.env.ExecuteWorkflow(api.WorkflowType, Input{Params: p})
	in := continuedInput(t, h.env.GetWorkflowError())
	c := in.Carry
	if c.Processed != 2 || c.Count(fsm.Applied) != 2 || c.Order.Status != fsm.Paid || c.Order.Version != 2 {
		t.Errorf("carried processed %d counts %v status %s v%d", c.Processed, c.Counts, c.Order.Status, c.Order.Version)
	}
	checkPending(t, in.Pending, e[2], e[3])
	if got := strings.Join(steps.list(), " "); got != "load apply:1 apply:2 yield" {
		t.Errorf("steps of the first run: %s", got)
	}

	h2 := newHarnessOn(t, "NB-2", h.db)
	in.Params.MaxEventsPerRun = 10
	h2.sendBatch(time.Second, e[4], e[3])
	r := h2.run(in)
	if got := strings.Join(h2.db.applies, " "); got != "NB-2@1 NB-2@2 NB-2@3 NB-2@4 NB-2@5 NB-2@4" {
		t.Errorf("applies = %s", got)
	}
	s := r.State
	if s.Carried != 2 || s.Processed != 4 || s.Count(fsm.Applied) != 5 || s.Count(fsm.Duplicate) != 1 ||
		s.Order.Status != fsm.Completed || s.Points != 3 {
		t.Errorf("second run: carried %d processed %d counts %v status %s points %d",
			s.Carried, s.Processed, s.Counts, s.Order.Status, s.Points)
	}
}

// checkPending checks that the carried deliveries are the events want, in
// order.
func checkPending(t *testing.T, pending []Delivery, want ...fsm.Event) {
	t.Helper()
	if len(pending) != len(want) {
		t.Fatalf("carried %d pending events, want %d", len(pending), len(want))
	}
	for i := range want {
		if pending[i].Event != want[i] {
			t.Errorf("pending[%d] = v%d %s, want v%d %s", i, pending[i].Version, pending[i].Status, want[i].Version, want[i].Status)
		}
	}
}

// A batch of 1,200 events, with no limit per run: the task that the signal
// woke ends after MaxEventsPerTask events; no signal comes to end the wait,
// its timer does, and the next tasks, which no signal came with, end after
// MaxQuietEventsPerTask each. The run handles every event once, in order.
func TestABigBatchEndsItsTasks(t *testing.T) {
	const n = 1200
	h := newHarness(t, "T-1")
	b := Batch{Deliveries: dataUpdates("T-1", n)}
	h.env.RegisterDelayedCallback(func() { h.env.SignalWorkflow(api.SignalEvents, b) }, time.Second)
	var steps steps
	h.record(&steps)
	r := h.run(Input{Params: params()})
	if r.State.Count(fsm.Applied) != n || r.State.Processed != n {
		t.Errorf("counts %v processed %d", r.State.Counts, r.State.Processed)
	}
	checkApplied(t, h.db, "T-1", n)
	var ends []int
	applied := 0
	for _, s := range steps.list() {
		switch {
		case strings.HasPrefix(s, "apply:"):
			applied++
		case s == "yield":
			ends = append(ends, applied)
		}
	}
	want := []int{MaxEventsPerTask, MaxEventsPerTask + MaxQuietEventsPerTask, MaxEventsPerTask + 2*MaxQuietEventsPerTask}
	if !slices.Equal(ends, want) {
		t.Errorf("tasks ended after %v events, want %v", ends, want)
	}
}

// steps are what a run did, in order (the local activities start on
// goroutines of their own).
type steps struct {
	mu sync.Mutex
	s  []string
}

func (s *steps) add(step string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.s = append(s.s, step)
}

func (s *steps) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.s)
}

// record adds the run's steps to steps: "apply:<version>", "award",
// "load" for the local activities, "yield" for the wait for the next
// workflow task (its timer of YieldDelay). (runChain adds "signals" when a
// burst arrives.)
func (h *harness) record(steps *steps) {
	h.env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, args []any) {
		switch info.ActivityType.Name {
		case api.ActivityApplyEvent, api.ActivityApplyEventAndAward:
			steps.add(fmt.Sprintf("apply:%d", args[0].(activities.ApplyEventInput).Event.Version))
		case api.ActivityAwardPoints:
			steps.add("award")
		case api.ActivityLoadOrder:
			steps.add("load")
		}
	})
	h.env.SetOnTimerScheduledListener(func(_ string, d time.Duration) {
		if d == YieldDelay {
			steps.add("yield")
		}
	})
}

// streamInterval is the time between two bursts of runChain's stream.
const streamInterval = 10 * time.Millisecond

// chainRun is one run of a chain driven by runChain.
type chainRun struct {
	in    Input // the run's input
	steps steps
	sent  int   // events delivered to the run
	out   Input // the input it continued with (zero for the last run)
	// batched and single are the versions delivered to the run in
	// order-events and in order-event signals, in the order sent.
	batched, single []int64
}

// runChain runs the order's workflow from in, continuing as new until a run
// completes, while the events arrive as a stream: run after run, bursts of
// burst(i) events every streamInterval, in order-events signals of up to
// batch(i) events when batch(i) > 1, else one signal each;
// those not delivered before a run continued as new go to the next run.
// While a local activity runs, the test environment fires its timers by
// the wall clock: the stream goes on while the workflow handles signals,
// and how many arrive when varies.
func runChain(t *testing.T, orderID string, db *fakeDB, in Input, events []Delivery, burst func(i int) int,
	batch func(i int) int, old bool) ([]*chainRun, Result) {
	t.Helper()
	var runs []*chainRun
	for len(runs) < 100 {
		h := newHarnessOn(t, orderID, db)
		if old {
			h.oldContinueAsNew()
		}
		cr := &chainRun{in: in}
		h.record(&cr.steps)
		// A signal counts as delivered when the SDK hands it to the run:
		// the test environment queues a signal and drops it when the run
		// completes first, where the server would have failed the
		// completion or given the signal to the next run.
		var delivered []int64
		h.env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: testDeadlockTimeout, Interceptors: []interceptor.WorkerInterceptor{&signalTap{
			t: t,
			on: func(name string, vs []int64) {
				delivered = append(delivered, vs...)
				if name == api.SignalEvents {
					cr.batched = append(cr.batched, vs...)
				} else {
					cr.single = append(cr.single, vs...)
				}
			},
		}}})
		for i, at := 0, 0; at < len(events); i++ {
			n := min(burst(i), len(events)-at)
			ds := events[at : at+n]
			at += n
			size := max(batch(i), 1)
			h.env.RegisterDelayedCallback(func() {
				// The workflow waited: the signals come in a new task.
				cr.steps.add("signals")
				for b := range slices.Chunk(ds, size) {
					if len(b) > 1 {
						h.env.SignalWorkflow(api.SignalEvents, Batch{Deliveries: b})
					} else {
						h.env.SignalWorkflow(api.SignalEvent, b[0])
					}
				}
			}, time.Duration(i+1)*streamInterval)
		}
		h.env.ExecuteWorkflow(api.WorkflowType, in)
		if !h.env.IsWorkflowCompleted() {
			t.Fatalf("run %d did not complete", len(runs)+1)
		}
		err := h.env.GetWorkflowError()
		// Signals are delivered in the order sent, so the delivered events
		// are the first of those left; the rest go to the next run.
		cr.sent = len(delivered)
		for i, v := range delivered {
			if v != events[i].Version {
				t.Fatalf("run %d: delivery %d is v%d, sent as v%d", len(runs)+1, i+1, v, events[i].Version)
			}
		}
		events = events[cr.sent:]
		var can *workflow.ContinueAsNewError
		if !errors.As(err, &can) {
			if err != nil {
				t.Fatalf("run %d: %v", len(runs)+1, err)
			}
			if len(events) > 0 {
				t.Fatalf("run %d completed with %d events not delivered", len(runs)+1, len(events))
			}
			var r Result
			if err := h.env.GetWorkflowResult(&r); err != nil {
				t.Fatal(err)
			}
			return append(runs, cr), r
		}
		cr.out = continuedInput(t, err)
		in = cr.out
		runs = append(runs, cr)
	}
	t.Fatal("more than 100 runs")
	return nil, Result{}
}

// signalTap is a worker interceptor that reports, for each order-event or
// order-events signal the SDK delivers to a run, the versions it carries.
type signalTap struct {
	interceptor.WorkerInterceptorBase
	t  *testing.T
	on func(name string, versions []int64)
}

func (s *signalTap) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	in := &signalTapInbound{tap: s}
	in.Next = next
	return in
}

type signalTapInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	tap *signalTap
}

func (i *signalTapInbound) HandleSignal(ctx workflow.Context, in *interceptor.HandleSignalInput) error {
	dc := converter.GetDefaultDataConverter()
	switch in.SignalName {
	case api.SignalEvents:
		var b Batch
		if err := dc.FromPayloads(in.Arg, &b); err != nil {
			i.tap.t.Errorf("decode an %s signal: %v", in.SignalName, err)
		}
		vs := make([]int64, len(b.Deliveries))
		for k, d := range b.Deliveries {
			vs[k] = d.Version
		}
		i.tap.on(in.SignalName, vs)
	case api.SignalEvent:
		var d Delivery
		if err := dc.FromPayloads(in.Arg, &d); err != nil {
			i.tap.t.Errorf("decode an %s signal: %v", in.SignalName, err)
		}
		i.tap.on(in.SignalName, []int64{d.Version})
	}
	return i.Next.HandleSignal(ctx, in)
}

// dataUpdates returns n events of one order in version order: CREATED,
// then data updates at CREATED (the amount changing), each applied.
func dataUpdates(orderID string, n int) []Delivery {
	out := make([]Delivery, n)
	for i := range out {
		out[i] = Delivery{Event: ev(orderID, int64(i+1), fsm.Created, int64(1000+i))}
	}
	return out
}

// checkApplied checks that the database applied v1..vn of the order once
// each, in order.
func checkApplied(t *testing.T, db *fakeDB, orderID string, n int) {
	t.Helper()
	want := make([]string, n)
	for i := range want {
		want[i] = fmt.Sprintf("%s@%d", orderID, i+1)
	}
	if !slices.Equal(db.applies, want) {
		t.Fatalf("applies (%d) are not v1..v%d once each in order: %v", len(db.applies), n, db.applies)
	}
}

// checkAppliedPerChannel checks that the database applied v1..vn of the
// order once each and, of the events sent on each signal channel, in the
// order sent: the workflow takes a pending order-event signal before a
// pending order-events one, so the two channels' events may interleave
// otherwise than they were sent.
func checkAppliedPerChannel(t *testing.T, db *fakeDB, orderID string, n int, runs []*chainRun) {
	t.Helper()
	sorted := slices.Clone(db.applies)
	slices.SortFunc(sorted, func(a, b string) int {
		var va, vb int
		fmt.Sscanf(strings.TrimPrefix(a, orderID+"@"), "%d", &va)
		fmt.Sscanf(strings.TrimPrefix(b, orderID+"@"), "%d", &vb)
		return va - vb
	})
	want := make([]string, n)
	for i := range want {
		want[i] = fmt.Sprintf("%s@%d", orderID, i+1)
	}
	if !slices.Equal(sorted, want) {
		t.Fatalf("applies (%d) are not v1..v%d once each: %v", len(db.applies), n, db.applies)
	}
	pos := make(map[string]int, n)
	for i, k := range db.applies {
		pos[k] = i
	}
	for _, kind := range []string{"order-events", "order-event"} {
		var sent []int64
		for _, cr := range runs {
			if kind == "order-events" {
				sent = append(sent, cr.batched...)
			} else {
				sent = append(sent, cr.single...)
			}
		}
		for i := 1; i < len(sent); i++ {
			a, b := fmt.Sprintf("%s@%d", orderID, sent[i-1]), fmt.Sprintf("%s@%d", orderID, sent[i])
			if pos[a] > pos[b] {
				t.Errorf("%s signals: %s was applied after %s, sent before it", kind, a, b)
				break
			}
		}
	}
}

// checkCarriedFirst checks that a run applied the events it was carried
// before any other, in the order carried, and carried on, first, those it
// did not reach.
func checkCarriedFirst(t *testing.T, run int, cr *chainRun) {
	t.Helper()
	var applied []string
	for _, s := range cr.steps.list() {
		if v, ok := strings.CutPrefix(s, "apply:"); ok {
			applied = append(applied, v)
		}
	}
	for i, d := range cr.in.Pending {
		switch {
		case i < len(applied) && applied[i] != fmt.Sprint(d.Version):
			t.Errorf("run %d: carried v%d is not its apply %d (applies %v)", run, d.Version, i+1, applied)
			return
		case i >= len(applied) && (i-len(applied) >= len(cr.out.Pending) || cr.out.Pending[i-len(applied)].Event != d.Event):
			t.Errorf("run %d: carried v%d, not applied, is not carried on in its place", run, d.Version)
			return
		}
	}
}

// TestContinueAsNewUnderAStream: 1,000 events arrive in bursts of 1 to 120,
// every other burst in order-events signals of up to 16 events, while each run continues
// as new after 150. Every event is applied exactly once and in order across
// the runs, the carried ones first, then the run's own. Each run but the
// last handles exactly 150 events. Before
// the change (DefaultVersion) the runs carry nothing: each handles every
// signal pending when it reaches its limit (how many varies with the
// stream), all of them once too. Of each signal channel, the events are
// applied in the order sent.
func TestContinueAsNewUnderAStream(t *testing.T) {
	const n, limit = 1000, 150
	sizes := []int{3, 120, 17, 1, 45, 60, 8}
	burst := func(i int) int { return sizes[i%len(sizes)] }
	batch := func(i int) int { return 16 * (i % 2) }
	for _, old := range []bool{false, true} {
		name := "carry"
		if old {
			name = "drain (DefaultVersion)"
		}
		t.Run(name, func(t *testing.T) {
			db := newFakeDB()
			p := params()
			p.MaxEventsPerRun = limit
			runs, r := runChain(t, "H-1", db, Input{Params: p}, dataUpdates("H-1", n), burst, batch, old)
			checkAppliedPerChannel(t, db, "H-1", n, runs)
			s := r.State
			// An event taken after a higher version of the other channel is
			// stale; every one is applied or stale, and the last is v1000.
			if s.Count(fsm.Applied)+s.Count(fsm.Stale) != n || s.Count(fsm.Applied) == 0 || s.Order.Version != n ||
				s.Runs != len(runs) || s.Failed != 0 {
				t.Errorf("final: runs %d of %d, counts %v, v%d, failed %d", s.Runs, len(runs), s.Counts, s.Order.Version, s.Failed)
			}
			total, carried := 0, 0
			for i, cr := range runs {
				processed := processedBy(cr, r)
				total += processed
				carried += len(cr.out.Pending)
				t.Logf("run %d: %d carried in, %d events delivered, %d handled, %d carried out, %d yields",
					i+1, len(cr.in.Pending), cr.sent, processed, len(cr.out.Pending), strings.Count(strings.Join(cr.steps.list(), " "), "yield"))
				if old {
					if len(cr.out.Pending) != 0 {
						t.Errorf("run %d carried %d events before the change", i+1, len(cr.out.Pending))
					}
					continue
				}
				if cr.out.Carry != nil && (processed != limit || cr.out.Carry.Carried != len(cr.in.Pending)) {
					t.Errorf("run %d handled %d events (want %d), counts %d carried in (got %d)",
						i+1, processed, limit, cr.out.Carry.Carried, len(cr.in.Pending))
				}
				checkTasks(t, i+1, cr.steps.list())
				checkCarriedFirst(t, i+1, cr)
			}
			if total != n {
				t.Errorf("the runs handled %d events in all, want %d", total, n)
			}
			if !old && (carried == 0 || len(runs) < (n+limit-1)/limit) {
				t.Errorf("%d runs carried %d events in all; want at least %d runs and some carried", len(runs), carried, (n+limit-1)/limit)
			}
		})
	}
}

// checkTasks checks the steps of one run: no workflow task (the steps
// between two waits: the run's wait for the next task, or signals arriving)
// applies more than MaxQuietEventsPerTask events.
func checkTasks(t *testing.T, run int, steps []string) {
	t.Helper()
	applies := 0
	for _, s := range steps {
		switch {
		case s == "yield" || s == "signals":
			applies = 0
		case strings.HasPrefix(s, "apply:"):
			applies++
			if applies > MaxQuietEventsPerTask {
				t.Errorf("run %d: a task applied more than %d events", run, MaxQuietEventsPerTask)
				return
			}
		}
	}
}

// TestContinueAsNewBoundsTheCarriedBytes: events that carry large messages
// (60 KiB bodies) arrive all at once, in order-events signals of eight,
// while a run reaches its limit; carrying them all would pass
// MaxCarryBytes, so the run handles the oldest first and carries only what
// fits. Every event is still applied once, in order.
func TestContinueAsNewBoundsTheCarriedBytes(t *testing.T) {
	const n, limit = 40, 5
	events := dataUpdates("B-1", n)
	body := bytes.Repeat([]byte("x"), 60<<10)
	for i := range events {
		src := wire.NewEnvelope("ORDER_EVENTS", fmt.Sprintf("MSG-%d", i), "B-1", "CREATED", body, time.Time{}, false)
		events[i].Source = &src
	}
	db := newFakeDB()
	p := params()
	p.MaxEventsPerRun = limit
	runs, r := runChain(t, "B-1", db, Input{Params: p}, events, func(int) int { return n },
		func(int) int { return 8 }, false)
	checkApplied(t, db, "B-1", n)
	if r.State.Count(fsm.Applied) != n {
		t.Errorf("final counts %v", r.State.Counts)
	}
	over := false
	for i, cr := range runs {
		t.Logf("run %d: %d carried in, handled %d, carried out %d", i+1, len(cr.in.Pending), processedBy(cr, r), len(cr.out.Pending))
		checkTasks(t, i+1, cr.steps.list())
		if cr.out.Carry == nil {
			continue
		}
		b, err := json.Marshal(cr.out)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > MaxCarryBytes {
			t.Errorf("run %d carried %d bytes, more than %d", i+1, len(b), MaxCarryBytes)
		}
		if cr.out.Carry.Processed > limit {
			over = true
		}
	}
	// With all 40 waiting (2.3 MiB as carried), the first run handled more
	// than its limit, so that what it carried fits the bound.
	if !over || runs[0].out.Carry == nil || runs[0].out.Carry.Processed <= limit || len(runs[0].out.Pending) == 0 {
		t.Error("no run handled more than its limit: the bound was never reached")
	}
}

// processedBy is the number of events cr handled; r is the chain's result.
func processedBy(cr *chainRun, r Result) int {
	if cr.out.Carry != nil {
		return cr.out.Carry.Processed
	}
	return r.State.Processed
}

// TestTaskBound: the events a task may handle, from the events of the task
// before and the signals that came meanwhile.
func TestTaskBound(t *testing.T) {
	for _, c := range []struct{ prev, arrived, want int }{
		{50, 100, 25},  // signals come twice as fast as events are handled
		{25, 60, 20},   // still more than 50 per task
		{20, 40, 25},   // 40 for 20 events: 25 events for 50
		{40, 50, 40},   // as many
		{50, 10, 50},   // five times slower: the usual bound
		{50, 1, 50},    // a trickle: the usual bound
		{20, 200, 10},  // very fast: at least 10
		{0, 7, 50},     // no measure yet
		{120, 0, 500},  // none came: quiet
		{0, 0, 500},    // none came, nothing handled
		{500, 600, 41}, // a quiet task met a burst
	} {
		if got := taskBound(c.prev, c.arrived); got != c.want {
			t.Errorf("taskBound(%d events, %d signals) = %d, want %d", c.prev, c.arrived, got, c.want)
		}
	}
}

// snapshot is a copy of the fake database's rows, as a backup holds them.
type snapshot struct {
	orders   map[string]fsm.Order
	keys     map[fsm.Key]string
	outcomes map[fsm.Key]fsm.Outcome
	points   map[string]int64
}

// backup copies the fake database's rows.
func (f *fakeDB) backup() snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	return snapshot{maps.Clone(f.orders), maps.Clone(f.keys), maps.Clone(f.outcomes), maps.Clone(f.points)}
}

// restore puts the rows of b back, losing every write since.
func (f *fakeDB) restore(b snapshot) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.orders, f.keys, f.outcomes, f.points = maps.Clone(b.orders), maps.Clone(b.keys), maps.Clone(b.outcomes), maps.Clone(b.points)
}

// diff reports how the fake database's rows differ from want's.
func (f *fakeDB) diff(want snapshot) string {
	got := f.backup()
	var d []string
	if !maps.Equal(got.orders, want.orders) {
		d = append(d, fmt.Sprintf("orders %v, want %v", got.orders, want.orders))
	}
	if !maps.Equal(got.keys, want.keys) {
		d = append(d, fmt.Sprintf("keys %v, want %v", got.keys, want.keys))
	}
	if !maps.Equal(got.points, want.points) {
		d = append(d, fmt.Sprintf("points %v, want %v", got.points, want.points))
	}
	return strings.Join(d, "; ")
}

// The database is restored from a backup taken after the order was
// created, while the run remembers it paid and shipped. The redelivered
// events, duplicates to the run's memory, are asked of the database, which
// lacks them: they are applied again, the purchase row with them, and the
// run reloads the order. The rows end as before the loss.
func TestRestoredDatabaseGetsRedeliveredEventsBack(t *testing.T) {
	h := newHarness(t, "RB-1")
	e := lifecycle("RB-1", 7_000)
	var afterCreate, beforeLoss snapshot
	h.send(time.Second, e[0])
	h.env.RegisterDelayedCallback(func() { afterCreate = h.db.backup() }, 2*time.Second)
	h.send(3*time.Second, e[1], e[2])
	h.env.RegisterDelayedCallback(func() {
		beforeLoss = h.db.backup()
		h.db.restore(afterCreate)
	}, 4*time.Second)
	h.send(5*time.Second, e[1], e[2])
	r := h.run(Input{Params: params()})
	if len(beforeLoss.keys) != 3 || len(afterCreate.keys) != 1 || len(beforeLoss.points) != 1 {
		t.Fatalf("the scenario did not run as built: backup keys %v, before the loss keys %v points %v",
			afterCreate.keys, beforeLoss.keys, beforeLoss.points)
	}
	if d := h.db.diff(beforeLoss); d != "" {
		t.Errorf("after the redelivery: %s", d)
	}
	s := r.State
	if s.Resyncs != 1 || s.Order.Status != fsm.Shipped || s.Order.Version != 3 || !s.PurchaseAwarded || len(s.Recorded) != 3 {
		t.Errorf("run: resyncs %d, %s v%d, purchase awarded %v, recorded %v", s.Resyncs, s.Order.Status, s.Order.Version,
			s.PurchaseAwarded, s.Recorded)
	}
}

// After the same loss, the first event to come is a new one: the
// database's answer shows an order older than the run knows, and the run
// reloads it; the redelivered events that follow are no longer in its
// memory and are applied.
func TestRestoredDatabaseBehindOnANewEvent(t *testing.T) {
	h := newHarness(t, "RB-2")
	e := lifecycle("RB-2", 7_000)
	var afterCreate snapshot
	h.send(time.Second, e[0])
	h.env.RegisterDelayedCallback(func() { afterCreate = h.db.backup() }, 2*time.Second)
	h.send(3*time.Second, e[1], e[2])
	h.env.RegisterDelayedCallback(func() { h.db.restore(afterCreate) }, 4*time.Second)
	h.send(5*time.Second, e[3])
	h.send(6*time.Second, e[1], e[2])
	r := h.run(Input{Params: params()})
	if got := h.db.orders["RB-2"]; got.Status != fsm.Delivered || got.Version != 4 {
		t.Errorf("stored order %s v%d, want DELIVERED v4", got.Status, got.Version)
	}
	if len(h.db.keys) != 4 || h.db.points["RB-2/purchase"] != 70 {
		t.Errorf("keys %v, points %v: want v1 to v4 and the 70-point purchase row", h.db.keys, h.db.points)
	}
	if s := r.State; s.Resyncs != 1 || s.Order.Version != 4 {
		t.Errorf("run: resyncs %d, v%d", s.Resyncs, s.Order.Version)
	}
}

// Without a loss the run never reloads: a database that agrees with the
// run's memory confirms its duplicates.
func TestDuplicatesConfirmedWithoutReload(t *testing.T) {
	h := newHarness(t, "RB-3")
	e := lifecycle("RB-3", 7_000)
	h.send(time.Second, e[0], e[1], e[1], e[2], e[0])
	r := h.run(Input{Params: params()})
	if s := r.State; s.Resyncs != 0 || len(h.db.loads) != 1 || s.Count(fsm.Duplicate) != 2 {
		t.Errorf("resyncs %d, loads %v, counts %v", s.Resyncs, h.db.loads, s.Counts)
	}
}

// A worker told to record the oldest version it may (WriteVersionProvider,
// what 0.1.0 replays) starts runs that behave as that release's: a
// remembered duplicate is skipped without asking the database. Another
// change ID still records its newest version.
func TestWriteVersionProviderRecordsAnOlderVersion(t *testing.T) {
	h := newHarness(t, "WV-1")
	h.env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: testDeadlockTimeout,
		PreferredVersionProvider: WriteVersionProvider(OldestWriteVersion)})
	e := lifecycle("WV-1", 5000)
	h.send(time.Second, e[0], e[1], e[1], e[2])
	r := h.run(Input{Params: params()})
	if got := strings.Join(h.db.applies, " "); got != "WV-1@1 WV-1@2 WV-1@3" || r.State.Count(fsm.Duplicate) != 1 {
		t.Errorf("applies %s, counts %v: want the duplicate skipped from memory", got, r.State.Counts)
	}
	if in := (worker.PreferredVersionProviderInput{ChangeID: ChangeCarryPendingSignals, MaxSupported: 1}); WriteVersionProvider(4)(in) != nil {
		t.Error("the provider chose a version of another change ID")
	}
}
