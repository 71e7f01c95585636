package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/orderflow/orderflow/api"
	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/internal/workflowtest"
	"github.com/orderflow/orderflow/message"
	"github.com/orderflow/orderflow/wire"
	"github.com/orderflow/orderflow/workflows"
)

// Recorded histories live in testdata/<scenario>[-runN].json. Re-record them
// (after a deliberate, versioned change of the workflow's commands) with
//
//	make up
//	ORDERFLOW_RECORD_HISTORIES=1 go test ./workflows -run TestRecordHistories -count=1
//
// which runs every scenario on the real Temporal server and PostgreSQL and
// overwrites the files (ORDERFLOW_RECORD_HISTORIES=batched,in-order: only
// those scenarios). Histories of earlier workflow versions are kept
// under a version prefix and replay too: testdata/v0-* (regular activities,
// before workflow.GetVersion("local-db-activities")), testdata/v1-* (version
// 1: local activities, one status upsert per event), testdata/v2-* (version
// 2: one status upsert per batch; signals of bare events), testdata/v3-*
// (version 3: ledger reconciled on load and on duplicates; signals carry
// the source message; recorded before the steps carried summaries),
// testdata/drain-* (version 3 with summaries, before
// workflow.GetVersion("carry-pending-signals"): a run handles every pending
// signal before it continues as new), testdata/v3s-* (version 3 with a
// summary on every database step, which is user metadata that replay does
// not compare, so the v3-* files replay against the same code; where a run
// continues as new, "carry-pending-signals" version 1), testdata/v4-*
// (version 4: an event's decision and its ledger row are one step,
// ApplyEventAndAward, and the deadline's timer is started only when the run
// waits with no signal pending; the runs of continue-as-new, carry-pending
// and carry-batch carry pending events to the next), testdata/v5-* (version
// 5: an event the run remembers goes to the database too, which confirms
// the duplicate or, after a restore, applies it), testdata/v6-* (version 6:
// a run started for an order's first version starts with the OrderStatus
// search attribute that SignalWithStart named, and upserts the status only
// when it differs). The unprefixed files are version 7: a fresh run's first
// event's step loads the order too (LoadOrderAndApply). Before
// re-recording after a new version, move the unprefixed files under a
// prefix of their own, so that they keep replaying. batched*.json have
// order-events signals, which need no new version: the workflow handles a
// batch's events exactly as separate signals, with the same commands.
const recordEnv = "ORDERFLOW_RECORD_HISTORIES"

// recordWriteEnv, when set, is the version of ChangeLocalActivities the
// recording worker writes (workflows.WriteVersionProvider). The files of
// testdata/w4-* were recorded so, for 0.1.0, whose code replays them too;
// testdata/w5-* for 0.2.0; testdata/w6-* for 0.3.0.
const recordWriteEnv = "ORDERFLOW_RECORD_WRITE_VERSION"

// replayScenarios are the scenarios that must have at least one recorded
// history each.
var replayScenarios = []string{"in-order", "reordered-duplicates", "cancel-after-pay", "continue-as-new", "late-event-fresh-run", "batched",
	"carry-pending", "carry-batch"}

// TestReplayRecordedHistories replays every recorded history against the
// current OrderWorkflow: a change that breaks determinism fails here.
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range replayScenarios {
		if !slices.ContainsFunc(files, func(f string) bool { return strings.HasPrefix(filepath.Base(f), sc) }) {
			t.Errorf("no recorded history for scenario %s in testdata/ (see %s)", sc, recordEnv)
		}
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			workflows.Register(r)
			if err := replay(r, f); err != nil {
				t.Fatalf("replay %s: %v", f, err)
			}
		})
	}
}

