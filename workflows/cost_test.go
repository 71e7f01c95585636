package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

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

// costEvent is one event of the lifecycle TestCostPerEventOnRealServices
// sends, with whether it changes the order's status (the test's own
// knowledge of the lifecycle, not the workflow's).
type costEvent struct {
	status  fsm.Status
	version int64
	changes bool
}

// costLifecycle is an order's life: created, its data updated, paid (a
// purchase row), redelivered, shipped, delivered and completed, then
// redelivered again.
var costLifecycle = []costEvent{
	{fsm.Created, 1, true},
	{fsm.Created, 2, false}, // a data update
	{fsm.Paid, 3, true},
	{fsm.Paid, 3, false}, // a duplicate
	{fsm.Shipped, 4, true},
	{fsm.Delivered, 5, true},
	{fsm.Completed, 6, true},
	{fsm.Completed, 6, false}, // a duplicate
}

// cost is what the engine recorded for a part of a history.
type cost struct {
	tasks, events, markers, localMarkers, upserts, timers, signals, actions int
	// runEvents and runActions are the part of events and actions that a
	// run pays once, whatever its events: its start, the version marker and
	// the TemporalChangeVersion upsert that comes with it (events, no
	// action), the LoadOrder step, and the deadline's timers (its first
	// wait, the grace period).
	runEvents, runActions int
}

func (c cost) String() string {
	return fmt.Sprintf("tasks=%d history_events=%d markers=%d (local activities %d) upserts=%d timers_started=%d actions=%d (of which the run's own: %d events, %d actions)",
		c.tasks, c.events, c.markers, c.localMarkers, c.upserts, c.timers, c.actions, c.runEvents, c.runActions)
}

func (c *cost) add(o cost) {
	c.tasks += o.tasks
	c.events += o.events
	c.markers += o.markers
	c.localMarkers += o.localMarkers
	c.upserts += o.upserts
	c.timers += o.timers
	c.signals += o.signals
	c.actions += o.actions
	c.runEvents += o.runEvents
	c.runActions += o.runActions
}

// countCost counts what events cost by Temporal Cloud's billing rules: a
// signal (each came with a SignalWithStart) is one action, the local
// activities recorded by one workflow task together are one, each
// search-attribute upsert (but TemporalChangeVersion's) and each timer
// started is one, a workflow task none.
func countCost(t *testing.T, events []*historypb.HistoryEvent) cost {
	var c cost
	taskHasLocal := false
	dc := converter.GetDefaultDataConverter()
	for _, e := range events {
		c.events++
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			c.runEvents++
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			c.signals++
			c.actions++
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			c.tasks++
			taskHasLocal = false
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			c.markers++
			a := e.GetMarkerRecordedEventAttributes()
			if a.GetMarkerName() != "LocalActivity" {
				c.runEvents++ // a version marker
				continue
			}
			c.localMarkers++
			var data struct{ ActivityType string }
			if err := dc.FromPayloads(a.GetDetails()["data"], &data); err != nil {
				t.Fatalf("decode a local activity marker: %v", err)
			}
			if data.ActivityType == api.ActivityLoadOrder {
				c.runEvents++
			}
			if !taskHasLocal {
				c.actions++
				taskHasLocal = true
			}
		case enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
			c.upserts++
			// The TemporalChangeVersion upsert that comes with a version
			// marker is a history event of the run's own, and no action:
			// Temporal Cloud does not bill it.
			if _, ok := e.GetUpsertWorkflowSearchAttributesEventAttributes().GetSearchAttributes().GetIndexedFields()[workflows.ChangeVersionSearchAttribute]; ok {
				c.runEvents++
				continue
			}
			c.actions++
		case enumspb.EVENT_TYPE_TIMER_STARTED:
			c.timers++
			c.actions++
			c.runEvents++
			c.runActions++
		case enumspb.EVENT_TYPE_TIMER_CANCELED:
			c.runEvents++
		}
	}
	return c
}

// settled reports whether the history's last signal has been handled: a
// workflow task completed after it and none is scheduled since.
func settled(events []*historypb.HistoryEvent, signals int) bool {
	seen, completed := 0, false
	for _, e := range events {
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			seen++
			completed = false
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
			completed = false
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			completed = true
		}
	}
	return seen == signals && completed
}

