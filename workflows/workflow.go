package workflows

import (
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/orderflow/orderflow/activities"
	"github.com/orderflow/orderflow/api"
	"github.com/orderflow/orderflow/fsm"
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
// event). Version 4: an event's decision and the ledger row it moves
// points with are one local activity (ApplyEventAndAward), so a task that
// handles an event records one step for both; and the deadline's timer is
// started only when the run waits with no signal pending (a signal already
// there ends the wait at once), and a timer that a nearer deadline
// supersedes is left to lapse rather than cancelled (it is later than the
// new one, so the run ends first). Version 5: the run's memory of what it
// handled is a cache the database overrules. An event the run has recorded
// with the same content is not skipped on the run's word: it goes to the
// database like any other (ApplyEventAndAward, which a repeat leaves
// unchanged), and when the database does not have it, or answers with an
// order older than the one the run knows, the run reloads the order from
// the database (LoadOrder) and goes on from there (a restored backup; see
// docs/operating.md). Version 6: the run starts from the OrderStatus
// search attribute it was started with (StartStatus, named by the
// SignalWithStart that started it) and upserts the status only when it
// differs, so that a new order's first status costs no upsert. Version 7: a
// fresh run does not load the order before its first event: its first
// event's step loads it and applies the event in one (LoadOrderAndApply),
// which saves a step and its marker per run; a run that must wait or
// continue as new before any event reached the database loads it then
// (LoadOrder). A new change
// ID would cost every run one more marker and one more TemporalChangeVersion
// upsert (an action on the engine's counter, though Temporal Cloud does not
// bill it), so the change is a version of this one. Runs recorded before a
// change replay with the older behaviour (workflow.DefaultVersion: regular
// activities, one upsert per event).
const ChangeLocalActivities = "local-db-activities"

// Versions of ChangeLocalActivities.
const (
	versionLocalActivities workflow.Version = 1
	versionCoalesceStatus  workflow.Version = 2
	versionReconcileLedger workflow.Version = 3
	versionLeanTasks       workflow.Version = 4
	versionVerifyMemory    workflow.Version = 5
	versionStartStatus     workflow.Version = 6
	versionLoadWithFirst   workflow.Version = 7
)

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
			fmt.Sprintf("workflow ID %q is not an order workflow ID", info.WorkflowExecution.ID), api.ErrTypeBadWorkflowID, nil)
	}
	// Activities run on a disconnected context: a cancellation request must
	// not interrupt an event half-way; the loop notices it between events.
	actx, _ := workflow.NewDisconnectedContext(ctx)
	actx = workflow.WithActivityOptions(actx, ActivityOptions())
	actx = workflow.WithLocalActivityOptions(actx, LocalActivityOptions())
	version := workflow.GetVersion(ctx, ChangeLocalActivities, workflow.DefaultVersion, versionLoadWithFirst)
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
		// An event's decision and its points are one step.
		oneStep: version >= versionLeanTasks,
		// A timer only when the run waits for one.
		leanTimers: version >= versionLeanTasks,
		// The database, not the run's memory, says what is a duplicate.
		verify: version >= versionVerifyMemory,
		logger: log.With(workflow.GetLogger(ctx), "order_id", orderID),
		params: in.Params.withDefaults(),
	}
	if err := workflow.SetQueryHandler(ctx, api.QueryState, func() (State, error) { return r.state.clone(), nil }); err != nil {
		return Result{}, fmt.Errorf("register %s query: %w", api.QueryState, err)
	}
	switch {
	case in.Carry != nil:
		r.state = in.Carry.clone()
		r.state.Processed = 0
		r.state.Runs++
	case version >= versionLoadWithFirst:
		// A fresh run loads the order with its first event's step.
		r.state = newState(orderID)
		r.unloaded = true
	default:
		if err := r.rehydrate(orderID); err != nil {
			return Result{}, err
		}
		if r.reconcile {
			if err := r.reconcilePoints(r.logger); err != nil {
				return Result{}, err
			}
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
	// The status the run started with, as its search attribute; a
	// continued or rehydrated run states the status it starts from when
	// that differs.
	if version >= versionStartStatus {
		r.status = startedStatus(ctx)
	}
	if err := r.upsertStatus(); err != nil {
		return Result{}, err
	}
	r.showDetails("")
	return r.loop(inbox{one: workflow.GetSignalChannel(ctx, api.SignalEvent),
		many: workflow.GetSignalChannel(ctx, api.SignalEvents)})
}

// startedStatus is the OrderStatus search attribute the run started with
// ("" when none).
func startedStatus(ctx workflow.Context) fsm.Status {
	st, _ := workflow.GetTypedSearchAttributes(ctx).GetKeyword(api.OrderStatusKey)
	return fsm.Status(st)
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
	// oneStep is true when an event's decision and the ledger row it
	// moves points with are one activity (ApplyEventAndAward).
	oneStep bool
	// leanTimers is true when the deadline's timer is started only when
	// the run waits with no signal pending, and a superseded one is not
	// cancelled.
	leanTimers bool
	// verify is true when an event the run has recorded still goes to the
	// database, and a database that is behind the run's memory makes the
	// run reload the order.
	verify bool
	// unloaded is true while a fresh run that loads the order with its
	// first event's step (LoadOrderAndApply) has not loaded it yet.
	unloaded bool
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

// newState is the state of a fresh run of the order before it loads it.
func newState(orderID string) State {
	return State{
		OrderID:  orderID,
		Counts:   make(map[fsm.Outcome]int64),
		Recorded: make(map[int64]string),
		Runs:     1,
	}
}

// rehydrate loads the order and its recorded business keys from PostgreSQL.
func (r *run) rehydrate(orderID string) error {
	res, err := r.load(orderID, SummaryLoadOrder)
	if err != nil {
		return err
	}
	r.state = newState(orderID)
	r.adoptLoaded(res, r.reconcile)
	r.logRehydrated(res)
	return nil
}

// logRehydrated logs what a fresh run loaded.
func (r *run) logRehydrated(res activities.LoadOrderResult) {
	r.logger.Info("order rehydrated", "found", res.Found, "status", res.Order.Status,
		"version", res.Order.Version, "recorded_keys", len(res.Versions))
}

// adoptFirstLoad makes what a fresh run loaded its state (adoptLoaded, with
// the ledger), where no event's step has loaded it yet.
func (r *run) adoptFirstLoad(res activities.LoadOrderResult) {
	r.adoptLoaded(res, true)
	r.unloaded = false
	if r.state.Status().Terminal() && r.state.TerminalAt.IsZero() {
		r.state.TerminalAt = workflow.Now(r.ctx)
	}
	r.logRehydrated(res)
}

// ensureLoaded loads the order (LoadOrder) and writes the ledger rows it is
// due, when the run has not loaded it yet (unloaded): before the run
// waits, completes or continues as new, what it knows must be the
// database's.
func (r *run) ensureLoaded() error {
	if !r.unloaded {
		return nil
	}
	res, err := r.load(r.state.OrderID, SummaryLoadOrder)
	if err != nil {
		return err
	}
	r.adoptFirstLoad(res)
	return r.reconcilePoints(r.logger)
}

// load runs LoadOrder with summary as the step's summary.
func (r *run) load(orderID, summary string) (activities.LoadOrderResult, error) {
	var res activities.LoadOrderResult
	if err := r.execute(acts.LoadOrder, orderID, summary).Get(r.ctx, &res); err != nil {
		return res, fmt.Errorf("load order %s: %w", orderID, err)
	}
	return res, nil
}

// adoptLoaded replaces what the run knows of the order's rows by res: the
// order, the recorded business keys and, with ledger, the ledger rows in
// place.
func (r *run) adoptLoaded(res activities.LoadOrderResult, ledger bool) {
	r.state.Exists = res.Found
	r.state.Order = fsm.Order{}
	r.state.Points = 0
	if res.Found {
		r.state.Order = res.Order
		r.state.Points = res.Order.NetPoints()
	}
	r.state.Recorded = make(map[int64]string, len(res.Versions))
	for v, h := range res.Versions {
		r.state.Recorded[v] = h
	}
	r.state.PurchaseAwarded, r.state.RefundAwarded = false, false
	if ledger {
		for _, k := range res.Awarded {
			r.state.setAwarded(k)
		}
	}
}

// deadline is when the run completes if no event arrives: the grace period
// after the order became terminal, or the idle timeout after the last event.
func (r *run) deadline() (time.Time, string) {
	if r.state.Exists && r.state.Order.Status.Terminal() {
		return r.state.TerminalAt.Add(r.params.GracePeriod), ReasonGracePeriod
	}
	return r.state.LastEventAt.Add(r.params.IdleTimeout), ReasonIdleTimeout
}

// loop handles the run's events until the run completes, continues as new
// or is cancelled.
func (r *run) loop(ch inbox) (Result, error) {
	r.firstTask(ch)
	var t deadlineTimer
	for {
		if r.root.Err() != nil {
			return Result{}, r.cancelled(ch)
		}
		// Events still pending (carried over from the previous run, or the
		// rest of a signal after the task ended) come before any new one.
		if len(r.pending) == 0 {
			// A run that will wait or complete knows the order first.
			if ch.Len() == 0 {
				if err := r.ensureLoaded(); err != nil {
					return Result{}, err
				}
			}
			deadline, reason := r.deadline()
			now := workflow.Now(r.root)
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
			r.wait(ch, &t, deadline, now)
		}
		if err := r.handleReceived(ch); err != nil {
			return Result{}, err
		}
	}
}

// firstTask sets the bound of the run's first task: as the previous run
// judged the stream, or as one that signals came with.
func (r *run) firstTask(ch inbox) {
	switch {
	case r.bound > 0:
		r.flowing = true
	case ch.Len() > 0:
		r.bound, r.flowing = MaxEventsPerTask, true
	default:
		r.bound = MaxQuietEventsPerTask
	}
}

// deadlineTimer is the timer of the run's deadline.
type deadlineTimer struct {
	future workflow.Future
	at     time.Time
	cancel workflow.CancelFunc
}

// arm keeps the pending timer unless the deadline moved earlier; a timer
// that fires early is simply re-armed for the rest. With lapse, a timer
// superseded by an earlier deadline is not cancelled: it would fire after
// the new one, which ends the run.
func (t *deadlineTimer) arm(ctx workflow.Context, deadline, now time.Time, lapse bool) {
	if t.future != nil && !deadline.Before(t.at) {
		return
	}
	if t.cancel != nil && !lapse {
		t.cancel()
	}
	var tctx workflow.Context
	tctx, t.cancel = workflow.WithCancel(ctx)
	t.future, t.at = workflow.NewTimer(tctx, deadline.Sub(now)), deadline
}

// wait waits for a signal, whose events it appends to the pending ones, or
// for the deadline's timer. A wait that blocks starts a new workflow task.
func (r *run) wait(ch inbox, t *deadlineTimer, deadline, now time.Time) {
	if r.leanTimers && ch.Len() > 0 {
		// A signal is pending: the selector takes it at once, and no
		// timer is needed to end the wait.
		sel := workflow.NewSelector(r.root)
		ch.addTo(sel, &r.pending)
		sel.Select(r.root)
		return
	}
	t.arm(r.root, deadline, now, r.leanTimers)
	// When nothing is ready the selector blocks: what wakes it comes with
	// a new workflow task.
	blocks := ch.Len() == 0 && !t.future.IsReady()
	timedOut := false
	sel := workflow.NewSelector(r.root)
	ch.addTo(sel, &r.pending)
	sel.AddFuture(t.future, func(workflow.Future) { timedOut = true })
	sel.Select(r.root)
	if blocks {
		arrived := ch.Len()
		if len(r.pending) > 0 {
			arrived++ // the signal the selector took
		}
		r.newTask(arrived)
	}
	if timedOut {
		t.future, t.cancel = nil, nil
	}
}

// handleReceived handles the pending events; then, when there were any, it
// continues as new at the run's limit, or ends a task that has handled its
// share while signals keep coming. A continue-as-new is returned as its
// error.
func (r *run) handleReceived(ch inbox) error {
	got := len(r.pending) > 0
	if err := r.handlePending(ch); err != nil {
		return err
	}
	// With coalesce, the status is written once no signal is pending (a
	// no-op when it did not change).
	if r.coalesce && ch.Len() == 0 {
		if err := r.upsertStatus(); err != nil {
			return err
		}
	}
	if !got {
		return nil
	}
	if r.shouldContinueAsNew() {
		return r.continueAsNew(ch)
	}
	// A task that has handled its share while signals keep coming ends, so
	// that it is short; the next one goes on.
	if r.taskFull() && ch.Len() > 0 && r.carries() {
		return r.yield(ch, SummaryYieldTask)
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
