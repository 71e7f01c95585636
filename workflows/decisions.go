package workflows

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/orderflow/orderflow/activities"
	"github.com/orderflow/orderflow/api"
	"github.com/orderflow/orderflow/fsm"
)

// handle judges and applies one event. It returns an error only when the
// workflow cannot go on (it was cancelled); bad input is counted and logged.
func (r *run) handle(in Delivery) error {
	e := in.Event
	r.state.Processed++
	r.state.LastEventAt = workflow.Now(r.ctx)
	logger := log.With(r.logger, "version", e.Version, "status", e.Status, "event_id", e.EventID)
	if !r.admit(e, logger) {
		return nil
	}
	hash := e.ContentHash()
	var (
		res   activities.ApplyEventResult
		award *activities.AwardOutcome
		err   error
	)
	first := r.unloaded
	if first {
		// The step loads the order, then applies the event; what follows
		// judges its answer by the order as loaded.
		res, award, err = r.loadAndApply(in)
	}
	seen := r.seen(e, hash)
	if seen && !r.verify {
		return r.duplicate(e, logger)
	}
	// The step's summary is the workflow's own decision, known before the
	// step; the database's, authoritative, is its result.
	local := r.expect(e)
	if seen {
		local = fsm.Decision{Outcome: fsm.Duplicate, Next: r.state.Order}
	}
	if !first {
		res, award, err = r.apply(in, local, r.known(e))
	}
	if err != nil {
		if temporal.IsCanceledError(err) {
			return err
		}
		r.state.Failed++
		logger.Error("event could not be applied, ignored", "invalid_input", isNonRetryable(err), "error", err)
		r.showDetails(fmt.Sprintf("v%d %s → not applied (%s)", e.Version, e.Status, firstLine(err.Error(), 200)))
		return nil
	}
	switch behind := r.behind(res.Decision); {
	case seen && res.Repeat && !behind:
		// The database has it too: a duplicate.
		r.noteAward(award, logger)
		return r.duplicate(e, logger)
	case seen || behind:
		// The database does not have what the run remembers (it was
		// restored from a backup, say): it decides, and the run reloads.
		if err := r.resync(e, logger); err != nil {
			return err
		}
	}
	last := r.adopt(e, hash, local, res, logger)
	r.logDecision(res, logger)
	if r.oneStep {
		r.noteAward(award, logger)
		if err := r.reconcilePoints(logger); err != nil {
			return err
		}
	} else if err := r.movePoints(res.Decision, e.Version, logger); err != nil {
		return err
	}
	r.showDetails(last)
	if r.coalesce {
		return nil // the caller upserts once the pending signals are handled
	}
	return r.upsertStatus()
}

// apply runs the step that applies in (local being the workflow's own
// decision, known the order as the run knows it, nil to have the step read
// it): ApplyEvent, or with oneStep ApplyEventAndAward, which also writes
// the ledger row the decision moves points with and returns what became of
// it.
func (r *run) apply(in Delivery, local fsm.Decision, known *activities.KnownOrder) (activities.ApplyEventResult, *activities.AwardOutcome, error) {
	arg := activities.ApplyEventInput{Event: in.Event, Source: in.Source, Known: known}
	summary := DecisionSummary(in.Event, local)
	if !r.oneStep {
		var res activities.ApplyEventResult
		err := r.execute(acts.ApplyEvent, arg, summary).Get(r.ctx, &res)
		return res, nil, err
	}
	var res activities.ApplyEventAndAwardResult
	err := r.execute(acts.ApplyEventAndAward, arg, summary).Get(r.ctx, &res)
	return res.ApplyEventResult, res.Award, err
}

// known is the order as the run knows it, for the step of e when the run
// has not recorded e's business key: it spares the step a read, and the
// write checks it. Nil when the key is recorded: the step reads.
func (r *run) known(e fsm.Event) *activities.KnownOrder {
	if _, recorded := r.state.Recorded[e.Version]; recorded {
		return nil
	}
	return &activities.KnownOrder{Found: r.state.Exists, Order: r.state.Order}
}

// seen reports whether the run has recorded e's business key with content
// hash hash.
func (r *run) seen(e fsm.Event, hash string) bool {
	h, ok := r.state.Recorded[e.Version]
	return ok && h == hash
}

