package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"
)

// inbox is the run's two signal channels: one event per signal
// (api.SignalEvent) and several events of the order per signal
// (api.SignalEvents). The workflow handles the events of a batch one after
// the other, exactly as if each had come in a signal of its own, so the
// commands of a run do not depend on how the bridge grouped its events.
type inbox struct {
	one, many workflow.ReceiveChannel
}

// Len is the number of signals pending on both channels.
func (in inbox) Len() int { return in.one.Len() + in.many.Len() }

// addTo adds both channels to sel; a received signal's deliveries are
// appended to *got, in order. A corrupt payload is dropped (ReceiveAsync
// skips it).
func (in inbox) addTo(sel workflow.Selector, got *[]Delivery) {
	sel.AddReceive(in.one, func(c workflow.ReceiveChannel, _ bool) {
		var d Delivery
		if c.ReceiveAsync(&d) {
			*got = append(*got, d)
		}
	})
	sel.AddReceive(in.many, func(c workflow.ReceiveChannel, _ bool) {
		var b Batch
		if c.ReceiveAsync(&b) {
			*got = append(*got, b.Deliveries...)
		}
	})
}

// receiveAsync returns the deliveries of one pending signal, the single
// events' channel first, and false when none is pending.
func (in inbox) receiveAsync() ([]Delivery, bool) {
	var d Delivery
	if in.one.ReceiveAsync(&d) {
		return []Delivery{d}, true
	}
	var b Batch
	if in.many.ReceiveAsync(&b) {
		return b.Deliveries, true
	}
	return nil, false
}

// SignalsPerTask is how many signals the workflow lets come during one
// workflow task, by its estimate: half the 100 after which the server
// fails the task in flight (history.maximumBufferedEventsBatch), whose
// work the next task then does again. The bound of a task's events
// (taskBound) follows from it: each event runs its own local activities
// (ApplyEvent, sometimes AwardPoints; 1 to 5 ms each on the 2-core
// development machine), so a task's length follows its events, not the
// signals that brought them.
const SignalsPerTask = 50

// Bounds of the events one workflow task handles while more are pending
// (ChangeCarryPendingSignals version 1; see taskBound):
//   - MaxEventsPerTask when signals came with the task: while the workflow
//     keeps up with the stream, no more signals come during a task than it
//     handles events, so 50 events meet at most SignalsPerTask signals. A
//     smaller bound costs a task more (its round trip to the server and
//     about five history events: the three of the task and the timer that
//     ends it) for fewer events;
//   - down to MinEventsPerTask when the signals come faster than the
//     workflow handles events: below it a task's fixed cost dominates;
//   - MaxQuietEventsPerTask when no signal came with the task: the run
//     works through events it already has (carried over, or a backlog of
//     signals received before), and ending its task after a few would cost
//     a YieldDelay timer each time, which the server fires no sooner than a
//     second later (history.timerProcessorMaxTimeShift) when no signal ends
//     the wait first. A task of 500 events lasts about 0.5 to 2.5 s; should
//     the stream resume meanwhile and 100 signals come before it ends, the
//     server fails it and the next task, which starts with those signals,
//     does the work again under a tighter bound.
const (
	MaxEventsPerTask      = 50
	MinEventsPerTask      = 10
	MaxQuietEventsPerTask = 500
)

// YieldDelay is the timer with which the workflow ends a workflow task when
// no new signal comes to end it.
const YieldDelay = time.Millisecond

// newTask notes that the run waited for the server: what follows runs in
// a new workflow task, which arrived signals came with.
func (r *run) newTask(arrived int) {
	r.bound = taskBound(r.taskHandled, arrived)
	r.flowing = arrived > 0
	r.taskHandled = 0
	r.taskActive = false
}

