package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/converter"

	"github.com/orderflow/orderflow/api"
	"github.com/orderflow/orderflow/scenario"
	"github.com/orderflow/orderflow/workflows"
)

// breakdownSampleOrders is how many orders of a steady cell have their
// events' paths through the stages read.
const breakdownSampleOrders = 150

// keyTimeline is when one business key passed each stage of its path, all
// on the one host's clock: the producer's send began; the broker stored
// the message (its store timestamp, which the bridge passes on in the
// signal); Temporal recorded the signal; the workflow task that handed it
// to the workflow was scheduled, started and completed; its order_events
// row was written (first_seen_at).
type keyTimeline struct {
	Sent, Stored, Signalled, Scheduled, Started, Completed, Row time.Time
	// Queue is where the workflow task that handed the key to the workflow
	// waited: queueFirst (a run's first task), queueSticky or queueNormal.
	Queue string
}

// The task queues a key's workflow task waits in, as keyTimeline.Queue.
const (
	// queueFirst is a run's first task, which goes to the task queue
	// shared by all workers.
	queueFirst = "a run's first task"
	// queueSticky is the sticky queue of the worker that has the run in
	// its cache.
	queueSticky = "sticky queue"
	// queueNormal is a later task on the shared task queue: the run was
	// not in a worker's cache, or its sticky task timed out.
	queueNormal = "shared queue, later task"
)

// stage is one stretch of a key's path: its name and its duration; with
// queue, only of the keys whose task waited there.
type stage struct {
	Name  string
	of    func(keyTimeline) time.Duration
	queue string
}

// stages are the stretches of the path from publish to row, in order; the
// first five unindented ones add up to the whole. The indented ones split
// "task scheduled → started" by the queue the task waited in. "task
// execution" overlaps the last: it is the whole workflow task, local
// activities included.
var stages = []stage{
	{"publish → broker store", func(k keyTimeline) time.Duration { return k.Stored.Sub(k.Sent) }, ""},
	{"store → signal recorded (broker to bridge, bridge's work)", func(k keyTimeline) time.Duration { return k.Signalled.Sub(k.Stored) }, ""},
	{"signal → workflow task scheduled", func(k keyTimeline) time.Duration { return max(k.Scheduled.Sub(k.Signalled), 0) }, ""},
	{"task scheduled → started", waited, ""},
	{"  " + queueFirst, waited, queueFirst},
	{"  " + queueSticky, waited, queueSticky},
	{"  " + queueNormal, waited, queueNormal},
	{"task started → row", func(k keyTimeline) time.Duration { return k.Row.Sub(k.Started) }, ""},
	{"task execution (local activities included)", func(k keyTimeline) time.Duration { return k.Completed.Sub(k.Started) }, ""},
	{"publish → row", func(k keyTimeline) time.Duration { return k.Row.Sub(k.Sent) }, ""},
}

// waited is how long a key's task waited between scheduled and started.
func waited(k keyTimeline) time.Duration { return k.Started.Sub(k.Scheduled) }

// stageStat is one stage's p50 and p99 over the sampled keys.
type stageStat struct {
	Stage    string
	P50, P99 time.Duration
	Keys     int
}

// String is the stat as a line of output.
func (s stageStat) String() string {
	return fmt.Sprintf("%-58s p50 %7s  p99 %7s  keys %d", s.Stage, ms(s.P50), ms(s.P99), s.Keys)
}

// complete reports whether every time of the timeline is known.
func (k keyTimeline) complete() bool {
	for _, t := range []time.Time{k.Sent, k.Stored, k.Signalled, k.Scheduled, k.Started, k.Completed, k.Row} {
		if t.IsZero() {
			return false
		}
	}
	return true
}

// stageStats is each stage's quantiles over the complete timelines.
func stageStats(tls map[scenario.Key]*keyTimeline) []stageStat {
	var done []keyTimeline
	for _, k := range tls {
		if k.complete() {
			done = append(done, *k)
		}
	}
	out := make([]stageStat, 0, len(stages))
	for _, s := range stages {
		d := make([]time.Duration, 0, len(done))
		for _, k := range done {
			if s.queue == "" || s.queue == k.Queue {
				d = append(d, s.of(k))
			}
		}
		slices.Sort(d)
		out = append(out, stageStat{Stage: s.Name, P50: quantile(d, 0.50), P99: quantile(d, 0.99), Keys: len(d)})
	}
	return out
}