// TestRecordedHistoriesCarrySummaries reads the step summaries the real
// server stored with the current workflow's database steps: the UI shows
// these lines in the order's event history.
func TestRecordedHistoriesCarrySummaries(t *testing.T) {
	for file, want := range map[string][]string{
		// Version 7: a fresh run's first event's step loads the order.
		"in-order.json": {"v1 CREATED, on the order loaded from PostgreSQL", "v2 PAID → applied, +129 points",
			"v3 SHIPPED → applied", "v4 DELIVERED → applied", "v5 COMPLETED → applied"},
		"reordered-duplicates.json": {"v3 SHIPPED, on the order loaded from PostgreSQL",
			"v1 CREATED → stale, order at v3", "v3 SHIPPED → duplicate", "v2 PAID → stale, order at v3",
			"v4 DELIVERED → applied", "v5 COMPLETED → applied", "v4 DELIVERED → conflict, parked", "v5 COMPLETED → duplicate"},
		// Version 4 of ChangeLocalActivities and later: the ledger row is
		// written by the decision's own step.
		"v6-in-order.json": {"load the order from PostgreSQL", "v1 CREATED → applied", "v2 PAID → applied, +129 points",
			"v3 SHIPPED → applied", "v4 DELIVERED → applied", "v5 COMPLETED → applied"},
		// Version 5: a duplicate the run remembers is asked of the database.
		"v6-reordered-duplicates.json": {"load the order from PostgreSQL", "v3 SHIPPED → applied, over a gap, +129 points",
			"v1 CREATED → stale, order at v3", "v3 SHIPPED → duplicate", "v2 PAID → stale, order at v3",
			"v4 DELIVERED → applied", "v5 COMPLETED → applied", "v4 DELIVERED → conflict, parked", "v5 COMPLETED → duplicate"},
		"v4-reordered-duplicates.json": {"load the order from PostgreSQL", "v3 SHIPPED → applied, over a gap, +129 points",
			"v1 CREATED → stale, order at v3", "v2 PAID → stale, order at v3",
			"v4 DELIVERED → applied", "v5 COMPLETED → applied", "v4 DELIVERED → conflict, parked"},
		"cancel-after-pay.json": {"v1 CREATED, on the order loaded from PostgreSQL", "v2 PAID → applied, +129 points",
			"v3 CANCELLED → applied, -129 points", "v4 SHIPPED → illegal after CANCELLED"},
		// Version 3: the ledger row is a step of its own.
		"v3s-cancel-after-pay.json": {"load the order from PostgreSQL", "v1 CREATED → applied", "v2 PAID → applied, +129 points",
			"+129 points (purchase) for user 42", "v3 CANCELLED → applied, -129 points", "-129 points (refund) for user 42",
			"v4 SHIPPED → illegal after CANCELLED"},
	} {
		f, err := os.Open(filepath.Join("testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		var got []string
		for _, e := range h.Events {
			if e.GetEventType() != enumspb.EVENT_TYPE_MARKER_RECORDED || e.GetMarkerRecordedEventAttributes().GetMarkerName() != "LocalActivity" {
				continue
			}
			var summary string
			if p := e.GetUserMetadata().GetSummary(); p != nil {
				if err := converter.GetDefaultDataConverter().FromPayload(p, &summary); err != nil {
					t.Fatalf("%s: decode summary: %v", file, err)
				}
			}
			got = append(got, summary)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: step summaries\n%q\nwant\n%q", file, got, want)
		}
	}
}

// TestRecordedHistoriesCarryPendingSignals makes sure the recorded
// histories cover both ways of continuing as new: with
// workflows.ChangeCarryPendingSignals (its version marker, and next runs
// whose input carries pending events, among them events of an
// order-events signal) and before it (testdata/drain-*: no marker, nothing
// carried, every signal the run received handled by it).
func TestRecordedHistoriesCarryPendingSignals(t *testing.T) {
	for _, file := range []string{"continue-as-new-run1.json", "carry-pending-run1.json", "carry-batch-run1.json"} {
		h := readHistory(t, filepath.Join("testdata", file))
		if v, ok := changeVersion(t, h, workflows.ChangeCarryPendingSignals); !ok || v != 1 {
			t.Errorf("%s: %s version %d (recorded: %v), want 1", file, workflows.ChangeCarryPendingSignals, v, ok)
		}
		if h.Events[len(h.Events)-1].GetEventType() != enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW {
			t.Errorf("%s: the run did not continue as new", file)
		}
	}
	for _, scenario := range []string{"carry-pending", "carry-batch"} {
		files, err := filepath.Glob(filepath.Join("testdata", scenario+"-run*.json"))
		if err != nil {
			t.Fatal(err)
		}
		carried := 0
		for _, f := range files {
			carried += len(recordedInput(t, f).Pending)
		}
		if len(files) < 2 || carried == 0 {
			t.Errorf("%s: %d runs recorded, %d events carried from one to the next; want some", scenario, len(files), carried)
		}
	}
	// carry-batch: the first run continued as new with part of the
	// order-events signal it received unhandled: the second run's input
	// carries events the first received in that batch.
	batch := map[int64]bool{}
	for _, e := range readHistory(t, filepath.Join("testdata", "carry-batch-run1.json")).Events {
		a := e.GetWorkflowExecutionSignaledEventAttributes()
		if a.GetSignalName() != api.SignalEvents {
			continue
		}
		var b workflows.Batch
		if err := converter.GetDefaultDataConverter().FromPayloads(a.GetInput(), &b); err != nil {
			t.Fatal(err)
		}
		for _, d := range b.Deliveries {
			batch[d.Version] = true
		}
	}
	if !slices.ContainsFunc(recordedInput(t, filepath.Join("testdata", "carry-batch-run2.json")).Pending,
		func(d workflows.Delivery) bool { return batch[d.Version] }) {
		t.Error("carry-batch-run2.json: carries no event of an order-events signal of the first run")
	}
	for _, file := range []string{"drain-continue-as-new-run1.json", "drain-continue-as-new-run2.json"} {
		h := readHistory(t, filepath.Join("testdata", file))
		if _, ok := changeVersion(t, h, workflows.ChangeCarryPendingSignals); ok {
			t.Errorf("%s: recorded before %s, yet it has its marker", file, workflows.ChangeCarryPendingSignals)
		}
	}
	if in := recordedInput(t, filepath.Join("testdata", "drain-continue-as-new-run2.json")); len(in.Pending) != 0 {
		t.Errorf("drain-continue-as-new-run2.json: %d events carried before the change", len(in.Pending))
	}
}

// changeVersion returns the version h recorded for the change ID, if any.
func changeVersion(t *testing.T, h *historypb.History, changeID string) (workflow.Version, bool) {
	t.Helper()
	dc := converter.GetDefaultDataConverter()
	for _, e := range h.Events {
		a := e.GetMarkerRecordedEventAttributes()
		if a == nil || a.GetMarkerName() != "Version" {
			continue
		}
		var id string
		var v workflow.Version
		if err := dc.FromPayloads(a.GetDetails()["change-id"], &id); err != nil {
			t.Fatalf("decode a version marker: %v", err)
		}
		if id != changeID {
			continue
		}
		if err := dc.FromPayloads(a.GetDetails()["version"], &v); err != nil {
			t.Fatalf("decode a version marker: %v", err)
		}
		return v, true
	}
	return 0, false
}

// recordedInput is the input of the run recorded in file.
func recordedInput(t *testing.T, file string) workflows.Input {
	t.Helper()
	h := readHistory(t, file)
	var in workflows.Input
	if p := h.Events[0].GetWorkflowExecutionStartedEventAttributes().GetInput(); p != nil {
		if err := converter.GetDefaultDataConverter().FromPayloads(p, &in); err != nil {
			t.Fatalf("%s: decode the input: %v", file, err)
		}
	}
	return in
}

// readHistory reads the history recorded in file.
func readHistory(t *testing.T, file string) *historypb.History {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if len(h.Events) == 0 {
		t.Fatalf("%s: empty history", file)
	}
	return h
}

// TestReplayDetectsNondeterminism makes sure the replay test can fail: a
// workflow that issues other commands than the recorded ones is rejected.
func TestReplayDetectsNondeterminism(t *testing.T) {
	f := filepath.Join("testdata", "in-order.json")
	if _, err := os.Stat(f); err != nil {
		t.Fatalf("recorded history missing: %v", err)
	}
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(changedWorkflow, workflowRegisterOptions())
	if err := replay(r, f); err == nil {
		t.Fatal("a workflow with different commands replayed the recorded history without error")
	}
}

// replay replays the recorded history in file under its original workflow
// ID (OrderWorkflow reads the order ID from it).
func replay(r worker.WorkflowReplayer, file string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	if err != nil {
		return fmt.Errorf("decode history: %w", err)
	}
	if len(h.Events) == 0 {
		return errors.New("empty history")
	}
	id := h.Events[0].GetWorkflowExecutionStartedEventAttributes().GetWorkflowId()
	if id == "" {
		return errors.New("history does not start with the workflow ID")
	}
	return r.ReplayWorkflowHistoryWithOptions(testenv.QuietTemporalLogger(), h, worker.ReplayWorkflowHistoryOptions{
		OriginalExecution: workflow.Execution{ID: id, RunID: "replayed-run"},
	})
}

// source is the message a bridge would have received for e.
func source(e fsm.Event) *wire.Envelope {
	body, err := message.Encode(e)
	if err != nil {
		panic(err)
	}
	env := wire.NewEnvelope("ORDER_EVENTS", fmt.Sprintf("MSG-%s-%d", e.OrderID, e.Version), e.OrderID, string(e.Status),
		body, time.Time{}, false)
	return &env
}

// TestRecordHistories runs each replay scenario on the real services and
// writes its histories to testdata/. It only runs when
// ORDERFLOW_RECORD_HISTORIES=1.
func TestRecordHistories(t *testing.T) {
	only := os.Getenv(recordEnv)
	if only == "" {
		t.Skipf("set %s=1 to record histories", recordEnv)
	}
	wanted := func(name string) bool {
		return only == "1" || slices.Contains(strings.Split(only, ","), name)
	}
	// With ORDERFLOW_RECORD_WRITE_VERSION=N the worker records version N of
	// ChangeLocalActivities in new runs (as during a rollout whose rollback
	// target replays N), and the files are named wN-<scenario>.
	prefix := ""
	var opts []func(*worker.Options)
	if v := os.Getenv(recordWriteEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || workflows.CheckWriteVersion(n) != nil {
			t.Fatalf("%s=%s: want a version new runs may record", recordWriteEnv, v)
		}
		prefix = fmt.Sprintf("w%d-", n)
		opts = append(opts, func(o *worker.Options) { o.PreferredVersionProvider = workflows.WriteVersionProvider(n) })
	}
	c := testenv.RequireTemporal(t)
	db, _ := testenv.NewDatabase(t)
	tq := uniq.Name("wf-record")
	workflowtest.StartWorker(t, c, tq, db, opts...)
	ctx := context.Background()
	quick := workflows.Params{GracePeriod: time.Second, IdleTimeout: 3 * time.Second}

	type step struct {
		events []fsm.Event
		batch  bool          // all events in one order-events signal
		pause  time.Duration // before the next step
		// parallel: the steps' signals are sent at once, each from a
		// goroutine of its own (a batch step's as one signal).
		parallel bool
	}
	record := func(name string, p workflows.Params, steps ...step) {
		if !wanted(name) {
			return
		}
		orderID := uniq.Name("rec-" + name)
		var wg sync.WaitGroup
		for _, s := range steps {
			var batch []workflows.Delivery
			for _, e := range s.events {
				e.OrderID = orderID
				e.EventID = fmt.Sprintf("%s-v%d", orderID, e.Version)
				if s.batch {
					batch = append(batch, workflows.Delivery{Event: e, Source: source(e)})
					continue
				}
				deliver := func() {
					if err := workflows.Deliver(ctx, c, tq, p, e, source(e)); err != nil {
						t.Errorf("%s: deliver: %v", name, err)
					}
				}
				if s.parallel {
					wg.Go(deliver)
				} else {
					deliver()
				}
			}
			if len(batch) > 0 {
				deliver := func() {
					if err := workflows.DeliverBatch(ctx, c, tq, p, orderID, batch); err != nil {
						t.Errorf("%s: deliver batch: %v", name, err)
					}
				}
				if s.parallel {
					wg.Go(deliver)
				} else {
					deliver()
				}
			}
			if !s.parallel {
				wg.Wait()
			}
			if t.Failed() {
				t.FailNow()
			}
			time.Sleep(s.pause)
		}
		wg.Wait()
		runs := closedChain(t, c, orderID)
		for i, runID := range runs {
			file := prefix + name + ".json"
			if len(runs) > 1 {
				file = fmt.Sprintf("%s%s-run%d.json", prefix, name, i+1)
			}
			writeHistory(t, c, orderID, runID, filepath.Join("testdata", file))
		}
	}
	ev := func(v int64, s fsm.Status, amount int64) fsm.Event {
		return fsm.Event{EventID: "x", OrderID: "x", UserID: 42, Status: s, Version: v, AmountCents: amount,
			OccurredAt: time.Date(2026, 2, 1, 9, 0, 0, 0, time.UTC).Add(time.Duration(v) * time.Minute)}
	}
	lc := []fsm.Event{ev(1, fsm.Created, 12900), ev(2, fsm.Paid, 12900), ev(3, fsm.Shipped, 12900),
		ev(4, fsm.Delivered, 12900), ev(5, fsm.Completed, 12900)}

	record("in-order", quick, step{events: lc})
	record("reordered-duplicates", quick, step{events: []fsm.Event{lc[2], lc[0], lc[2], lc[1], ev(4, fsm.Delivered, 1), lc[4], lc[3], lc[4]}})
	record("cancel-after-pay", quick, step{events: []fsm.Event{lc[0], lc[1], ev(3, fsm.Cancelled, 12900), ev(4, fsm.Shipped, 12900)}})
	cont := quick
	cont.MaxEventsPerRun = 3
	// Three signals per run: the first run continues as new after the
	// first three events, the second after the next three (a duplicate
	// among them), the third completes after the grace period.
	record("continue-as-new", cont, step{events: lc[:3], pause: time.Second},
		step{events: []fsm.Event{lc[3], lc[1], lc[4]}})
	// Eleven signals arrive at once behind the first, four events per run:
	// the runs continue as new with signals still pending and carry them,
	// unhandled, to the next run, which handles them first.
	var carry []fsm.Event
	for v := int64(1); v <= 8; v++ {
		carry = append(carry, ev(v, fsm.Created, 12900+v))
	}
	for i, s := range []fsm.Status{fsm.Paid, fsm.Shipped, fsm.Delivered, fsm.Completed} {
		carry = append(carry, ev(int64(9+i), s, 12908))
	}
	cp := quick
	cp.MaxEventsPerRun = 4
	var burst []step
	for _, e := range carry[1:] {
		burst = append(burst, step{events: []fsm.Event{e}, parallel: true})
	}
	record("carry-pending", cp, append([]step{{events: carry[:1]}}, burst...)...)
	// Behind the first event, an order-events signal of six events and one
	// of three, and two signals of one, at once, three events per run: the
	// first run reaches its limit in the middle of a batch and carries the
	// rest of it, and what else is pending, to the next.
	cb := quick
	cb.MaxEventsPerRun = 3
	record("carry-batch", cb, step{events: carry[:1]}, step{events: carry[1:7], batch: true, parallel: true},
		step{events: carry[7:10], batch: true, parallel: true}, step{events: carry[10:11], parallel: true},
		step{events: carry[11:12], parallel: true})
	// Batches: v3, v1, v3 again and v2 in one signal, then v5 in a signal
	// of its own and v4 and v5 again in one more batch.
	record("batched", quick, step{events: []fsm.Event{lc[2], lc[0], lc[2], lc[1]}, batch: true},
		step{events: []fsm.Event{lc[4]}}, step{events: []fsm.Event{lc[3], lc[4]}, batch: true})
	if !wanted("late-event-fresh-run") {
		return
	}
	// The first run closes after its grace period; the late v2 starts a
	// fresh run that rehydrates and finds it stale. Only the fresh run is
	// kept (the first is the in-order case again).
	late := uniq.Name("rec-late")
	for _, e := range []fsm.Event{lc[0], lc[2], lc[3], lc[4]} {
		e.OrderID, e.EventID = late, fmt.Sprintf("%s-v%d", late, e.Version)
		if err := workflows.Deliver(ctx, c, tq, quick, e, source(e)); err != nil {
			t.Fatal(err)
		}
	}
	firstRuns := closedChain(t, c, late)
	e := lc[1]
	e.OrderID, e.EventID = late, late+"-v2"
	if err := workflows.Deliver(ctx, c, tq, quick, e, source(e)); err != nil {
		t.Fatal(err)
	}
	var fresh string
	testenv.WaitFor(t, 60*time.Second, func() error {
		runs := closedChainNoWait(c, late)
		if len(runs) == 0 || runs[len(runs)-1] == firstRuns[len(firstRuns)-1] {
			return fmt.Errorf("no fresh run closed yet")
		}
		fresh = runs[len(runs)-1]
		return nil
	})
	writeHistory(t, c, late, fresh, filepath.Join("testdata", prefix+"late-event-fresh-run.json"))
}

// closedChain waits for the order's workflow to complete (after any
// continue-as-new) and returns the run IDs of the chain, oldest first.
func closedChain(t *testing.T, c client.Client, orderID string) []string {
	t.Helper()
	var runs []string
	testenv.WaitFor(t, 60*time.Second, func() error {
		runs = closedChainNoWait(c, orderID)
		if runs == nil {
			return fmt.Errorf("workflow of %s not completed yet", orderID)
		}
		return nil
	})
	return runs
}

// closedChainNoWait returns the chain of the latest run if it completed, or
// nil.
func closedChainNoWait(c client.Client, orderID string) []string {
	ctx := context.Background()
	id := api.WorkflowID(orderID)
	d, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil || d.WorkflowExecutionInfo.Status != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		return nil
	}
	runs := []string{d.WorkflowExecutionInfo.Execution.RunId}
	for {
		h := history(ctx, c, id, runs[0])
		if h == nil || len(h.Events) == 0 {
			return nil
		}
		prev := h.Events[0].GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId()
		if prev == "" {
			return runs
		}
		runs = append([]string{prev}, runs...)
	}
}

func history(ctx context.Context, c client.Client, id, runID string) *historypb.History {
	it := c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	h := &historypb.History{}
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return nil
		}
		h.Events = append(h.Events, e)
	}
	return h
}

func writeHistory(t *testing.T, c client.Client, orderID, runID, path string) {
	t.Helper()
	h := history(context.Background(), c, api.WorkflowID(orderID), runID)
	if h == nil {
		t.Fatalf("fetch history of %s run %s", orderID, runID)
	}
	b, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded %s: %d events", path, len(h.Events))
}

// changedWorkflow is OrderWorkflow with one more command up front, as a
// careless change would add.
func changedWorkflow(ctx workflow.Context, in workflows.Input) (workflows.Result, error) {
	if err := workflow.Sleep(ctx, time.Second); err != nil {
		return workflows.Result{}, err
	}
	return workflows.OrderWorkflow(ctx, in)
}

func workflowRegisterOptions() workflow.RegisterOptions {
	return workflow.RegisterOptions{Name: api.WorkflowType}
}