// taskBound is the number of events a workflow task may handle while more
// are pending, from the events the previous task handled (prev) and the
// signals that came with this one (arrived), which came while the previous
// one ran or the run waited. When signals came, at that rate
// prev*SignalsPerTask/arrived events let SignalsPerTask signals come: the
// bound is that many, but at least MinEventsPerTask (a task's fixed cost,
// its round trip to the server, does not shrink with its events) and at
// most MaxEventsPerTask (a stream's rate changes; the bound only shrinks
// after the fact); MaxEventsPerTask when the previous task handled no
// event. MaxQuietEventsPerTask when no signal came.
func taskBound(prev, arrived int) int {
	switch {
	case arrived == 0:
		return MaxQuietEventsPerTask
	case prev == 0:
		return MaxEventsPerTask
	}
	return min(max(SignalsPerTask*prev/arrived, MinEventsPerTask), MaxEventsPerTask)
}

// taskFull reports whether the current task has handled its bound of
// events.
func (r *run) taskFull() bool { return r.taskHandled >= r.bound }

// yield ends the current workflow task and waits for the next one: the one
// that brings a new signal (under a stream, at once) or else the one of a
// timer of YieldDelay (which the server fires about a second later; it is
// cancelled when a signal comes first). It handles nothing: the new
// signals stay pending. The status is written first, as at the end of
// every task.
func (r *run) yield(ch inbox, summary string) error {
	if r.coalesce {
		if err := r.upsertStatus(); err != nil {
			return err
		}
	}
	n := ch.Len()
	tctx, cancel := workflow.WithCancel(r.ctx)
	timer := workflow.NewTimerWithOptions(tctx, YieldDelay, workflow.TimerOptions{Summary: summary})
	err := workflow.Await(r.ctx, func() bool { return timer.IsReady() || ch.Len() > n })
	if !timer.IsReady() {
		// A signal ended the wait: the timer is of no more use.
		cancel()
	}
	r.newTask(ch.Len() - n)
	if err != nil {
		return fmt.Errorf("wait for the next workflow task: %w", err)
	}
	return nil
}

// handlePending handles the pending events in order. Between two of them
// (in the middle of a signal's events, or of the ones carried over), with
// ChangeCarryPendingSignals version 1, the run continues as new once it
// reached its limit, carrying the rest, and ends the workflow task once the
// task handled its share (taskFull). Before the change a signal's events
// were handled all together: these are the points where the versions
// differ, and the version is asked there. A continue-as-new is returned as
// its error.
func (r *run) handlePending(ch inbox) error {
	for len(r.pending) > 0 {
		d := r.pending[0]
		r.pending = r.pending[1:]
		if err := r.handle(d); err != nil {
			return err
		}
		r.taskHandled++
		if len(r.pending) == 0 {
			return nil
		}
		if r.shouldContinueAsNew() && r.carries() {
			return r.continueAsNew(ch)
		}
		if r.taskFull() && r.carries() {
			if err := r.yield(ch, SummaryYieldTask); err != nil {
				return err
			}
		}
	}
	return nil
}

// drain handles every event already pending, the carried ones first, in
// order, and returns how many it handled. With ChangeCarryPendingSignals
// version 1 it ends the workflow task once the task handled its share
// (taskFull) while more are pending. The status is up to date when it
// returns.
func (r *run) drain(ch inbox) (int, error) {
	n := 0
	for {
		if len(r.pending) == 0 {
			events, ok := ch.receiveAsync()
			if !ok {
				if r.coalesce {
					return n, r.upsertStatus()
				}
				return n, nil
			}
			r.pending = append(r.pending, events...)
			continue
		}
		d := r.pending[0]
		r.pending = r.pending[1:]
		n++
		if err := r.handle(d); err != nil {
			return n, err
		}
		r.taskHandled++
		if r.taskFull() && (len(r.pending) > 0 || ch.Len() > 0) && r.carries() {
			if err := r.yield(ch, SummaryYieldTask); err != nil {
				return n, err
			}
		}
	}
}