// loadAndApply runs a fresh run's first step, LoadOrderAndApply, and adopts
// the order it loaded, as it was before the event's write.
func (r *run) loadAndApply(in Delivery) (activities.ApplyEventResult, *activities.AwardOutcome, error) {
	arg := activities.ApplyEventInput{Event: in.Event, Source: in.Source}
	var res activities.LoadOrderAndApplyResult
	if err := r.execute(acts.LoadOrderAndApply, arg, FirstStepSummary(in.Event)).Get(r.ctx, &res); err != nil {
		return activities.ApplyEventResult{}, nil, err
	}
	r.adoptFirstLoad(res.Loaded)
	return res.ApplyEventResult, res.Award, nil
}

// noteAward records what became of the ledger row ApplyEventAndAward
// wrote (nil when the decision moved no points): in place, or refused as
// invalid input, which is counted as failed and logged.
func (r *run) noteAward(a *activities.AwardOutcome, logger log.Logger) {
	if a == nil {
		return
	}
	if a.Refused != "" {
		r.state.Failed++
		logger.Error("points could not be awarded", "kind", a.Row.Kind, "points", a.Row.Points, "error", a.Refused)
		return
	}
	r.state.setAwarded(a.Row.Kind)
	logger.Info("points awarded", "kind", a.Row.Kind, "points", a.Row.Points, "inserted", a.Inserted)
}

// admit reports whether e is a valid event of the run's order; an event
// that is not is counted as failed, logged and ignored.
func (r *run) admit(e fsm.Event, logger log.Logger) bool {
	if err := e.Validate(); err != nil {
		r.state.Failed++
		logger.Error("invalid event signalled, ignored", "error", err)
		r.showDetails("an invalid signal, ignored")
		return false
	}
	if e.OrderID != r.state.OrderID {
		r.state.Failed++
		logger.Error("event of another order signalled, ignored", "event_order_id", e.OrderID)
		r.showDetails(fmt.Sprintf("an event of order %s, ignored", e.OrderID))
		return false
	}
	return true
}

// behind reports whether the database's answer d shows an order older
// than the one the run knows: the database lost writes the run saw (it
// was restored from a backup), since the stored order only moves forward.
func (r *run) behind(d fsm.Decision) bool {
	if !r.verify || !r.state.Exists {
		return false
	}
	return d.Next.OrderID == "" || d.Next.Version < r.state.Order.Version
}

// resync replaces what the run knows of the order by what the database
// holds (LoadOrder), after the database showed that it is behind the run's
// memory while handling e.
func (r *run) resync(e fsm.Event, logger log.Logger) error {
	known, keys := r.state.Order.Version, len(r.state.Recorded)
	res, err := r.load(r.state.OrderID, SummaryResync)
	if err != nil {
		return err
	}
	r.adoptLoaded(res, true)
	if !r.state.Order.Status.Terminal() {
		r.state.TerminalAt = time.Time{}
	}
	r.state.Resyncs++
	logger.Warn("the database is behind what this run handled (restored from a backup?): order reloaded",
		"known_version", known, "known_keys", keys, "stored_version", r.state.Order.Version,
		"stored_keys", len(r.state.Recorded), "found", res.Found)
	r.showDetails(fmt.Sprintf("v%d %s → the database was behind this run: reloaded", e.Version, e.Status))
	return nil
}

// duplicate skips an event whose business key the run has recorded with
// the same content; with reconcile, it writes any ledger row still
// missing.
func (r *run) duplicate(e fsm.Event, logger log.Logger) error {
	r.state.Counts[fsm.Duplicate]++
	logger.Debug("duplicate event skipped")
	r.showDetails(fmt.Sprintf("v%d %s → duplicate, skipped", e.Version, e.Status))
	if r.reconcile {
		return r.reconcilePoints(logger)
	}
	return nil
}

// adopt records the database's decision on e (content hash hash) in the
// run's state, and returns the line the current details show for it, which
// notes where it differs from the workflow's own (local).
func (r *run) adopt(e fsm.Event, hash string, local fsm.Decision, res activities.ApplyEventResult, logger log.Logger) string {
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
		r.state.TerminalAt = workflow.Now(r.ctx)
	}
	return last
}

// logDecision logs the outcome of an applied event.
func (r *run) logDecision(res activities.ApplyEventResult, logger log.Logger) {
	d := res.Decision
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
}

// movePoints writes the ledger row the decision moves points with, then
// any other row the stored order is due.
func (r *run) movePoints(d fsm.Decision, version int64, logger log.Logger) error {
	if d.Points != fsm.PointsNone {
		if err := r.award(d.Points, d.PointsDelta, version, logger); err != nil {
			return err
		}
	}
	return r.reconcilePoints(logger)
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

// isNonRetryable reports whether err is an activity failure of one of the
// NonRetryableErrorTypes.
func isNonRetryable(err error) bool {
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && slices.Contains(api.NonRetryableErrorTypes(), appErr.Type())
}
