package workflows

import (
	"encoding/json"
	"slices"

	"go.temporal.io/sdk/workflow"

	"github.com/orderflow/orderflow/api"
)

// ChangeCarryPendingSignals is the workflow.GetVersion change ID of how a
// run goes on under a stream of signals. Version 1: the task that continues
// as new handles no event; it receives the pending signals and carries
// their events, unhandled, to the next run (Input.Pending), which handles
// them first. A run that reaches its limit in the middle of an
// order-events signal carries the rest of that signal's events. The
// carried bytes are bounded by MaxCarryBytes. So that no workflow task
// outlasts the signals the server buffers meanwhile, a run ends the task
// once it handled the task's bound of events while more are pending
// (taskBound: MaxEventsPerTask, fewer when more signals came during the
// previous task than it handled events, MaxQuietEventsPerTask when none
// came), and, while signals are coming, before it continues as new when
// the task ran local activities; it goes on in the next task, which a new
// signal or else a short timer (YieldDelay) brings. A run continued while
// signals were coming starts with its predecessor's bound
// (Input.TaskBound).
// DefaultVersion (runs that reached a point where the two differ before
// the change): a task handles every signal pending, a signal's events all
// together, and the run handles every pending signal before it continues
// as new. The version is asked where the behaviours first differ, so a
// run started before the change takes it up unless it already passed such
// a point. Changing a constant of the bound changes the commands of
// running workflows: it needs a new version.
const ChangeCarryPendingSignals = "carry-pending-signals"

// versionCarryPending is version 1 of ChangeCarryPendingSignals.
const versionCarryPending workflow.Version = 1

// MaxCarryBytes bounds the JSON size of what a continue-as-new carries, the
// state and the pending events: half the server's 2 MiB payload limit
// (limit.blobSize.error), whose excess fails the workflow. A delivery
// carries its message (up to 64 KiB of body, base64 in JSON): a typical
// event of under 1 KiB is carried by the thousand, the largest by the
// dozen. When the pending events would exceed it, the run handles the
// oldest ones before it continues as new, until the rest fits.
const MaxCarryBytes = 1 << 20

// carries reports whether the run carries pending events over to the next
// run and bounds the events of a task (ChangeCarryPendingSignals version
// 1). It asks for the version the first time, where the behaviours first
// differ.
func (r *run) carries() bool {
	if r.carryVersion == nil {
		v := workflow.GetVersion(r.root, ChangeCarryPendingSignals, workflow.DefaultVersion, versionCarryPending)
		r.carryVersion = &v
	}
	return *r.carryVersion >= versionCarryPending
}

func (r *run) shouldContinueAsNew() bool {
	if r.params.MaxEventsPerRun > 0 && r.state.Processed >= r.params.MaxEventsPerRun {
		return true
	}
	return workflow.GetInfo(r.ctx).GetContinueAsNewSuggested()
}

// continueAsNew ends the run with continue-as-new. With
// ChangeCarryPendingSignals version 1 it receives every pending signal
// without handling it and carries its events, after the ones still
// pending, to the next run (unless they would make the carried payload too
// large: then it handles the oldest ones first, a task's worth at a time);
// while signals are coming, the task that does so runs no activity: the
// run first ends a task in which local activities ran. Before, it handled
// every pending signal first.
func (r *run) continueAsNew(ch inbox) error {
	if err := r.ensureLoaded(); err != nil {
		return err
	}
	if !r.carries() {
		if _, err := r.drain(ch); err != nil {
			return err
		}
		carry := r.state.clone()
		r.logger.Info("order workflow continuing as new", "processed", carry.Processed,
			"history_length", workflow.GetInfo(r.ctx).GetCurrentHistoryLength(), "status", carry.Order.Status)
		return workflow.NewContinueAsNewError(r.ctx, api.WorkflowType, Input{Params: r.params, Carry: &carry})
	}
	handled := 0
	for {
		// While signals are coming, the task that continues as new runs no
		// activity: the server refuses the continue-as-new when a signal
		// came during the task, and the next task does its work again.
		if r.taskActive && r.flowing {
			if err := r.yield(ch, SummaryYieldContinueAsNew); err != nil {
				return err
			}
		}
		if r.root.Err() != nil {
			return r.cancelled(ch)
		}
		for {
			events, ok := ch.receiveAsync()
			if !ok {
				break
			}
			r.pending = append(r.pending, events...)
		}
		size := r.carrySize()
		if size <= MaxCarryBytes || len(r.pending) == 0 {
			break
		}
		// Too much to carry: handle the oldest events here, a task's bound
		// at a time.
		if r.taskFull() {
			if err := r.yield(ch, SummaryYieldTask); err != nil {
				return err
			}
			continue
		}
		for size > MaxCarryBytes && len(r.pending) > 0 && !r.taskFull() {
			d := r.pending[0]
			r.pending = r.pending[1:]
			size -= deliverySize(d)
			if err := r.handle(d); err != nil {
				return err
			}
			r.taskHandled++
			handled++
		}
	}
	carry := r.state.clone()
	pending := slices.Clone(r.pending)
	r.logger.Info("order workflow continuing as new", "processed", carry.Processed, "carried", len(pending),
		"handled_over_limit", handled, "history_length", workflow.GetInfo(r.ctx).GetCurrentHistoryLength(),
		"status", carry.Order.Status)
	next := Input{Params: r.params, Carry: &carry, Pending: pending}
	if r.flowing {
		next.TaskBound = r.bound
	}
	return workflow.NewContinueAsNewError(r.ctx, api.WorkflowType, next)
}

// carrySize is the JSON size of what continue-as-new would carry now: the
// state and the pending events.
func (r *run) carrySize() int {
	n := jsonSize(r.state)
	for _, d := range r.pending {
		n += deliverySize(d)
	}
	return n
}

// deliverySize is the JSON size of d as carried (with its separator).
func deliverySize(d Delivery) int { return jsonSize(d) + 1 }

// jsonSize is the length of v's JSON.
func jsonSize(v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		// Not reached for these types; count it as too large to carry.
		return MaxCarryBytes + 1
	}
	return len(b)
}
