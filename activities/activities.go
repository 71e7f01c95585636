// Package activities holds orderflow's Temporal activities: thin adapters
// that run the storage layer's idempotent writes for OrderWorkflow and turn
// its errors into Temporal's terms. Input that breaks the contract becomes a
// non-retryable application error of one of the types in package api;
// database trouble stays a plain error, which Temporal retries.
// docs/design.md describes what each write guarantees.
package activities

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/temporal"

	"github.com/orderflow/orderflow/api"
	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/spanattr"
	"github.com/orderflow/orderflow/store"
	"github.com/orderflow/orderflow/wire"
)

// Recorder receives the activities' business metrics. Implementations must
// be safe for concurrent use. Observations are made only after the write
// that caused them committed.
type Recorder interface {
	// ObserveOutcome counts one ApplyEvent call by outcome: the decision
	// recorded for a new business key; Duplicate for a repeat of a
	// recorded one (redelivery, or a retry after a lost completion);
	// Conflict for each conflicting delivery.
	ObserveOutcome(outcome fsm.Outcome)
	// ObservePoints counts one points ledger row inserted, with its signed
	// points.
	ObservePoints(kind fsm.PointsKind, points int64)
	// ObserveStoreToRow is, for an event whose business key this call
	// recorded first, the time from the broker storing its message to the
	// row's commit.
	ObserveStoreToRow(d time.Duration)
}

// Activities holds the dependencies of orderflow's activities. Register it
// with a Temporal worker (worker.RegisterActivity(a)); its exported methods
// are the activities, which OrderWorkflow calls by method value.
type Activities struct {
	// Store is the orderflow database.
	Store *store.Store
	// Metrics, when not nil, receives business metrics.
	Metrics Recorder
	// Topic is the RocketMQ topic recorded on a conflicting event's dead
	// letter when the signal did not carry its message; empty when unknown.
	Topic string
}

// LoadOrderResult is the stored order, as a fresh workflow run rehydrates it.
type LoadOrderResult = store.Loaded

// ApplyEventInput is one event to apply.
type ApplyEventInput struct {
	Event fsm.Event `json:"event"`
	// Source is the message that carried the event, as received; a
	// conflicting event is parked with it. Nil when unknown.
	Source *wire.Envelope `json:"source,omitempty"`
	// Known, when not nil, is the order's row as the caller knows it, the
	// event's business key being unrecorded as far as it knows: the
	// decision is taken against it and the write checks it
	// (store.Store.ApplyKnown), which saves a read. Nil: the store reads.
	Known *KnownOrder `json:"known,omitempty"`
}

// KnownOrder is the order's row as a caller of ApplyEvent knows it.
type KnownOrder = store.Known

// ApplyEventResult is the authoritative decision taken inside the database
// write. A repeat of the same business key returns the first outcome.
type ApplyEventResult = store.Applied

// AwardPointsInput is one points ledger row to insert.
type AwardPointsInput = store.PointsRow

// AwardPointsResult says whether this call inserted the row (false when a
// previous delivery or retry already had).
type AwardPointsResult struct {
	Inserted bool `json:"inserted"`
}

// LoadOrder returns the stored order and the content hash of every
// business key recorded for it (store.Store.LoadOrder).
func (a *Activities) LoadOrder(ctx context.Context, orderID string) (LoadOrderResult, error) {
	trace.SpanFromContext(ctx).SetAttributes(spanattr.OrderID.String(orderID))
	res, err := a.Store.LoadOrder(ctx, orderID)
	return res, temporalError(err, api.ErrTypeInvalidInput)
}

// ApplyEvent applies one event exactly once per business key and returns
// the authoritative decision (store.Store.ApplyEvent, or ApplyKnown with
// in.Known). The span of its run gets the event's order ID, version and
// status, and the outcome.
func (a *Activities) ApplyEvent(ctx context.Context, in ApplyEventInput) (ApplyEventResult, error) {
	src := wire.Envelope{Topic: a.Topic}
	if in.Source != nil {
		src = *in.Source
	}
	span := trace.SpanFromContext(ctx)
	span.SetAttributes(spanattr.OrderID.String(in.Event.OrderID), spanattr.Version.Int64(in.Event.Version),
		spanattr.Status.String(string(in.Event.Status)), spanattr.MessagingMessageID.String(src.MessageID))
	var res store.Applied
	var err error
	if in.Known != nil {
		res, err = a.Store.ApplyKnown(ctx, in.Event, src, *in.Known)
	} else {
		res, err = a.Store.ApplyEvent(ctx, in.Event, src)
	}
	if err != nil {
		return res, temporalError(err, api.ErrTypeInvalidEvent)
	}
	span.SetAttributes(spanattr.Outcome.String(string(res.Decision.Outcome)), spanattr.Repeat.Bool(res.Repeat))
	if res.Decision.Reason != "" {
		span.SetAttributes(spanattr.Reason.String(res.Decision.Reason))
	}
	if a.Metrics != nil {
		if res.Repeat {
			a.Metrics.ObserveOutcome(fsm.Duplicate)
		} else {
			a.Metrics.ObserveOutcome(res.Decision.Outcome)
			if !src.StoredAt.IsZero() {
				a.Metrics.ObserveStoreToRow(time.Since(src.StoredAt))
			}
		}
	}
	return res, nil
}

