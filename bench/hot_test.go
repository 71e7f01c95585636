package main

import (
	"encoding/json"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/converter"

	"github.com/orderflow/orderflow/api"
	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/scenario"
	"github.com/orderflow/orderflow/workflows"
)

func TestHotScenario(t *testing.T) {
	sc, err := hotScenario("hot-test", 2000, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	exp := sc.Expected
	if len(sc.Messages) != 2000 || len(exp.Keys) != 2000 || exp.Counts.Events != 2000 || len(exp.Orders) != 1 {
		t.Fatalf("%d messages, %d keys, counts %+v, %d orders", len(sc.Messages), len(exp.Keys), exp.Counts, len(exp.Orders))
	}
	o := exp.Orders[0]
	if o.Status != scenario.Completed || o.Version != 2000 || o.AmountCents != 2996 {
		t.Errorf("expected order %+v, want COMPLETED at version 2000 with the last update's amount 2996", o)
	}
	if k := exp.Keys[1995]; k.Status != scenario.Created || k.AmountCents != 2996 || exp.Keys[1999].Outcome != scenario.OutcomeApplied {
		t.Errorf("last update %+v, last outcome %q", k, exp.Keys[1999].Outcome)
	}
	for i, m := range sc.Messages {
		var e fsm.Event
		if err := json.Unmarshal(m.Msg.Body, &e); err != nil || e.Validate() != nil || e.Version != int64(i+1) || m.Msg.ShardingKey != o.OrderID {
			t.Fatalf("message %d: body %s is not version %d of the order (%v)", i, m.Msg.Body, i+1, err)
		}
	}
	if _, err := hotScenario("hot-test", 4, time.Now()); err == nil {
		t.Error("a hot order of 4 events was built")
	}
}

// TestHotRun reads a run started with 3 events carried over, that received
// a batch of 4 and a single event and continued as new carrying 2: it
// handled 3 + 4 + 1 - 2 = 6 events.
func TestHotRun(t *testing.T) {
	payloads := func(v any) *commonpb.Payloads {
		p, err := converter.GetDefaultDataConverter().ToPayloads(v)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	signal := func(name string, v any) *historypb.HistoryEvent {
		return &historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
			Attributes: &historypb.HistoryEvent_WorkflowExecutionSignaledEventAttributes{
				WorkflowExecutionSignaledEventAttributes: &historypb.WorkflowExecutionSignaledEventAttributes{SignalName: name, Input: payloads(v)}}}
	}
	can := &historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW,
		Attributes: &historypb.HistoryEvent_WorkflowExecutionContinuedAsNewEventAttributes{
			WorkflowExecutionContinuedAsNewEventAttributes: &historypb.WorkflowExecutionContinuedAsNewEventAttributes{
				Input: payloads(workflows.Input{Pending: make([]workflows.Delivery, 2)})}}}
	run := []*historypb.HistoryEvent{
		{EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, Attributes: &historypb.HistoryEvent_WorkflowExecutionStartedEventAttributes{
			WorkflowExecutionStartedEventAttributes: &historypb.WorkflowExecutionStartedEventAttributes{
				Input: payloads(workflows.Input{Pending: make([]workflows.Delivery, 3)})}}},
		signal(api.SignalEvents, workflows.Batch{Deliveries: make([]workflows.Delivery, 4)}),
		{EventType: enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED, Attributes: &historypb.HistoryEvent_WorkflowTaskFailedEventAttributes{
			WorkflowTaskFailedEventAttributes: &historypb.WorkflowTaskFailedEventAttributes{
				Cause: enumspb.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND}}},
		signal(api.SignalEvent, workflows.Delivery{}),
	}
	if end, handled, failed, err := hotRun(run); err != nil || end != "Running" || handled != 8 ||
		len(failed) != 1 || failed["UnhandledCommand"] != 1 {
		t.Errorf("open run: %s, %d handled, failed %v, %v; want Running, 8, UnhandledCommand 1", end, handled, failed, err)
	}
	if end, handled, _, err := hotRun(append(run, can)); err != nil || end != "ContinuedAsNew" || handled != 6 {
		t.Errorf("continued run: %s, %d handled, %v; want ContinuedAsNew, 6", end, handled, err)
	}
	term := &historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED}
	if end, _, _, _ := hotRun(append(run, term)); end != "Terminated" {
		t.Errorf("terminated run ended %q", end)
	}
}
