package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/orderflow/orderflow/activities"
	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/workflows/api"
)

// ActivityOptions are the options of every activity OrderWorkflow runs:
// a bounded attempt, retried with exponential backoff until it succeeds,
// except for invalid input.
func ActivityOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        500 * time.Millisecond,
			BackoffCoefficient:     2,
			MaximumInterval:        30 * time.Second,
			MaximumAttempts:        0, // unlimited
			NonRetryableErrorTypes: api.NonRetryableErrorTypes(),
		},
	}
}

// LocalActivityRetryHorizon bounds how long a database step running as a
// local activity is retried: in practice, until it succeeds. The SDK needs
// a bound, and without one it takes the attempt's StartToCloseTimeout as
// the bound of all attempts together, so that an event would be dropped
// after a database outage of ten seconds.
const LocalActivityRetryHorizon = 365 * 24 * time.Hour

// LocalActivityOptions are the options of the database steps when they run
// as local activities: the same attempt bound and retry policy as
// ActivityOptions (retried until it succeeds, except for invalid input),
// executed by the workflow worker inside the workflow task.
func LocalActivityOptions() workflow.LocalActivityOptions {
	ao := ActivityOptions()
	return workflow.LocalActivityOptions{
		ScheduleToCloseTimeout: LocalActivityRetryHorizon,
		StartToCloseTimeout:    ao.StartToCloseTimeout,
		RetryPolicy:            ao.RetryPolicy,
	}
}

// ChangeLocalActivities is the workflow.GetVersion change ID of the
// workflow's performance changes. Version 1: the database steps (LoadOrder,
// ApplyEvent, AwardPoints) run as local activities. Version 2: in addition,
// the OrderStatus search attribute is written once per batch of signals
// (when no further signal is pending) instead of after every event.
// Version 3: a fresh run learns from LoadOrder which ledger rows exist and
// writes the missing ones the order is due before it handles any signal,
// and a duplicate signal also writes any row still missing (a run that
// ended between ApplyEvent and AwardPoints no longer waits for a new
// event). Runs recorded before a change replay with the older behaviour
// (workflow.DefaultVersion: regular activities, one upsert per event).
const ChangeLocalActivities = "local-db-activities"

