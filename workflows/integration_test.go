package workflows_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/orderflow/orderflow/api"
	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/errclass"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/internal/workflowtest"
	"github.com/orderflow/orderflow/workflows"
)

// TestStreamOnRealServices sends 100 orders' events, shuffled and
// duplicated, through Deliver to an in-process worker on a fresh database,
// then the scenario's late phase: the invariants hold on the tables after
// each phase and every state query agrees.
func TestStreamOnRealServices(t *testing.T) {
	c := testenv.RequireTemporal(t)
	db, _ := testenv.NewDatabase(t)
	tq := uniq.Name("wf-stream")
	workflowtest.StartWorker(t, c, tq, db)

	sc := workflowtest.Scenario(t, uniq.Name("wfs"), 100, 42)
	t.Cleanup(func() { workflowtest.TerminateAll(c, &sc.Expected, "test finished") })

	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := workflowtest.DeliverAll(ctx, c, tq, workflows.DefaultParams(), sc.Messages, 8, nil); err != nil {
		t.Fatalf("deliver: %v", err)
	}
	delivered := time.Since(start)
	workflowtest.WaitSettled(t, db, sc.Expected.FirstPhase(), 90*time.Second)
	// The late phase, once the first has settled: nothing may change but
	// the audit and the dead letters.
	lateCtx, lateCancel := context.WithTimeout(context.Background(), time.Minute)
	defer lateCancel()
	if err := workflowtest.DeliverAll(lateCtx, c, tq, workflows.DefaultParams(), sc.Late, 8, nil); err != nil {
		t.Fatalf("deliver the late phase: %v", err)
	}
	rep := workflowtest.WaitSettled(t, db, &sc.Expected, 90*time.Second)
	t.Logf("%d messages (%d events, %d duplicates, %d conflicts) for %d orders: delivered in %v, settled in %v; orders %v, outcomes %v, points %d",
		sc.Expected.Counts.Messages, sc.Expected.Counts.Events, sc.Expected.Counts.Duplicates, sc.Expected.Counts.Conflicts,
		len(sc.Expected.Orders), delivered.Round(time.Millisecond), time.Since(start).Round(time.Millisecond),
		rep.OrdersByStatus, rep.EventsByOutcome, rep.Points)
	workflowtest.CheckQueries(t, c, db, &sc.Expected)

	// The OrderStatus search attribute is current (visibility is eventually
	// consistent).
	o := sc.Expected.Orders[0]
	testenv.WaitFor(t, 20*time.Second, func() error {
		d, err := c.DescribeWorkflow(context.Background(), api.WorkflowID(o.OrderID), "")
		if err != nil {
			return err
		}
		got, _ := d.TypedSearchAttributes.GetKeyword(api.OrderStatusKey)
		if got != string(o.Status) {
			return errors.New("OrderStatus is " + got + ", want " + string(o.Status))
		}
		return nil
	})
}

// TestLateEventAfterClose lets an order's workflow complete after a tiny
// grace period, then delivers a late event: a fresh run rehydrates from
// PostgreSQL, finds the event stale, and nothing changes.
func TestLateEventAfterClose(t *testing.T) {
	c := testenv.RequireTemporal(t)
	db, _ := testenv.NewDatabase(t)
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	tq := uniq.Name("wf-late")
	workflowtest.StartWorker(t, c, tq, db)
	orderID := uniq.Name("late")
	params := workflows.Params{GracePeriod: time.Second, IdleTimeout: time.Minute}
	t.Cleanup(func() {
		_ = c.TerminateWorkflow(context.Background(), api.WorkflowID(orderID), "", "test finished")
	})

	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ev := func(v int64, s fsm.Status) fsm.Event {
		return fsm.Event{EventID: orderID + "-" + string(s), OrderID: orderID, UserID: 11, Status: s, Version: v,
			AmountCents: 25000, OccurredAt: at.Add(time.Duration(v) * time.Minute)}
	}
	ctx := context.Background()
	// v2 (PAID) is delayed: the order goes CREATED -> SHIPPED (gap) -> COMPLETED.
	for _, e := range []fsm.Event{ev(1, fsm.Created), ev(3, fsm.Shipped), ev(4, fsm.Delivered), ev(5, fsm.Completed)} {
		if err := workflows.Deliver(ctx, c, tq, params, e, nil); err != nil {
			t.Fatal(err)
		}
	}
	first := waitClosed(t, c, orderID, "")
	var r1 workflows.Result
	if err := c.GetWorkflow(ctx, api.WorkflowID(orderID), first).Get(ctx, &r1); err != nil {
		t.Fatalf("first run result: %v", err)
	}
	if r1.Reason != workflows.ReasonGracePeriod || r1.State.Order.Status != fsm.Completed || r1.State.Points != 250 {
		t.Fatalf("first run: %s %s points %d", r1.Reason, r1.State.Order.Status, r1.State.Points)
	}
	before := snapshot(t, sqlDB, orderID)

	// The late v2, and a redelivery of v5.
	if err := workflows.Deliver(ctx, c, tq, params, ev(2, fsm.Paid), nil); err != nil {
		t.Fatal(err)
	}
	if err := workflows.Deliver(ctx, c, tq, params, ev(5, fsm.Completed), nil); err != nil {
		t.Fatal(err)
	}
	second := waitClosed(t, c, orderID, first)
	var r2 workflows.Result
	if err := c.GetWorkflow(ctx, api.WorkflowID(orderID), second).Get(ctx, &r2); err != nil {
		t.Fatalf("second run result: %v", err)
	}
	s := r2.State
	if s.Runs != 1 || s.Count(fsm.Stale) != 1 || s.Count(fsm.Duplicate) != 1 || s.Count(fsm.Applied) != 0 {
		t.Errorf("fresh run: runs %d counts %v", s.Runs, s.Counts)
	}
	if s.Order.Status != fsm.Completed || s.Order.Version != 5 || s.Points != 250 {
		t.Errorf("fresh run state: %s v%d points %d", s.Order.Status, s.Order.Version, s.Points)
	}
	after := snapshot(t, sqlDB, orderID)
	if after.status != before.status || after.version != before.version || after.points != before.points ||
		after.ledgerRows != 1 || after.events != before.events+1 {
		t.Errorf("tables changed: before %+v, after %+v", before, after)
	}
	var outcome string
	if err := sqlDB.QueryRow(`SELECT outcome FROM order_events WHERE order_id = $1 AND version = 2`, orderID).Scan(&outcome); err != nil || outcome != "stale" {
		t.Errorf("late event row: outcome %q, err %v", outcome, err)
	}
}