// waitHandled waits until the workflow's history shows signals signals
// handled, and returns it.
func waitHandled(t *testing.T, c client.Client, orderID string, signals int) []*historypb.HistoryEvent {
	t.Helper()
	var events []*historypb.HistoryEvent
	testenv.WaitFor(t, 30*time.Second, func() error {
		h := history(context.Background(), c, api.WorkflowID(orderID), "")
		if h == nil {
			return errors.New("no history yet")
		}
		events = h.Events
		if !settled(events, signals) {
			return fmt.Errorf("%d signals not all handled yet", signals)
		}
		return nil
	})
	// Give a late task (a local activity's retry, a timer) the chance to
	// show up, then read the history again.
	time.Sleep(300 * time.Millisecond)
	h := history(context.Background(), c, api.WorkflowID(orderID), "")
	if h == nil || !settled(h.Events, signals) {
		t.Fatalf("history of %s changed after settling", orderID)
	}
	events, dropped := withoutLostTasks(h.Events)
	if dropped > 0 {
		t.Logf("%s: %d history events of workflow tasks that timed out or failed left out (the engine's retries on a loaded machine, not the workflow's commands)", orderID, dropped)
	}
	return events
}

// withoutLostTasks is events without the workflow task attempts that timed
// out or failed (their scheduled, started and closing events): the engine
// retries such a task, and what the test counts is the work of the tasks
// that completed. It also returns how many events it left out.
func withoutLostTasks(events []*historypb.HistoryEvent) ([]*historypb.HistoryEvent, int) {
	drop := map[int64]bool{}
	for _, e := range events {
		var scheduled, started int64
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
			a := e.GetWorkflowTaskTimedOutEventAttributes()
			scheduled, started = a.GetScheduledEventId(), a.GetStartedEventId()
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED:
			a := e.GetWorkflowTaskFailedEventAttributes()
			scheduled, started = a.GetScheduledEventId(), a.GetStartedEventId()
		default:
			continue
		}
		drop[e.GetEventId()], drop[scheduled], drop[started] = true, true, true
	}
	kept := make([]*historypb.HistoryEvent, 0, len(events))
	for _, e := range events {
		if !drop[e.GetEventId()] {
			kept = append(kept, e)
		}
	}
	return kept, len(events) - len(kept)
}

// perSignal splits a history at its signals: the i-th part is the i-th
// signal and what followed it up to the next one; the events before the
// first signal (the run's start) go with it.
func perSignal(events []*historypb.HistoryEvent) [][]*historypb.HistoryEvent {
	var parts [][]*historypb.HistoryEvent
	var head []*historypb.HistoryEvent
	for _, e := range events {
		if e.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED {
			if len(parts) == 0 {
				parts = append(parts, append(head, e))
			} else {
				parts = append(parts, []*historypb.HistoryEvent{e})
			}
			continue
		}
		if len(parts) == 0 {
			head = append(head, e)
		} else {
			parts[len(parts)-1] = append(parts[len(parts)-1], e)
		}
	}
	return parts
}

func costEvents(orderID string) []fsm.Event {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	out := make([]fsm.Event, len(costLifecycle))
	for i, l := range costLifecycle {
		out[i] = fsm.Event{EventID: fmt.Sprintf("%s-v%d", orderID, l.version), OrderID: orderID, UserID: 5,
			Status: l.status, Version: l.version, AmountCents: 10000 + l.version,
			OccurredAt: at.Add(time.Duration(l.version) * time.Minute)}
	}
	return out
}

