package main

import (
	"maps"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/orderflow/orderflow/scenario"
)

// ev makes a history event of type t.
func ev(t enumspb.EventType) *historypb.HistoryEvent { return &historypb.HistoryEvent{EventType: t} }

// marker makes a marker event of name.
func marker(name string) *historypb.HistoryEvent {
	e := ev(enumspb.EVENT_TYPE_MARKER_RECORDED)
	e.Attributes = &historypb.HistoryEvent_MarkerRecordedEventAttributes{
		MarkerRecordedEventAttributes: &historypb.MarkerRecordedEventAttributes{MarkerName: name}}
	return e
}

// upsert makes an upsert of the search attribute named key.
func upsert(key string) *historypb.HistoryEvent {
	e := ev(enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES)
	e.Attributes = &historypb.HistoryEvent_UpsertWorkflowSearchAttributesEventAttributes{
		UpsertWorkflowSearchAttributesEventAttributes: &historypb.UpsertWorkflowSearchAttributesEventAttributes{
			SearchAttributes: &commonpb.SearchAttributes{IndexedFields: map[string]*commonpb.Payload{key: {Data: []byte(`"x"`)}}}}}
	return e
}

// task is one workflow task's scheduled, started and completed events.
func task() []*historypb.HistoryEvent {
	return []*historypb.HistoryEvent{ev(enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED),
		ev(enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED), ev(enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)}
}

func TestHistoryCost(t *testing.T) {
	continued := ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED)
	continued.Attributes = &historypb.HistoryEvent_WorkflowExecutionStartedEventAttributes{
		WorkflowExecutionStartedEventAttributes: &historypb.WorkflowExecutionStartedEventAttributes{ContinuedExecutionRunId: "r0"}}
	var h []*historypb.HistoryEvent
	// A run started by SignalWithStart: the start is not an action, its
	// signal is.
	h = append(h, ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED), ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED))
	// Task 1: a version marker and its TemporalChangeVersion upsert
	// (none), three local activities (one), an upsert (one), a timer
	// (one).
	h = append(h, task()...)
	h = append(h, marker("Version"), upsert("TemporalChangeVersion"), marker("LocalActivity"), marker("LocalActivity"),
		marker("LocalActivity"), upsert("OrderStatus"), ev(enumspb.EVENT_TYPE_TIMER_STARTED),
		ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED))
	// Task 2: one local activity (one more).
	h = append(h, task()...)
	h = append(h, marker("LocalActivity"))
	got := historyCost(h)
	if got.events != len(h) || got.tasks != 2 || got.actions != 6 {
		t.Errorf("historyCost = %+v, want %d events, 2 tasks, 6 actions", got, len(h))
	}
	// By kind, as the history above was built.
	kinds := map[string]int{"run": 1, "signal": 2, "task": 6, "version marker": 1, "version upsert": 1,
		"local activity": 4, "status upsert": 1, "timer": 1}
	if !maps.Equal(got.kinds, kinds) {
		t.Errorf("by kind %v, want %v", got.kinds, kinds)
	}
	// A run continued as new is one action of its own.
	if got := historyCost([]*historypb.HistoryEvent{continued}); got.actions != 1 {
		t.Errorf("a continued run's start: %d actions, want 1", got.actions)
	}
}

func TestCostSample(t *testing.T) {
	m := func(kind scenario.Kind, order string, version int64) scenario.Message {
		return scenario.Message{Kind: kind, Event: scenario.Event{OrderID: order, Version: version}}
	}
	msgs := []scenario.Message{m(scenario.KindEvent, "a", 1), m(scenario.KindEvent, "b", 1), m(scenario.KindDuplicate, "a", 1),
		m(scenario.KindEvent, "a", 2), m(scenario.KindConflict, "b", 1), m(scenario.KindBad, "c", 1), m(scenario.KindEvent, "d", 1)}
	if got, want := costSample(msgs, 10), map[string]int{"a": 2, "b": 1, "d": 1}; !maps.Equal(got, want) {
		t.Errorf("costSample = %v, want %v", got, want)
	}
	if got := costSample(msgs, 2); len(got) != 2 {
		t.Errorf("a sample of 2: %v", got)
	}
}

// TestCostString: the PostgreSQL figures of a cell with a database, none
// for one without (the direct floor's).
func TestCostString(t *testing.T) {
	c := engineCost{Actions: 1.25, SampleOrders: 30, SampleEvents: 158}
	if got := c.String(); !strings.HasSuffix(got, "PostgreSQL: none (no database)") || !strings.HasPrefix(got, "per event: 1.25 actions") {
		t.Errorf("without a database: %s", got)
	}
	c.HistoryKinds = map[string]float64{"task": 3, "signal": 1, "local activity": 1, "status upsert": 0.6}
	if got := c.String(); !strings.Contains(got, "history events (task 3.00, local activity 1.00, signal 1.00, status upsert 0.60; histories of 30 orders") {
		t.Errorf("by kind, most first: %s", got)
	}
	c.PGTransactions, c.PGRowsWritten = 3.66, 4.38
	if got := c.String(); !strings.HasSuffix(got, "PostgreSQL: 3.66 transactions, 4.38 rows written") {
		t.Errorf("with a database: %s", got)
	}
}
