package workflows_test

import (
	"context"
	"database/sql"
	"encoding/json"
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

	"github.com/orderflow/orderflow/api"
	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/internal/workflowtest"
	"github.com/orderflow/orderflow/workflows"
)

// hotChunks are the sizes of the deliveries of TestHotOrderContinuesAsNewOnRealServices,
// in turn: 1 is an order-event signal, more an order-events signal.
var hotChunks = []int{1, 1, 2, 1, 3, 1, 1, 8, 1, 2, 1, 16}

// TestHotOrderContinuesAsNewOnRealServices: one order receives 1,500
// events, in order-event and order-events signals (of 2 to 16 events) sent
// without a pause by three goroutines, while its workflow is asked to
// continue as new every 100 events. The first 200 events go first; once
// the workflow has continued as new, the rest follow, so that a continued
// run receives signals whatever the pace of the senders and the worker.
// What Temporal recorded shows the workflow keeping up: every run but the
// last ended by continue-as-new, each having applied its 100 events (no
// more: what it carries stays under the payload bound; no fewer: the tasks
// the server failed for the signals that came meanwhile were redone), and
// each version was applied once over the chain. The tables end as the
// events imply.
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
	carried := 0 // the JSON size of every delivery, as a run carries it
	for i := range events {
		v := int64(i + 1)
		s, amount := fsm.Created, 1000+v
		if k := i - (n - 4); k >= 0 {
			s, amount = []fsm.Status{fsm.Paid, fsm.Shipped, fsm.Delivered, fsm.Completed}[k], finalAmount
		}
		e := fsm.Event{EventID: fmt.Sprintf("%s-v%d", orderID, v), OrderID: orderID, UserID: 7, Status: s,
			Version: v, AmountCents: amount, OccurredAt: at.Add(time.Duration(v) * time.Millisecond)}
		events[i] = workflows.Delivery{Event: e, Source: source(e)}
		b, err := json.Marshal(events[i])
		if err != nil {
			t.Fatal(err)
		}
		carried += len(b) + 1
	}
	// A run handles more than its limit only when the events it would
	// carry pass workflows.MaxCarryBytes. These cannot: all of them, with a
	// state recording every version (under 100 bytes each), stay below it.
	if carried+n*100 >= workflows.MaxCarryBytes {
		t.Fatalf("the events take %d bytes: a run could handle more than its limit to carry less", carried)
	}
	var chunks [][]workflows.Delivery
	for i, at := 0, 0; at < n; i++ {
		k := min(hotChunks[i%len(hotChunks)], n-at)
		chunks = append(chunks, events[at:at+k])
		at += k
	}
	// The first phase: the chunks of the first 2 × limit events.
	first, sum := 0, 0
	for sum < 2*limit {
		sum += len(chunks[first])
		first++
	}

	start := time.Now()
	sendHot(t, c, tq, params, orderID, senders, chunks[:first])
	// Wait for the workflow to continue as new, then send the rest.
	testenv.WaitFor(t, 3*time.Minute, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		d, err := c.DescribeWorkflowExecution(ctx, id, "")
		if err != nil {
			return err
		}
		if info := d.GetWorkflowExecutionInfo(); info.GetExecution().GetRunId() == info.GetFirstRunId() {
			return fmt.Errorf("%s has not continued as new", id)
		}
		return nil
	})
	sendHot(t, c, tq, params, orderID, senders, chunks[first:])
	sent := time.Since(start)

	// The tables hold every event, and the latest run has nothing left
	// to handle: it will not continue as new again. Under the race
	// detector on a loaded machine a workflow task of 50 events takes
	// seconds, and the chain of 15 runs minutes.
	testenv.WaitFor(t, 10*time.Minute, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
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
	// Paid at the final amount, 2,496 cents: 24 points, one per whole 100
	// cents.
	checkHotTables(t, sqlDB, orderID, n, finalAmount, 24)

	runs := hotChain(t, c, orderID)
	applied := map[int64]int{}
	streamed, received, carriedOver := 0, 0, 0
	failures := map[enumspb.WorkflowTaskFailedCause]int{}
	for _, r := range runs {
		received += r.received
	}
	// An event signalled twice (a send the SDK retried) is handled twice
	// and applied once: a run may apply that many fewer than its limit.
	twice := received - n
	if twice < 0 {
		t.Errorf("the runs received %d events, fewer than the %d sent", received, n)
	}
	for i, r := range runs {
		want := enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW
		if i == len(runs)-1 {
			want = enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
		}
		if r.status != want {
			t.Errorf("run %d (%s) is %s, want %s", i+1, r.runID, r.status, want)
		}
		// A run continues as new once it handled its limit, and handles
		// no more (the events it carries are under the payload bound).
		if len(r.applied) > limit {
			t.Errorf("run %d applied %d events, more than its limit of %d", i+1, len(r.applied), limit)
		}
		if i < len(runs)-1 && len(r.applied) < limit-twice {
			t.Errorf("run %d applied %d events before it continued as new, want %d: it did not get through its share",
				i+1, len(r.applied), limit)
		}
		for _, v := range r.applied {
			applied[v]++
		}
		if r.signals > 0 {
			streamed++
		}
		carriedOver += r.carriedIn
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
	// The first run received the first phase; a continued one the rest.
	if streamed < 2 {
		t.Errorf("%d runs received signals: the second phase reached no continued run", streamed)
	}
	t.Logf("%d events in %d signals sent by %d goroutines in two phases in %v (%.0f events/s), all recorded after %v; %d runs, %d events carried over, failed workflow tasks %v",
		n, len(chunks), senders, sent.Round(time.Millisecond), float64(n)/sent.Seconds(), settled.Round(time.Millisecond),
		len(runs), carriedOver, failures)
}

// sendHot delivers the chunks to the order's workflow from senders
// goroutines without a pause, within two minutes, and fails the test if a
// delivery failed.
func sendHot(t *testing.T, c client.Client, tq string, params workflows.Params, orderID string, senders int,
	chunks [][]workflows.Delivery) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
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
	if len(errs) > 0 {
		t.Fatalf("%d deliveries failed, the first: %v", len(errs), errs[0])
	}
}

// checkHotTables checks the hot order's rows: every version recorded once,
// the order COMPLETED at version n with the final amount, and one purchase
// row of wantPoints.
func checkHotTables(t *testing.T, db *sql.DB, orderID string, n, amount, wantPoints int64) {
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
	if ledger != 1 || points != wantPoints || kind != string(fsm.Purchase) {
		t.Errorf("ledger: %d rows of %s, %d points; want 1 purchase row of %d", ledger, kind, points, wantPoints)
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
			if !slices.Contains([]string{api.ActivityApplyEvent, api.ActivityApplyEventAndAward, api.ActivityLoadOrderAndApply}, data.ActivityType) {
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
