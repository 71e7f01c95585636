package main

import (
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/orderflow/orderflow/api"
	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/scenario"
	"github.com/orderflow/orderflow/wire"
	"github.com/orderflow/orderflow/workflows"
)

// historyBuilder numbers events and stamps them t0 + ms milliseconds.
type historyBuilder struct {
	t0     time.Time
	events []*historypb.HistoryEvent
}

func (h *historyBuilder) add(ms int, e *historypb.HistoryEvent) int64 {
	e.EventId = int64(len(h.events) + 1)
	e.EventTime = timestamppb.New(h.t0.Add(time.Duration(ms) * time.Millisecond))
	h.events = append(h.events, e)
	return e.EventId
}

func (h *historyBuilder) signal(t *testing.T, ms int, name string, v any) {
	p, err := converter.GetDefaultDataConverter().ToPayloads(v)
	if err != nil {
		t.Fatal(err)
	}
	e := ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED)
	e.Attributes = &historypb.HistoryEvent_WorkflowExecutionSignaledEventAttributes{
		WorkflowExecutionSignaledEventAttributes: &historypb.WorkflowExecutionSignaledEventAttributes{SignalName: name, Input: p}}
	h.add(ms, e)
}

func (h *historyBuilder) scheduled(ms int) int64 {
	return h.add(ms, ev(enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED))
}

func (h *historyBuilder) scheduledSticky(ms int) int64 {
	e := ev(enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED)
	e.Attributes = &historypb.HistoryEvent_WorkflowTaskScheduledEventAttributes{
		WorkflowTaskScheduledEventAttributes: &historypb.WorkflowTaskScheduledEventAttributes{
			TaskQueue: &taskqueuepb.TaskQueue{Name: "sticky", Kind: enumspb.TASK_QUEUE_KIND_STICKY}}}
	return h.add(ms, e)
}

func (h *historyBuilder) started(ms int, scheduled int64) int64 {
	e := ev(enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED)
	e.Attributes = &historypb.HistoryEvent_WorkflowTaskStartedEventAttributes{
		WorkflowTaskStartedEventAttributes: &historypb.WorkflowTaskStartedEventAttributes{ScheduledEventId: scheduled}}
	return h.add(ms, e)
}

func (h *historyBuilder) completed(ms int, started int64) {
	e := ev(enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)
	e.Attributes = &historypb.HistoryEvent_WorkflowTaskCompletedEventAttributes{
		WorkflowTaskCompletedEventAttributes: &historypb.WorkflowTaskCompletedEventAttributes{StartedEventId: started}}
	h.add(ms, e)
}

// TestHistoryTimelines builds an order's run by hand: v1 by SignalWithStart,
// its task; v2 and v3 in one batch while a task runs, so they wait for the
// next; a duplicate of v2 later, which changes nothing; v4 after a failed
// task, timed by the task that handled it. Each key's stage times and the
// queue its task waited in are the ones the history was built with.
func TestHistoryTimelines(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	d := func(v int64, storedMs int) workflows.Delivery {
		return workflows.Delivery{Event: fsm.Event{OrderID: "o1", Version: v}, Source: &wire.Envelope{StoredAt: at(storedMs)}}
	}
	h := &historyBuilder{t0: t0}
	h.add(0, ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED))
	h.signal(t, 0, api.SignalEvent, d(1, -5))
	s1 := h.scheduled(0)
	st1 := h.started(30, s1)
	h.signal(t, 40, api.SignalEvents, workflows.Batch{Deliveries: []workflows.Delivery{d(2, 35), d(3, 36)}})
	h.completed(50, st1)
	s2 := h.scheduledSticky(50)
	st2 := h.started(70, s2)
	h.completed(90, st2)
	h.signal(t, 100, api.SignalEvent, d(2, 98))
	s3 := h.scheduled(100)
	st3 := h.started(110, s3)
	h.completed(120, st3)
	h.signal(t, 200, api.SignalEvent, d(4, 190))
	s4 := h.scheduled(200)
	st4 := h.started(210, s4)
	f := ev(enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED)
	f.Attributes = &historypb.HistoryEvent_WorkflowTaskFailedEventAttributes{
		WorkflowTaskFailedEventAttributes: &historypb.WorkflowTaskFailedEventAttributes{StartedEventId: st4}}
	h.add(220, f)
	s5 := h.scheduled(300)
	st5 := h.started(310, s5)
	h.completed(330, st5)

	key := func(v int64) scenario.Key { return scenario.Key{OrderID: "o1", Version: v} }
	tls := map[scenario.Key]*keyTimeline{}
	for v := int64(1); v <= 4; v++ {
		tls[key(v)] = &keyTimeline{}
	}
	if err := historyTimelines([][]*historypb.HistoryEvent{h.events}, tls); err != nil {
		t.Fatal(err)
	}
	want := map[int64]keyTimeline{
		1: {Stored: at(-5), Signalled: at(0), Scheduled: at(0), Started: at(30), Completed: at(50), Queue: queueFirst},
		2: {Stored: at(35), Signalled: at(40), Scheduled: at(50), Started: at(70), Completed: at(90), Queue: queueSticky},
		3: {Stored: at(36), Signalled: at(40), Scheduled: at(50), Started: at(70), Completed: at(90), Queue: queueSticky},
		4: {Stored: at(190), Signalled: at(200), Scheduled: at(300), Started: at(310), Completed: at(330), Queue: queueNormal},
	}
	for v, w := range want {
		if got := *tls[key(v)]; got != w {
			t.Errorf("v%d: got %+v, want %+v", v, got, w)
		}
	}

	// The stages of v2 with its send and row: each stretch as built.
	k := *tls[key(2)]
	k.Sent, k.Row = at(30), at(80)
	tls = map[scenario.Key]*keyTimeline{key(2): &k, key(9): {Sent: at(0)}}
	got := map[string]time.Duration{}
	for _, s := range stageStats(tls) {
		want := 1 // the incomplete one left out
		if s.Stage == "  "+queueFirst || s.Stage == "  "+queueNormal {
			want = 0 // v2 waited in the sticky queue
		}
		if s.Keys != want {
			t.Errorf("%s over %d keys, want %d", s.Stage, s.Keys, want)
		}
		got[s.Stage] = s.P99
	}
	for name, ms := range map[string]int{"publish → broker store": 5, "store → signal recorded (broker to bridge, bridge's work)": 5,
		"signal → workflow task scheduled": 10, "task scheduled → started": 20, "  " + queueSticky: 20, "task started → row": 10,
		"task execution (local activities included)": 20, "publish → row": 50} {
		if got[name] != time.Duration(ms)*time.Millisecond {
			t.Errorf("%s = %s, want %d ms", name, got[name], ms)
		}
	}
}