// TestCostPerEventOnRealServices measures what an order's events cost the
// engine, from the histories the Temporal server recorded: the lifecycle
// sent as a steady stream (each event once the previous one was handled,
// so each is its own workflow task) and as a burst (all at once: as single
// signals, and as one order-events signal as the bridge batches them).
//
// Targets, net of what a run pays once (countCost's runEvents and
// runActions): in a steady stream at most 3 billable actions per event
// that changes the status (the signal, the task's local activities, one
// upsert) and at most 2 per event that does not, no timer, and at most
// 6 history events per event that changes the status (the signal, the
// task's three, one step's marker, one upsert) and 5 per event that does
// not; in a batched burst at most 3 history events per event, everything
// included, and one timer. The 5 history events per event in a steady stream is
// out of reach for an event that changes the status in its own task (see
// above); it is logged, not asserted.
func TestCostPerEventOnRealServices(t *testing.T) {
	c := testenv.RequireTemporal(t)
	db, _ := testenv.NewDatabase(t)
	tq := uniq.Name("wf-cost")
	workflowtest.StartWorker(t, c, tq, db)
	params := workflows.Params{GracePeriod: time.Minute, IdleTimeout: time.Hour}
	ctx := context.Background()

	t.Run("steady", func(t *testing.T) {
		orderID := uniq.Name("cost-steady")
		t.Cleanup(func() { _ = c.TerminateWorkflow(ctx, api.WorkflowID(orderID), "", "test finished") })
		var events []*historypb.HistoryEvent
		for i, e := range costEvents(orderID) {
			if err := workflows.Deliver(ctx, c, tq, params, e, source(e)); err != nil {
				t.Fatal(err)
			}
			events = waitHandled(t, c, orderID, i+1)
		}
		parts := perSignal(events)
		if len(parts) != len(costLifecycle) {
			t.Fatalf("%d signals in the history, want %d", len(parts), len(costLifecycle))
		}
		var total cost
		for i, p := range parts {
			pc := countCost(t, p)
			total.add(pc)
			l := costLifecycle[i]
			maxActions, maxEvents := 2, 5
			if l.changes {
				maxActions, maxEvents = 3, 6
			}
			t.Logf("steady event %d (%s v%d, status change %v): %v", i+1, l.status, l.version, l.changes, pc)
			if pc.tasks != 1 {
				t.Errorf("steady event %d: %d workflow tasks, want 1", i+1, pc.tasks)
			}
			// The run's deadline timer is started by its first wait and
			// again once the order is terminal; no other event starts one.
			deadline := i == 0 || l.status.Terminal() && costLifecycle[i-1].status != l.status
			if pc.timers > 1 || !deadline && pc.timers != 0 {
				t.Errorf("steady event %d: %d timers started", i+1, pc.timers)
			}
			if a := pc.actions - pc.runActions; a > maxActions {
				t.Errorf("steady event %d: %d billable actions of its own, want at most %d", i+1, a, maxActions)
			}
			if ev := pc.events - pc.runEvents; ev > maxEvents {
				t.Errorf("steady event %d: %d history events of its own, want at most %d", i+1, ev, maxEvents)
			}
		}
		logTotal(t, "steady", total, len(parts))
	})

	t.Run("burst", func(t *testing.T) {
		orderID := uniq.Name("cost-burst")
		t.Cleanup(func() { _ = c.TerminateWorkflow(ctx, api.WorkflowID(orderID), "", "test finished") })
		evs := costEvents(orderID)
		for _, e := range evs {
			if err := workflows.Deliver(ctx, c, tq, params, e, source(e)); err != nil {
				t.Fatal(err)
			}
		}
		total := countCost(t, waitHandled(t, c, orderID, len(evs)))
		logTotal(t, "burst of single signals", total, len(evs))
	})

	t.Run("batched-burst", func(t *testing.T) {
		orderID := uniq.Name("cost-batch")
		t.Cleanup(func() { _ = c.TerminateWorkflow(ctx, api.WorkflowID(orderID), "", "test finished") })
		var ds []workflows.Delivery
		for _, e := range costEvents(orderID) {
			ds = append(ds, workflows.Delivery{Event: e, Source: source(e)})
		}
		if err := workflows.DeliverBatch(ctx, c, tq, params, orderID, ds); err != nil {
			t.Fatal(err)
		}
		total := countCost(t, waitHandled(t, c, orderID, 1))
		logTotal(t, "batched burst", total, len(ds))
		if total.events > 3*len(ds) {
			t.Errorf("batched burst: %d history events for %d events, want at most %d", total.events, len(ds), 3*len(ds))
		}
		// The run handled every event before it first waited, the order
		// terminal by then: one timer, the grace period's.
		if total.timers != 1 {
			t.Errorf("batched burst: %d timers started, want 1", total.timers)
		}
	})
}

// logTotal logs a history's cost over n events, and per event.
func logTotal(t *testing.T, name string, c cost, n int) {
	t.Helper()
	t.Logf("%s, %d events: %v; per event: tasks %.2f history_events %.2f markers %.2f upserts %.2f timers %.2f actions %.2f; without the run's own: history_events %.2f actions %.2f",
		name, n, c, per(c.tasks, n), per(c.events, n), per(c.markers, n), per(c.upserts, n), per(c.timers, n),
		per(c.actions, n), per(c.events-c.runEvents, n), per(c.actions-c.runActions, n))
}

func per(a, n int) float64 { return float64(a) / float64(n) }

// TestWithoutLostTasks: a workflow task that timed out, and its scheduled
// and started events, are left out; the retry that completed stays.
func TestWithoutLostTasks(t *testing.T) {
	ev := func(id int64, typ enumspb.EventType) *historypb.HistoryEvent {
		return &historypb.HistoryEvent{EventId: id, EventType: typ}
	}
	timedOut := ev(4, enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT)
	timedOut.Attributes = &historypb.HistoryEvent_WorkflowTaskTimedOutEventAttributes{
		WorkflowTaskTimedOutEventAttributes: &historypb.WorkflowTaskTimedOutEventAttributes{ScheduledEventId: 2, StartedEventId: 3}}
	events := []*historypb.HistoryEvent{
		ev(1, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED),
		ev(2, enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED),
		ev(3, enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED),
		timedOut,
		ev(5, enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED),
		ev(6, enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED),
		ev(7, enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED),
	}
	kept, dropped := withoutLostTasks(events)
	var ids []int64
	for _, e := range kept {
		ids = append(ids, e.GetEventId())
	}
	if dropped != 3 || fmt.Sprint(ids) != "[1 5 6 7]" {
		t.Errorf("kept %v, dropped %d; want [1 5 6 7] and 3", ids, dropped)
	}
}