// Versions of ChangeLocalActivities.
const (
	versionLocalActivities workflow.Version = 1
	versionCoalesceStatus  workflow.Version = 2
	versionReconcileLedger workflow.Version = 3
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

// MaxCarryBytes bounds the JSON size of what a continue-as-new carries, the
// state and the pending events: half the server's 2 MiB payload limit
// (limit.blobSize.error), whose excess fails the workflow. A delivery
// carries its message (up to 64 KiB of body, base64 in JSON): a typical
// event of under 1 KiB is carried by the thousand, the largest by the
// dozen. When the pending events would exceed it, the run handles the
// oldest ones before it continues as new, until the rest fits.
const MaxCarryBytes = 1 << 20

// YieldDelay is the timer with which the workflow ends a workflow task when
// no new signal comes to end it.
const YieldDelay = time.Millisecond

// Register registers OrderWorkflow under its type name WorkflowType.
func Register(r worker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(OrderWorkflow, workflow.RegisterOptions{Name: api.WorkflowType})
}

// OrderWorkflow is the durable serializer of one order's events. It handles
// the events of its order-event and order-events signals one at a time, in
// arrival order (a batch's events in the batch's order): a business key it
// has already recorded with the same content is a duplicate and skipped;
// every other event is decided with fsm from the workflow's own state and
// then applied by the ApplyEvent activity, whose decision (taken inside the
// database transaction) is authoritative; AwardPoints follows when the
// decision moves points. A fresh run rehydrates the order with LoadOrder
// first. After COMPLETED or CANCELLED the workflow waits Params.GracePeriod
// for late events, and a non-terminal order's workflow completes after
// Params.IdleTimeout without events; long runs continue-as-new, carrying the
// state and the events not handled yet (ChangeCarryPendingSignals).
func OrderWorkflow(ctx workflow.Context, in Input) (Result, error) {
	info := workflow.GetInfo(ctx)
	orderID, ok := api.OrderIDFromWorkflowID(info.WorkflowExecution.ID)
	if !ok {
		return Result{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("workflow ID %q is not an order workflow ID", info.WorkflowExecution.ID), "BadWorkflowID", nil)
	}
	// Activities run on a disconnected context: a cancellation request must
	// not interrupt an event half-way; the loop notices it between events.
	actx, _ := workflow.NewDisconnectedContext(ctx)
	actx = workflow.WithActivityOptions(actx, ActivityOptions())
	actx = workflow.WithLocalActivityOptions(actx, LocalActivityOptions())
	version := workflow.GetVersion(ctx, ChangeLocalActivities, workflow.DefaultVersion, versionReconcileLedger)
	r := &run{
		root: ctx,
		ctx:  actx,
		// The database steps are short transactions: as local activities
		// they run inside the workflow task that received the signal, with
		// no activity task round trip through the server.
		local: version >= versionLocalActivities,
		// Every upsert is a command, a history event and a visibility
		// write: one per batch of signals is enough to keep it current.
		coalesce: version >= versionCoalesceStatus,
		// The ledger is checked on load and on duplicates.
		reconcile: version >= versionReconcileLedger,
		logger:    log.With(workflow.GetLogger(ctx), "order_id", orderID),
		params:    in.Params.withDefaults(),
	}
	if err := workflow.SetQueryHandler(ctx, api.QueryState, func() (State, error) { return r.state.clone(), nil }); err != nil {
		return Result{}, fmt.Errorf("register %s query: %w", api.QueryState, err)
	}
	if in.Carry != nil {
		r.state = in.Carry.clone()
		r.state.Processed = 0
		r.state.Runs++
	} else if err := r.rehydrate(orderID); err != nil {
		return Result{}, err
	} else if r.reconcile {
		if err := r.reconcilePoints(r.logger); err != nil {
			return Result{}, err
		}
	}
	// The events the previous run received but did not handle come first,
	// in their order.
	r.pending = slices.Clone(in.Pending)
	r.state.Carried = len(in.Pending)
	r.bound = in.TaskBound
	r.state.OrderID = orderID
	if r.state.Status().Terminal() && r.state.TerminalAt.IsZero() {
		r.state.TerminalAt = workflow.Now(ctx)
	}
	if r.state.LastEventAt.IsZero() {
		r.state.LastEventAt = workflow.Now(ctx)
	}
	// A continued or rehydrated run states the status it starts from.
	if err := r.upsertStatus(); err != nil {
		return Result{}, err
	}
	r.showDetails("")
	return r.loop(inbox{one: workflow.GetSignalChannel(ctx, api.SignalEvent),
		many: workflow.GetSignalChannel(ctx, api.SignalEvents)})
}

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

// run is one run of OrderWorkflow.
type run struct {
	root   workflow.Context // the workflow's context: timers, signals, cancellation
	ctx    workflow.Context // disconnected from cancellation, with activity options
	logger log.Logger
	params Params
	state  State
	// status is the status last written to the search attribute.
	status fsm.Status
	// local is true when the database steps run as local activities.
	local bool
	// coalesce is true when the status is upserted once per batch of
	// signals rather than after each event.
	coalesce bool
	// reconcile is true when a fresh run and a duplicate signal write the
	// ledger rows the order is due but that are missing.
	reconcile bool
	// last is the last decision, as the current details show it.
	last string
	// pending are the events received but not handled yet, oldest first:
	// the ones carried over from the previous run, the rest of a signal
	// being handled, then, when the run continues as new, the ones it
	// carries to the next.
	pending []Delivery
	// taskHandled counts the events handled since the run last waited for
	// something the server sends (a signal, a timer): since the current
	// workflow task began. taskActive is true when a local activity ran
	// since then. flowing is true when signals came with the current task:
	// more are likely to come while it runs. bound is the events the task
	// may handle while more are pending (taskBound).
	taskHandled int
	taskActive  bool
	flowing     bool
	bound       int
	// carryVersion is the version of ChangeCarryPendingSignals once asked.
	carryVersion *workflow.Version
}

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

// acts is the receiver of the activities' method values: the worker runs
// the registered instance, so the workflow needs none of its dependencies.
var acts *activities.Activities

// execute runs the activity as a local activity or a regular one, as the
// run's version says, with summary as the step's one-line summary in the
// event history (user metadata, which replay does not compare).
func (r *run) execute(activity, arg any, summary string) workflow.Future {
	if r.local {
		r.taskActive = true
		o := LocalActivityOptions()
		o.Summary = summary
		return workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(r.ctx, o), activity, arg)
	}
	o := ActivityOptions()
	o.Summary = summary
	return workflow.ExecuteActivity(workflow.WithActivityOptions(r.ctx, o), activity, arg)
}