// AwardPoints inserts one points ledger row, at most once per order and
// kind (store.Store.AwardPoints).
func (a *Activities) AwardPoints(ctx context.Context, in AwardPointsInput) (AwardPointsResult, error) {
	span := trace.SpanFromContext(ctx)
	span.SetAttributes(spanattr.OrderID.String(in.OrderID), spanattr.Version.Int64(in.Version),
		spanattr.PointsKind.String(string(in.Kind)), spanattr.Points.Int64(in.Points))
	inserted, err := a.Store.AwardPoints(ctx, in)
	if err != nil {
		return AwardPointsResult{}, temporalError(err, api.ErrTypeInvalidInput)
	}
	span.SetAttributes(spanattr.PointsInserted.Bool(inserted))
	if inserted && a.Metrics != nil {
		a.Metrics.ObservePoints(in.Kind, in.Points)
	}
	return AwardPointsResult{Inserted: inserted}, nil
}

// ApplyEventAndAwardResult is ApplyEvent's decision and, when the
// decision moves points, what became of the ledger row it moves them with.
type ApplyEventAndAwardResult struct {
	ApplyEventResult
	// Award is nil when the decision moves no points.
	Award *AwardOutcome `json:"award,omitempty"`
}

// AwardOutcome is the ledger row a decision moves points with, and whether
// this call inserted it; Refused is the reason when the store refused the
// row as invalid input (a non-retryable failure, which does not fail the
// decision already committed).
type AwardOutcome struct {
	Row      AwardPointsInput `json:"row"`
	Inserted bool             `json:"inserted"`
	Refused  string           `json:"refused,omitempty"`
}

// ApplyEventAndAward applies one event (ApplyEvent) and, when the decision
// moves points, inserts the ledger row it moves them with (AwardPoints):
// one activity, so that a workflow task records one step for both. They
// are two transactions, each idempotent: a retry after the second failed
// finds the event recorded (a repeat, returning the first decision) and
// inserts the row then. A row the store refuses as invalid is reported in
// Award.Refused, not as the activity's failure: the decision stands.
func (a *Activities) ApplyEventAndAward(ctx context.Context, in ApplyEventInput) (ApplyEventAndAwardResult, error) {
	res, err := a.ApplyEvent(ctx, in)
	if err != nil {
		return ApplyEventAndAwardResult{}, err
	}
	out := ApplyEventAndAwardResult{ApplyEventResult: res}
	d := res.Decision
	if d.Points == fsm.PointsNone {
		return out, nil
	}
	row := AwardPointsInput{OrderID: in.Event.OrderID, UserID: d.Next.PointsUser(), Kind: d.Points,
		Points: d.PointsDelta, Version: in.Event.Version}
	pr, err := a.AwardPoints(ctx, row)
	out.Award = &AwardOutcome{Row: row, Inserted: pr.Inserted}
	if err != nil {
		var appErr *temporal.ApplicationError
		if !errors.As(err, &appErr) || !appErr.NonRetryable() {
			return ApplyEventAndAwardResult{}, err
		}
		out.Award.Refused = err.Error()
	}
	return out, nil
}

// LoadOrderAndApplyResult is what LoadOrderAndApply found and did: the
// order as stored before the event, and ApplyEventAndAward's result.
type LoadOrderAndApplyResult struct {
	Loaded LoadOrderResult `json:"loaded"`
	ApplyEventAndAwardResult
}

// LoadOrderAndApply loads the order (LoadOrder), then applies the event and
// writes the ledger row its decision moves points with
// (ApplyEventAndAward): a fresh workflow run's first step, one instead of
// two. When the loaded order has not recorded the event's business key,
// the decision is taken against the loaded order (in.Known), which saves
// the read; otherwise the store reads again, as for a repeat. A retry
// loads again, so that Loaded may show the event recorded by an earlier
// attempt of the same step.
func (a *Activities) LoadOrderAndApply(ctx context.Context, in ApplyEventInput) (LoadOrderAndApplyResult, error) {
	loaded, err := a.LoadOrder(ctx, in.Event.OrderID)
	if err != nil {
		return LoadOrderAndApplyResult{}, err
	}
	in.Known = nil
	if _, recorded := loaded.Versions[in.Event.Version]; !recorded {
		in.Known = &KnownOrder{Found: loaded.Found, Order: loaded.Order}
	}
	res, err := a.ApplyEventAndAward(ctx, in)
	if err != nil {
		return LoadOrderAndApplyResult{}, err
	}
	return LoadOrderAndApplyResult{Loaded: loaded, ApplyEventAndAwardResult: res}, nil
}

// temporalError returns err as Temporal should see it: input the store
// refused as a non-retryable application error of type invalidType (or
// ErrTypeUnknownOrder), anything else unchanged, so that it is retried.
func temporalError(err error, invalidType string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrUnknownOrder):
		return temporal.NewNonRetryableApplicationError(err.Error(), api.ErrTypeUnknownOrder, err)
	case errors.Is(err, store.ErrInvalid):
		return temporal.NewNonRetryableApplicationError(err.Error(), invalidType, err)
	}
	return err
}