type orderSnapshot struct {
	status             string
	version, points    int64
	ledgerRows, events int
}

func snapshot(t *testing.T, db *sql.DB, orderID string) orderSnapshot {
	t.Helper()
	var s orderSnapshot
	err := db.QueryRow(`SELECT o.status, o.version,
			(SELECT coalesce(sum(points), 0) FROM points_ledger p WHERE p.order_id = o.order_id),
			(SELECT count(*) FROM points_ledger p WHERE p.order_id = o.order_id),
			(SELECT count(*) FROM order_events e WHERE e.order_id = o.order_id)
		FROM orders o WHERE o.order_id = $1`, orderID).Scan(&s.status, &s.version, &s.points, &s.ledgerRows, &s.events)
	if err != nil {
		t.Fatalf("read order %s: %v", orderID, err)
	}
	return s
}

// waitClosed waits for the order's latest run, other than notRunID, to
// complete, and returns its run ID.
func waitClosed(t *testing.T, c client.Client, orderID, notRunID string) string {
	t.Helper()
	var runID string
	testenv.WaitFor(t, 60*time.Second, func() error {
		d, err := c.DescribeWorkflowExecution(context.Background(), api.WorkflowID(orderID), "")
		if err != nil {
			return err
		}
		info := d.WorkflowExecutionInfo
		runID = info.Execution.RunId
		if runID == notRunID {
			return errors.New("no new run yet")
		}
		if info.Status != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
			return errors.New("run " + runID + " is " + info.Status.String())
		}
		return nil
	})
	return runID
}

