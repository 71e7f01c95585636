package workflows_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/internal/workflowtest"
	"github.com/orderflow/orderflow/workflows"
	"github.com/orderflow/orderflow/workflows/api"
)

// hotChunks are the sizes of the deliveries of TestHotOrderContinuesAsNewOnRealServices,
// in turn: 1 is an order-event signal, more an order-events signal.
var hotChunks = []int{1, 1, 2, 1, 3, 1, 1, 8, 1, 2, 1, 16}

// TestHotOrderContinuesAsNewOnRealServices: one order receives 1,500
// events, in order-event and order-events signals (of 2 to 16 events) sent
// without a pause by three goroutines, while its workflow is asked to
// continue as new every 100 events. What Temporal recorded shows the
// workflow keeping up: every run but the last ended by continue-as-new,
// some of them while the stream went on, no run applied more than twice
// its share of events, no run had more than one workflow task force-closed
// for the signals that came meanwhile, and each version was applied once
// over the chain.
// The tables end as the events imply.
func TestHotOrderContinuesAsNewOnRealServices(t *testing.T) {
	const n, limit, senders = 1500, 100, 3
	c := testenv.RequireTemporal(t)
	db, _ := testenv.NewDatabase(t)
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	tq := uniq.Name("wf-hot")
	workflowtest.StartWorker(t, c, tq, db)
	orderID := uniq.Name("hot")
	id := api.WorkflowID(orderID)
	params := workflows.Params{GracePeriod: time.Minute, IdleTimeout: time.Minute, MaxEventsPerRun: limit}
	t.Cleanup(func() { _ = c.TerminateWorkflow(context.Background(), id, "", "test finished") })

	// CREATED, data updates at CREATED, then PAID to COMPLETED, as the
	// benchmark's hot order: whatever order they arrive in, the order ends
	// COMPLETED at the last version, with the last amount, and one
	// purchase row.
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	finalAmount := int64(1000 + n - 4)
	events := make([]workflows.Delivery, n)
	for i := range events {
		v := int64(i + 1)
		s, amount := fsm.Created, 1000+v
		if k := i - (n - 4); k >= 0 {
			s, amount = []fsm.Status{fsm.Paid, fsm.Shipped, fsm.Delivered, fsm.Completed}[k], finalAmount
		}
		e := fsm.Event{EventID: fmt.Sprintf("%s-v%d", orderID, v), OrderID: orderID, UserID: 7, Status: s,
			Version: v, AmountCents: amount, OccurredAt: at.Add(time.Duration(v) * time.Millisecond)}
		events[i] = workflows.Delivery{Event: e, Source: source(e)}
	}
	var chunks [][]workflows.Delivery
	for i, at := 0, 0; at < n; i++ {
		k := min(hotChunks[i%len(hotChunks)], n-at)
		chunks = append(chunks, events[at:at+k])
		at += k
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	work := make(chan []workflows.Delivery)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for range senders {
		wg.Go(func() {
			for ds := range work {
				if err := workflows.DeliverBatch(ctx, c, tq, params, orderID, ds); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for _, ds := range chunks {
		work <- ds
	}
	close(work)
	wg.Wait()
	sent := time.Since(start)
	if len(errs) > 0 {
		t.Fatalf("%d deliveries failed, the first: %v", len(errs), errs[0])
	}

	// The tables hold every event, and the latest run has nothing left
	// to handle: it will not continue as new again.
	testenv.WaitFor(t, 2*time.Minute, func() error {
		var rows int64
		if err := sqlDB.QueryRowContext(ctx, `SELECT count(*) FROM order_events WHERE order_id = $1`, orderID).
			Scan(&rows); err != nil {
			return err
		}
		if rows != n {
			return fmt.Errorf("%d of %d events recorded", rows, n)
		}
		s, err := workflowtest.QueryState(ctx, c, orderID)
		if err != nil {
			return err
		}
		if len(s.Recorded) != n || s.Processed >= limit {
			return fmt.Errorf("run %d has recorded %d events and handled %d", s.Runs, len(s.Recorded), s.Processed)
		}
		return nil
	})
	settled := time.Since(start)
	checkHotTables(t, sqlDB, orderID, n, finalAmount)

	runs := hotChain(t, c, orderID)
	if len(runs) < n/limit {
		t.Errorf("%d runs for %d events at %d per run", len(runs), n, limit)
	}
	applied := map[int64]int{}
	streamed, carried := 0, 0
	failures := map[enumspb.WorkflowTaskFailedCause]int{}
	for i, r := range runs {
		want := enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW
		if i == len(runs)-1 {
			want = enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
		}
		if r.status != want {
			t.Errorf("run %d (%s) is %s, want %s", i+1, r.runID, r.status, want)
		}
		if len(r.applied) > 2*limit {
			t.Errorf("run %d applied %d events, more than twice the %d asked: continue-as-new was deferred",
				i+1, len(r.applied), limit)
		}
		// A task that found no signal may handle MaxQuietEventsPerTask
		// events; should 100 signals come meanwhile (a loaded machine), the
		// server fails it and the next task redoes it under a tight bound:
		// once in a run, not again.
		if n := r.failures[enumspb.WORKFLOW_TASK_FAILED_CAUSE_FORCE_CLOSE_COMMAND]; n > 1 {
			t.Errorf("run %d: %d workflow tasks force-closed (more than 100 signals came during one)", i+1, n)
		}
		for _, v := range r.applied {
			applied[v]++
		}
		if r.signals > 0 {
			streamed++
		}
		carried += r.carriedIn
		for k, v := range r.failures {
			failures[k] += v
		}
		t.Logf("run %d: %s, %d events carried in, %d signals (%d events) received, %d applied, %d carried out, %d history events, %d task-ending timers, failed tasks %v",
			i+1, strings.TrimPrefix(r.status.String(), "WORKFLOW_EXECUTION_STATUS_"), r.carriedIn, r.signals, r.received,
			len(r.applied), r.carriedOut, r.events, r.timers, r.failures)
	}
	// Each version applied once over the chain (a task that failed left
	// no marker: its work was done again and recorded once).
	for v := int64(1); v <= n; v++ {
		if applied[v] != 1 {
			t.Errorf("v%d applied %d times in the recorded histories, want once", v, applied[v])
		}
	}
	if len(applied) != n {
		t.Errorf("the histories apply %d versions, want %d", len(applied), n)
	}
	// The runs continued as new while the stream went on: more than one
	// received its signals.
	if streamed < 2 {
		t.Errorf("%d runs received signals: the workflow did not continue as new under the stream", streamed)
	}
	t.Logf("%d events in %d signals sent by %d goroutines in %v (%.0f events/s), all recorded after %v; %d runs, %d events carried over, failed workflow tasks %v",
		n, len(chunks), senders, sent.Round(time.Millisecond), float64(n)/sent.Seconds(), settled.Round(time.Millisecond),
		len(runs), carried, failures)
}

// checkHotTables checks the hot order's rows: every version recorded once,
// the order COMPLETED at version n with the final amount, and one purchase
// row of its points.
func checkHotTables(t *testing.T, db *sql.DB, orderID string, n, amount int64) {
	t.Helper()
	var rows, versions, seen int64
	if err := db.QueryRow(`SELECT count(*), count(DISTINCT version), coalesce(sum(times_seen), 0) FROM order_events WHERE order_id = $1`,
		orderID).Scan(&rows, &versions, &seen); err != nil {
		t.Fatal(err)
	}
	var (
		status           string
		version, amount2 int64
	)
	if err := db.QueryRow(`SELECT status, version, amount_cents FROM orders WHERE order_id = $1`, orderID).
		Scan(&status, &version, &amount2); err != nil {
		t.Fatal(err)
	}
	if rows != n || versions != n || seen != n || status != string(fsm.Completed) || version != n || amount2 != amount {
		t.Errorf("tables: %d order_events rows for %d versions seen %d times, order %s v%d amount %d; want %d, COMPLETED v%d amount %d",
			rows, versions, seen, status, version, amount2, n, n, amount)
	}
	var ledger, points int64
	var kind string
	if err := db.QueryRow(`SELECT count(*), coalesce(sum(points), 0), coalesce(min(kind), '') FROM points_ledger WHERE order_id = $1`, orderID).
		Scan(&ledger, &points, &kind); err != nil {
		t.Fatal(err)
	}
	if ledger != 1 || points != fsm.PurchasePointsFor(amount) || kind != string(fsm.Purchase) {
		t.Errorf("ledger: %d rows of %s, %d points; want 1 purchase row of %d", ledger, kind, points, fsm.PurchasePointsFor(amount))
	}
}

// hotRun is what the history of one run of a hot order's workflow shows.
type hotRun struct {
	runID  string
	status enumspb.WorkflowExecutionStatus
	// carriedIn and carriedOut are the events its input carried in and
	// the continue-as-new carried out.
	carriedIn, carriedOut int
	signals, received     int     // signals received and the events in them
	applied               []int64 // versions of its ApplyEvent steps
	timers                int     // timers that ended a workflow task
	events                int     // history length
	failures              map[enumspb.WorkflowTaskFailedCause]int
}

// hotChain returns the runs of the order's workflow, oldest first, walking
// back from the latest through each run's predecessor.
func hotChain(t *testing.T, c client.Client, orderID string) []hotRun {
	t.Helper()
	ctx := context.Background()
	id := api.WorkflowID(orderID)
	var runs []hotRun
	runID := ""
	for {
		d, err := c.DescribeWorkflowExecution(ctx, id, runID)
		if err != nil {
			t.Fatalf("describe %s run %q: %v", id, runID, err)
		}
		info := d.GetWorkflowExecutionInfo()
		h := history(ctx, c, id, info.GetExecution().GetRunId())
		if h == nil {
			t.Fatalf("history of %s run %s", id, info.GetExecution().GetRunId())
		}
		r := scanHotRun(t, h)
		r.runID, r.status = info.GetExecution().GetRunId(), info.GetStatus()
		runs = append([]hotRun{r}, runs...)
		prev := h.Events[0].GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId()
		if prev == "" {
			return runs
		}
		runID = prev
	}
}

// scanHotRun reads one run's history.
func scanHotRun(t *testing.T, h *historypb.History) hotRun {
	t.Helper()
	dc := converter.GetDefaultDataConverter()
	r := hotRun{events: len(h.Events), failures: map[enumspb.WorkflowTaskFailedCause]int{}}
	for _, e := range h.Events {
		switch {
		case e.GetWorkflowExecutionStartedEventAttributes() != nil:
			r.carriedIn = pendingIn(t, dc, e.GetWorkflowExecutionStartedEventAttributes().GetInput())
		case e.GetWorkflowExecutionContinuedAsNewEventAttributes() != nil:
			r.carriedOut = pendingIn(t, dc, e.GetWorkflowExecutionContinuedAsNewEventAttributes().GetInput())
		case e.GetWorkflowExecutionSignaledEventAttributes() != nil:
			a := e.GetWorkflowExecutionSignaledEventAttributes()
			r.signals++
			switch a.GetSignalName() {
			case api.SignalEvent:
				r.received++
			case api.SignalEvents:
				var b workflows.Batch
				if err := dc.FromPayloads(a.GetInput(), &b); err != nil {
					t.Fatalf("decode a batch signal: %v", err)
				}
				r.received += len(b.Deliveries)
			}
		case e.GetMarkerRecordedEventAttributes().GetMarkerName() == "LocalActivity":
			var data struct{ ActivityType string }
			if err := dc.FromPayloads(e.GetMarkerRecordedEventAttributes().GetDetails()["data"], &data); err != nil {
				t.Fatalf("decode a local activity marker: %v", err)
			}
			if data.ActivityType != api.ActivityApplyEvent {
				continue
			}
			var summary string
			if err := dc.FromPayload(e.GetUserMetadata().GetSummary(), &summary); err != nil {
				t.Fatalf("decode a step summary: %v", err)
			}
			var v int64
			if _, err := fmt.Sscanf(summary, "v%d ", &v); err != nil {
				t.Fatalf("step summary %q names no version", summary)
			}
			r.applied = append(r.applied, v)
		case e.GetTimerStartedEventAttributes() != nil:
			if e.GetTimerStartedEventAttributes().GetStartToFireTimeout().AsDuration() == workflows.YieldDelay {
				r.timers++
			}
		case e.GetWorkflowTaskFailedEventAttributes() != nil:
			r.failures[e.GetWorkflowTaskFailedEventAttributes().GetCause()]++
		}
	}
	slices.Sort(r.applied)
	return r
}

// pendingIn is the number of events a run's input carries (Input.Pending).
func pendingIn(t *testing.T, dc converter.DataConverter, p *commonpb.Payloads) int {
	t.Helper()
	if p == nil {
		return 0
	}
	var in workflows.Input
	if err := dc.FromPayloads(p, &in); err != nil {
		t.Fatalf("decode a run's input: %v", err)
	}
	return len(in.Pending)
}
