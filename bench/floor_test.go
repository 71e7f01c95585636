package main

import (
	"errors"
	"testing"

	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/orderflow/orderflow/api"
	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/scenario"
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

func TestFloorWorkflowContinuesAsNewAfterItsBound(t *testing.T) {
	env, tr := runFloor(t, 5)
	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("after 5 events with a bound of 5: %v, want continue-as-new", err)
	}
	if can.WorkflowType.Name != api.WorkflowType {
		t.Errorf("continued as %q, want %q", can.WorkflowType.Name, api.WorkflowType)
	}
	if n, first, last := tr.received(); n != 3 || first.IsZero() || last.Before(first) {
		t.Errorf("tracker: %d distinct keys (%s to %s), want 3", n, first, last)
	}
	if !tr.has(scenario.Key{OrderID: "warm-1", Version: 1}) || len(tr.orders()) != 2 || len(tr.applied()) != 3 {
		t.Errorf("tracker: orders %v, applied %v; want the warm-up's order heard of, not counted", tr.orders(), tr.applied())
	}
}

func TestFloorWorkflowWaitsBelowItsBound(t *testing.T) {
	env, tr := runFloor(t, 6)
	// It waits for signals until the test environment's run timeout.
	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); errors.As(err, &can) || err == nil {
		t.Errorf("after 5 events with a bound of 6 the workflow ended: %v", err)
	}
	if n, _, _ := tr.received(); n != 3 {
		t.Errorf("tracker: %d distinct keys, want 3", n)
	}
}