// TestStatusAtStart: a run that SignalWithStart starts for an order's
// first version names the status that event gives a new order as its
// OrderStatus search attribute, so the new order's first status costs no
// upsert; the next status is upserted. When the order already exists (its
// run closed, the first version redelivered), the new run starts with that
// guess, and its first task upserts the status the database has.
func TestStatusAtStart(t *testing.T) {
	c := testenv.RequireTemporal(t)
	db, _ := testenv.NewDatabase(t)
	tq := uniq.Name("wf-status")
	workflowtest.StartWorker(t, c, tq, db)
	orderID := uniq.Name("status")
	id := api.WorkflowID(orderID)
	params := workflows.Params{GracePeriod: time.Second, IdleTimeout: time.Minute}
	t.Cleanup(func() { _ = c.TerminateWorkflow(context.Background(), id, "", "test finished") })
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ev := func(v int64, s fsm.Status) fsm.Event {
		return fsm.Event{EventID: orderID + "-" + string(s), OrderID: orderID, UserID: 11, Status: s, Version: v,
			AmountCents: 25000, OccurredAt: at.Add(time.Duration(v) * time.Minute)}
	}
	ctx := context.Background()

	if err := workflows.Deliver(ctx, c, tq, params, ev(1, fsm.Created), nil); err != nil {
		t.Fatal(err)
	}
	events := waitHandled(t, c, orderID, 1)
	if got := startStatus(t, events); got != string(fsm.Created) {
		t.Errorf("the new order's run started with OrderStatus %q, want %q", got, fsm.Created)
	}
	if got := statusUpserts(t, events); len(got) != 0 {
		t.Errorf("the new order's first status was upserted: %v, want no upsert", got)
	}
	if err := workflows.Deliver(ctx, c, tq, params, ev(2, fsm.Completed), nil); err != nil {
		t.Fatal(err)
	}
	first := waitClosed(t, c, orderID, "")
	if got := statusUpserts(t, history(ctx, c, id, first).Events); len(got) != 1 || got[0] != string(fsm.Completed) {
		t.Errorf("first run upserted %v, want [%s]", got, fsm.Completed)
	}

	// The first version again, after the run closed: the new run starts
	// with the guess CREATED, and the database says COMPLETED.
	if err := workflows.Deliver(ctx, c, tq, params, ev(1, fsm.Created), nil); err != nil {
		t.Fatal(err)
	}
	second := waitClosed(t, c, orderID, first)
	events = history(ctx, c, id, second).Events
	if got := startStatus(t, events); got != string(fsm.Created) {
		t.Errorf("the redelivery's run started with OrderStatus %q, want %q", got, fsm.Created)
	}
	if got := statusUpserts(t, events); len(got) != 1 || got[0] != string(fsm.Completed) {
		t.Errorf("the redelivery's run upserted %v, want [%s]", got, fsm.Completed)
	}
	testenv.WaitFor(t, 20*time.Second, func() error {
		d, err := c.DescribeWorkflow(ctx, id, second)
		if err != nil {
			return err
		}
		if got, _ := d.TypedSearchAttributes.GetKeyword(api.OrderStatusKey); got != string(fsm.Completed) {
			return errors.New("OrderStatus is " + got + ", want COMPLETED")
		}
		return nil
	})
}

// startStatus is the OrderStatus search attribute a history's run started
// with ("" when none).
func startStatus(t *testing.T, events []*historypb.HistoryEvent) string {
	t.Helper()
	return decodeStatus(t, events[0].GetWorkflowExecutionStartedEventAttributes().GetSearchAttributes())
}

// decodeStatus is the OrderStatus value of attrs ("" when none).
func decodeStatus(t *testing.T, attrs *commonpb.SearchAttributes) string {
	t.Helper()
	p := attrs.GetIndexedFields()[api.SearchAttributeOrderStatus]
	if p == nil {
		return ""
	}
	var s string
	if err := converter.GetDefaultDataConverter().FromPayload(p, &s); err != nil {
		t.Fatalf("decode an OrderStatus: %v", err)
	}
	return s
}

// statusUpserts are the OrderStatus values a history upserts, in order.
func statusUpserts(t *testing.T, events []*historypb.HistoryEvent) []string {
	t.Helper()
	var out []string
	for _, e := range events {
		if s := decodeStatus(t, e.GetUpsertWorkflowSearchAttributesEventAttributes().GetSearchAttributes()); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// TestUndefinedStatusAttributeIsTransient: in a namespace where OrderStatus
// is not registered, the engine refuses the SignalWithStart of an order's
// first version (it names the status); the refusal is transient, so the
// bridge hands the message back instead of parking it, until an operator
// registers the search attribute.
func TestUndefinedStatusAttributeIsTransient(t *testing.T) {
	testenv.RequireTemporal(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const ns = "orderflow-test-no-status"
	nc, err := client.NewNamespaceClient(client.Options{HostPort: testenv.TemporalAddress(), Logger: testenv.QuietTemporalLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	err = nc.Register(ctx, &workflowservice.RegisterNamespaceRequest{Namespace: ns, WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour)})
	var exists *serviceerror.NamespaceAlreadyExists
	if err != nil && !errors.As(err, &exists) {
		t.Fatalf("register namespace %s: %v", ns, err)
	}
	c, err := client.DialContext(ctx, client.Options{HostPort: testenv.TemporalAddress(), Namespace: ns, Logger: testenv.QuietTemporalLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	orderID := uniq.Name("no-status")
	e := fsm.Event{EventID: orderID + "-v1", OrderID: orderID, UserID: 3, Status: fsm.Created, Version: 1,
		AmountCents: 100, OccurredAt: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	// A namespace just registered may not be known to every service yet.
	testenv.WaitFor(t, 30*time.Second, func() error {
		err := workflows.Deliver(ctx, c, uniq.Name("wf-no-status"), workflows.DefaultParams(), e, nil)
		var nf *serviceerror.NamespaceNotFound
		if errors.As(err, &nf) {
			return err
		}
		if err == nil {
			t.Fatalf("Deliver into namespace %s, which lacks %s, succeeded", ns, api.SearchAttributeOrderStatus)
		}
		if got := errclass.Of(err); got != errclass.Transient {
			t.Fatalf("Deliver into namespace %s without %s: %v, classed %v; want transient", ns, api.SearchAttributeOrderStatus, err, got)
		}
		t.Logf("refused, transient: %v", err)
		return nil
	})
}