// showDetails sets the workflow's current details (CurrentDetails) with
// last as the last decision.
func (r *run) showDetails(last string) {
	if last != "" {
		r.last = last
	}
	workflow.SetCurrentDetails(r.root, CurrentDetails(r.state, r.last))
}

func (s State) clone() State {
	c := s
	c.Recorded = make(map[int64]string, len(s.Recorded))
	for k, v := range s.Recorded {
		c.Recorded[k] = v
	}
	c.Counts = make(map[fsm.Outcome]int64, len(s.Counts))
	for k, v := range s.Counts {
		c.Counts[k] = v
	}
	return c
}

// rehydrate loads the order and its recorded business keys from PostgreSQL.
func (r *run) rehydrate(orderID string) error {
	var res activities.LoadOrderResult
	if err := r.execute(acts.LoadOrder, orderID, SummaryLoadOrder).Get(r.ctx, &res); err != nil {
		return fmt.Errorf("load order %s: %w", orderID, err)
	}
	r.state = State{
		OrderID:  orderID,
		Exists:   res.Found,
		Recorded: make(map[int64]string, len(res.Versions)),
		Counts:   make(map[fsm.Outcome]int64),
		Runs:     1,
	}
	if res.Found {
		r.state.Order = res.Order
		r.state.Points = res.Order.NetPoints()
	}
	for v, h := range res.Versions {
		r.state.Recorded[v] = h
	}
	if r.reconcile {
		for _, k := range res.Awarded {
			r.state.setAwarded(k)
		}
	}
	r.logger.Info("order rehydrated", "found", res.Found, "status", res.Order.Status,
		"version", res.Order.Version, "recorded_keys", len(res.Versions))
	return nil
}

// deadline is when the run completes if no event arrives: the grace period
// after the order became terminal, or the idle timeout after the last event.
func (r *run) deadline() (time.Time, string) {
	if r.state.Exists && r.state.Order.Status.Terminal() {
		return r.state.TerminalAt.Add(r.params.GracePeriod), ReasonGracePeriod
	}
	return r.state.LastEventAt.Add(r.params.IdleTimeout), ReasonIdleTimeout
}