// signalKeys decodes the deliveries a signal event carries: their keys and
// the broker's store time of each.
func signalKeys(a *historypb.WorkflowExecutionSignaledEventAttributes) ([]workflows.Delivery, error) {
	dc := converter.GetDefaultDataConverter()
	switch a.GetSignalName() {
	case api.SignalEvent:
		var d workflows.Delivery
		if err := dc.FromPayloads(a.GetInput(), &d); err != nil {
			return nil, fmt.Errorf("decode %s: %w", a.GetSignalName(), err)
		}
		return []workflows.Delivery{d}, nil
	case api.SignalEvents:
		var b workflows.Batch
		if err := dc.FromPayloads(a.GetInput(), &b); err != nil {
			return nil, fmt.Errorf("decode %s: %w", a.GetSignalName(), err)
		}
		return b.Deliveries, nil
	}
	return nil, nil
}

// historyTimelines fills, from an order's runs (oldest first), when each
// key's first signal was recorded, when the broker stored it, and the
// workflow task that first saw it: the first task started after the signal
// (a signal that comes while a task runs waits for the next one; events a
// run carries into the next by continue-as-new, for the next run's first
// task). Keys absent from tls are ignored.
func historyTimelines(runs [][]*historypb.HistoryEvent, tls map[scenario.Key]*keyTimeline) error {
	var pending []*keyTimeline
	for _, events := range runs {
		// scheduled is when each workflow task was scheduled, and in which
		// queue, by its scheduled event's ID.
		type task struct {
			at    time.Time
			queue string
		}
		scheduled := map[int64]task{}
		byTask := map[int64][]*keyTimeline{}
		for _, e := range events {
			at := e.GetEventTime().AsTime()
			switch e.GetEventType() {
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
				ds, err := signalKeys(e.GetWorkflowExecutionSignaledEventAttributes())
				if err != nil {
					return err
				}
				for _, d := range ds {
					k := tls[scenario.Key{OrderID: d.OrderID, Version: d.Version}]
					if k == nil || !k.Signalled.IsZero() {
						continue
					}
					k.Signalled = at
					if d.Source != nil {
						k.Stored = d.Source.StoredAt
					}
					pending = append(pending, k)
				}
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
				q := queueNormal
				switch {
				case len(scheduled) == 0:
					q = queueFirst
				case e.GetWorkflowTaskScheduledEventAttributes().GetTaskQueue().GetKind() == enumspb.TASK_QUEUE_KIND_STICKY:
					q = queueSticky
				}
				scheduled[e.GetEventId()] = task{at, q}
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
				sch, ok := scheduled[e.GetWorkflowTaskStartedEventAttributes().GetScheduledEventId()]
				if !ok {
					continue
				}
				for _, k := range pending {
					k.Scheduled, k.Started, k.Queue = sch.at, at, sch.queue
				}
				byTask[e.GetEventId()], pending = pending, nil
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
				for _, k := range byTask[e.GetWorkflowTaskCompletedEventAttributes().GetStartedEventId()] {
					k.Completed = at
				}
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED, enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
				// The events go to the next task: time them by it.
				var started int64
				if a := e.GetWorkflowTaskFailedEventAttributes(); a != nil {
					started = a.GetStartedEventId()
				} else {
					started = e.GetWorkflowTaskTimedOutEventAttributes().GetStartedEventId()
				}
				pending = append(pending, byTask[started]...)
				delete(byTask, started)
			}
		}
	}
	return nil
}

// measureBreakdown fills res.Breakdown for a steady cell of orderflow: the
// path of each key of a sample of its orders through the stages, from when
// its send began (starts), its signal's and workflow task's events in the
// histories, and its row (applied).
func (b *bench) measureBreakdown(ctx context.Context, msgs []scenario.Message, starts []time.Time, applied map[scenario.Key]time.Time, res *cellResult) error {
	sample := costSample(msgs, breakdownSampleOrders)
	tls := map[scenario.Key]*keyTimeline{}
	for i, m := range msgs {
		if m.Kind == scenario.KindBad {
			continue
		}
		if _, ok := sample[m.Event.OrderID]; !ok {
			continue
		}
		k := m.Event.Key()
		tl := tls[k]
		if tl == nil {
			tl = &keyTimeline{Row: applied[k]}
			tls[k] = tl
		}
		if tl.Sent.IsZero() || starts[i].Before(tl.Sent) {
			tl.Sent = starts[i]
		}
	}
	for orderID := range sample {
		runs, err := orderRuns(ctx, b.tc, orderID)
		if err != nil {
			return err
		}
		slices.Reverse(runs)
		if err := historyTimelines(runs, tls); err != nil {
			return fmt.Errorf("%s: %w", orderID, err)
		}
	}
	res.Breakdown = stageStats(tls)
	return nil
}

// breakdownLines are a cell's stage stats as lines of output.
func breakdownLines(ss []stageStat) string {
	var sb strings.Builder
	for _, s := range ss {
		sb.WriteString("\n          " + s.String())
	}
	return sb.String()
}
