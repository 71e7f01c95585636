package main

import (
	"errors"
	"slices"
	"testing"

	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/orderflow/orderflow/api"
	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/workflows"
)

// runFloor runs floorWorkflow with maxEvents per run, sends it an
// order-event signal of version 1 then an order-events signal of versions
// 1 (again), 2 and 3, and one of a warm-up order, and returns its
// environment and tracker.
func runFloor(t *testing.T, maxEvents int) (*testsuite.TestWorkflowEnvironment, *floorTracker) {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	tr := newFloorTracker("o")
	env.RegisterWorkflowWithOptions(floorWorkflow(tr), workflow.RegisterOptions{Name: api.WorkflowType})
	d := func(v int64) workflows.Delivery {
		return workflows.Delivery{Event: fsm.Event{OrderID: "o-1", Version: v}}
	}
	// An order of another prefix (a warm-up) is heard of, not counted.
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(api.SignalEvent, workflows.Delivery{Event: fsm.Event{OrderID: "warm-1", Version: 1}})
	}, 0)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(api.SignalEvent, d(1)) }, 0)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(api.SignalEvents, workflows.Batch{Deliveries: []workflows.Delivery{d(1), d(2), d(3)}})
	}, 0)
	env.ExecuteWorkflow(api.WorkflowType, workflows.Input{Params: workflows.Params{MaxEventsPerRun: maxEvents}})
	return env, tr
}

// TestFloorWorkflow: with a bound of 5 events per run the five events
// received end the run by continue-as-new; with 6 it waits for more (until
// the test environment's run timeout). Either way the tracker counts the
// three distinct keys of the cell's order and hears of the warm-up's.
func TestFloorWorkflow(t *testing.T) {
	for bound, continues := range map[int]bool{5: true, 6: false} {
		env, tr := runFloor(t, bound)
		var can *workflow.ContinueAsNewError
		err := env.GetWorkflowError()
		if got := errors.As(err, &can) && can.WorkflowType.Name == api.WorkflowType; got != continues || err == nil {
			t.Errorf("bound %d: %v, continued as new: %v, want %v", bound, err, got, continues)
		}
		if n, first, last := tr.received(); n != 3 || first.IsZero() || last.Before(first) {
			t.Errorf("bound %d: %d distinct keys (%s to %s), want 3", bound, n, first, last)
		}
		if !slices.Contains(tr.orders(), "warm-1") || len(tr.orders()) != 2 || len(tr.applied()) != 3 {
			t.Errorf("bound %d: orders %v, applied %v; want the warm-up's order heard of, not counted", bound, tr.orders(), tr.applied())
		}
	}
}