func (r *run) loop(ch inbox) (Result, error) {
	ctx := r.root
	var (
		timer       workflow.Future
		timerAt     time.Time
		cancelTimer workflow.CancelFunc
	)
	// The first task: as the previous run judged the stream, or as one
	// that signals came with.
	switch {
	case r.bound > 0:
		r.flowing = true
	case ch.Len() > 0:
		r.bound, r.flowing = MaxEventsPerTask, true
	default:
		r.bound = MaxQuietEventsPerTask
	}
	for {
		if ctx.Err() != nil {
			return Result{}, r.cancelled(ch)
		}
		// Events still pending (carried over from the previous run, or the
		// rest of a signal after the task ended) come before any new one.
		if len(r.pending) == 0 {
			deadline, reason := r.deadline()
			now := workflow.Now(ctx)
			if !now.Before(deadline) {
				// Complete, but not before every signal already delivered
				// to this run has been handled.
				n, err := r.drain(ch)
				if err != nil {
					return Result{}, err
				}
				if n == 0 {
					r.logger.Info("order workflow completing", "reason", reason,
						"status", r.state.Order.Status, "version", r.state.Order.Version)
					return Result{State: r.state.clone(), Reason: reason}, nil
				}
				continue
			}
			// Keep the pending timer unless the deadline moved earlier; a
			// timer that fires early is simply re-armed for the rest.
			if timer == nil || deadline.Before(timerAt) {
				if cancelTimer != nil {
					cancelTimer()
				}
				var tctx workflow.Context
				tctx, cancelTimer = workflow.WithCancel(ctx)
				timer, timerAt = workflow.NewTimer(tctx, deadline.Sub(now)), deadline
			}

			// When nothing is ready the selector blocks: what wakes it
			// comes with a new workflow task.
			blocks := ch.Len() == 0 && !timer.IsReady()
			timedOut := false
			sel := workflow.NewSelector(ctx)
			ch.addTo(sel, &r.pending)
			sel.AddFuture(timer, func(workflow.Future) { timedOut = true })
			sel.Select(ctx)
			if blocks {
				arrived := ch.Len()
				if len(r.pending) > 0 {
					arrived++ // the signal the selector took
				}
				r.newTask(arrived)
			}
			if timedOut {
				timer, cancelTimer = nil, nil
			}
		}
		got := len(r.pending) > 0
		if err := r.handlePending(ch); err != nil {
			return Result{}, err
		}
		// With coalesce, the status is written once no signal is pending
		// (a no-op when it did not change).
		if r.coalesce && ch.Len() == 0 {
			if err := r.upsertStatus(); err != nil {
				return Result{}, err
			}
		}
		if got {
			if r.shouldContinueAsNew() {
				return Result{}, r.continueAsNew(ch)
			}
			// A task that has handled its share while signals keep coming
			// ends, so that it is short; the next one goes on.
			if r.taskFull() && ch.Len() > 0 && r.carries() {
				if err := r.yield(ch, SummaryYieldTask); err != nil {
					return Result{}, err
				}
			}
		}
	}
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

// cancelled handles the signals already delivered, then ends the run as
// cancelled (an operator asked for it).
func (r *run) cancelled(ch inbox) error {
	n, err := r.drain(ch)
	if err != nil {
		return err
	}
	r.logger.Warn("order workflow cancelled", "drained", n,
		"status", r.state.Order.Status, "version", r.state.Order.Version)
	return r.root.Err()
}

func (r *run) shouldContinueAsNew() bool {
	if r.params.MaxEventsPerRun > 0 && r.state.Processed >= r.params.MaxEventsPerRun {
		return true
	}
	return workflow.GetInfo(r.ctx).GetContinueAsNewSuggested()
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

// continueAsNew ends the run with continue-as-new. With
// ChangeCarryPendingSignals version 1 it receives every pending signal
// without handling it and carries its events, after the ones still
// pending, to the next run (unless they would make the carried payload too
// large: then it handles the oldest ones first, a task's worth at a time);
// while signals are coming, the task that does so runs no activity: the
// run first ends a task in which local activities ran. Before, it handled
// every pending signal first.
func (r *run) continueAsNew(ch inbox) error {
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

// handle judges and applies one event. It returns an error only when the
// workflow cannot go on (it was cancelled); bad input is counted and logged.
func (r *run) handle(in Delivery) error {
	e := in.Event
	ctx := r.ctx
	r.state.Processed++
	r.state.LastEventAt = workflow.Now(ctx)
	logger := log.With(r.logger, "version", e.Version, "status", e.Status, "event_id", e.EventID)

	if err := e.Validate(); err != nil {
		r.state.Failed++
		logger.Error("invalid event signalled, ignored", "error", err)
		r.showDetails("an invalid signal, ignored")
		return nil
	}
	if e.OrderID != r.state.OrderID {
		r.state.Failed++
		logger.Error("event of another order signalled, ignored", "event_order_id", e.OrderID)
		r.showDetails(fmt.Sprintf("an event of order %s, ignored", e.OrderID))
		return nil
	}
	hash := e.ContentHash()
	if h, ok := r.state.Recorded[e.Version]; ok && h == hash {
		r.state.Counts[fsm.Duplicate]++
		logger.Debug("duplicate event skipped")
		r.showDetails(fmt.Sprintf("v%d %s → duplicate, skipped", e.Version, e.Status))
		if r.reconcile {
			return r.reconcilePoints(logger)
		}
		return nil
	}

	// The step's summary is the workflow's own decision, known before the
	// step; the database's, authoritative, is its result.
	local := r.expect(e)

	var res activities.ApplyEventResult
	err := r.execute(acts.ApplyEvent, activities.ApplyEventInput{Event: e, Source: in.Source},
		DecisionSummary(e, local)).Get(ctx, &res)
	if err != nil {
		if temporal.IsCanceledError(err) {
			return err
		}
		r.state.Failed++
		logger.Error("event could not be applied, ignored", "invalid_input", isNonRetryable(err), "error", err)
		r.showDetails(fmt.Sprintf("v%d %s → not applied (%s)", e.Version, e.Status, firstLine(err.Error(), 200)))
		return nil
	}
	d := res.Decision
	last := DecisionSummary(e, d)
	if d.Outcome != local.Outcome {
		logger.Info("database decision differs from the workflow's", "workflow_outcome", local.Outcome,
			"outcome", d.Outcome, "repeat", res.Repeat)
		last += fmt.Sprintf(" (database; the workflow expected %s)", local.Outcome)
	}
	if _, ok := r.state.Recorded[e.Version]; !ok {
		r.state.Recorded[e.Version] = hash
	}
	r.state.Counts[d.Outcome]++
	if d.Gap && d.Outcome == fsm.Applied {
		r.state.Gaps++
	}
	// The stored order only moves forward; adopt the database's view of it.
	if !r.state.Exists || d.Next.Version >= r.state.Order.Version {
		if d.Next.OrderID != "" {
			r.state.Order = d.Next
			r.state.Exists = true
		}
	}
	r.state.Points = r.state.Order.NetPoints()
	if r.state.Order.Status.Terminal() && r.state.TerminalAt.IsZero() {
		r.state.TerminalAt = workflow.Now(ctx)
	}

	switch d.Outcome {
	case fsm.Stale:
		logger.Info("stale event ignored", "outcome", d.Outcome, "reason", d.Reason,
			"order_status", r.state.Order.Status, "order_version", r.state.Order.Version)
	case fsm.Illegal, fsm.Conflict:
		logger.Warn("event not applied", "outcome", d.Outcome, "reason", d.Reason,
			"order_status", r.state.Order.Status, "order_version", r.state.Order.Version)
	default:
		logger.Info("event handled", "outcome", d.Outcome, "gap", d.Gap, "repeat", res.Repeat)
	}

	if d.Points != fsm.PointsNone {
		if err := r.award(d.Points, d.PointsDelta, e.Version, logger); err != nil {
			return err
		}
	}
	if err := r.reconcilePoints(logger); err != nil {
		return err
	}
	r.showDetails(last)
	if r.coalesce {
		return nil // the caller upserts once the pending signals are handled
	}
	return r.upsertStatus()
}

// award inserts one points ledger row (idempotent: the ledger keeps at most
// one row per order and kind) and remembers that it is in place.
func (r *run) award(kind fsm.PointsKind, points, version int64, logger log.Logger) error {
	ctx := r.ctx
	in := activities.AwardPointsInput{OrderID: r.state.OrderID, UserID: r.state.Order.PointsUser(), Kind: kind,
		Points: points, Version: version}
	var pr activities.AwardPointsResult
	if err := r.execute(acts.AwardPoints, in, PointsSummary(kind, points, in.UserID)).Get(ctx, &pr); err != nil {
		if temporal.IsCanceledError(err) {
			return err
		}
		r.state.Failed++
		logger.Error("points could not be awarded", "kind", kind, "points", points, "error", err)
		return nil
	}
	r.state.setAwarded(kind)
	logger.Info("points awarded", "kind", kind, "points", points, "inserted", pr.Inserted)
	return nil
}

// reconcilePoints makes sure the ledger has the rows the stored order is
// due: after a retried ApplyEvent whose first completion was lost, or in a
// fresh run, the decision alone does not say so.
func (r *run) reconcilePoints(logger log.Logger) error {
	if !r.state.Exists {
		return nil
	}
	for _, p := range r.state.Order.PointsDue() {
		if r.state.awarded(p.Kind) {
			continue
		}
		if err := r.award(p.Kind, p.Points, r.state.Order.Version, logger); err != nil {
			return err
		}
	}
	return nil
}

// upsertStatus writes the OrderStatus search attribute when it changed.
func (r *run) upsertStatus() error {
	st := r.state.Status()
	if st == "" || st == r.status {
		return nil
	}
	if err := workflow.UpsertTypedSearchAttributes(r.ctx, api.OrderStatusKey.ValueSet(string(st))); err != nil {
		return fmt.Errorf("upsert %s=%s: %w", api.SearchAttributeOrderStatus, st, err)
	}
	r.status = st
	return nil
}

// isNonRetryable reports whether err is an activity failure of one of the
// NonRetryableErrorTypes.
func isNonRetryable(err error) bool {
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && slices.Contains(api.NonRetryableErrorTypes(), appErr.Type())
}
