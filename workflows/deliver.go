package workflows

import (
	"context"
	"errors"
	"fmt"
	"slices"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/orderflow/orderflow/api"
	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/wire"
)

// ErrDeliver is wrapped by every error Deliver returns for an event that
// did not reach its workflow.
var ErrDeliver = errors.New("deliver order event")

// BlobSizeLimit is the Temporal server's default limit on one payload
// (dynamic config limit.blobSize.error, 2 MiB): a signal whose input is
// larger is refused with InvalidArgument "Blob data size exceeds limit.",
// and a request over gRPC's 4 MiB message limit with ResourceExhausted
// ("grpc: received message ... larger than max"). Both are permanent.
const BlobSizeLimit = 2 << 20

// SignalBudget bounds the encoded input of one signal the bridge sends
// (EncodedSize): the server's and the SDK's warning limit
// (limit.blobSize.warn, client.PayloadLimitOptions), a quarter of
// BlobSizeLimit. Any one delivery of a valid event fits in it (the
// contract bounds the body; see FuzzDelivery); a batch over it goes in
// several signals.
const SignalBudget = 512 << 10

// EncodedSize is the size of v as a signal's input: the payloads the SDK's
// default data converter makes of it, as the server measures them. Its
// error is the converter's when it cannot encode v (the SDK would fail the
// same way before sending).
func EncodedSize(v any) (int, error) {
	p, err := converter.GetDefaultDataConverter().ToPayloads(v)
	if err != nil {
		return 0, err
	}
	return p.Size(), nil
}

// StartOptions returns the options with which the bridge signal-starts an
// order's workflow: ID "order:{order_id}", the given task queue, an existing
// run receives the signal (USE_EXISTING), and a closed one may be followed by
// a fresh run (ALLOW_DUPLICATE), which rehydrates from PostgreSQL.
func StartOptions(taskQueue, orderID string) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID:                       api.WorkflowID(orderID),
		TaskQueue:                taskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
	}
}

// StartStatus is the status an order has after events, when the database
// has no row of it yet, if they hold its first version (1); "" otherwise.
// A run that SignalWithStart starts for those events starts with it as its
// OrderStatus search attribute (a search attribute set at the start is no
// billable action, an upsert is), and the run upserts the status only when
// the database says otherwise (ChangeLocalActivities version 6). The
// events must be valid (the caller parsed them).
func StartStatus(events ...fsm.Event) fsm.Status {
	if !slices.ContainsFunc(events, func(e fsm.Event) bool { return e.Version == 1 }) {
		return ""
	}
	var o *fsm.Order
	for _, e := range events {
		next := fsm.Decide(o, e).Next
		o = &next
	}
	return o.Status
}

// startOptions are StartOptions with the OrderStatus search attribute a
// new run of the order starts with after events (StartStatus), if any.
func startOptions(taskQueue, orderID string, events ...fsm.Event) client.StartWorkflowOptions {
	o := StartOptions(taskQueue, orderID)
	if st := StartStatus(events...); st != "" {
		o.TypedSearchAttributes = temporal.NewSearchAttributes(api.OrderStatusKey.ValueSet(string(st)))
	}
	return o
}

// Deliver hands one event to its order's workflow with SignalWithStart, with
// src, the message that carried it (nil when there is none): it
// signals the running workflow, or starts one (with params) and signals it.
// When Deliver returns nil the signal is in the workflow's history, so the
// caller may acknowledge the message. The event must be valid (the caller
// parsed it: message.Parse); the workflow validates what it receives.
func Deliver(ctx context.Context, c client.Client, taskQueue string, params Params, e fsm.Event, src *wire.Envelope) error {
	if taskQueue == "" {
		return fmt.Errorf("%w %s: empty task queue", ErrDeliver, e.Key())
	}
	id := api.WorkflowID(e.OrderID)
	_, err := c.SignalWithStartWorkflow(ctx, id, api.SignalEvent, Delivery{Event: e, Source: src},
		startOptions(taskQueue, e.OrderID, e), api.WorkflowType, Input{Params: params})
	if err != nil {
		return fmt.Errorf("%w %s to %s: %w", ErrDeliver, e.Key(), id, err)
	}
	return nil
}

// DeliverBatch hands several events of one order to its workflow in one
// SignalWithStart, to be handled in the order given: one order-events
// signal (Batch), or an order-event signal when there is only one. Every
// delivery must be an event of orderID. When DeliverBatch returns nil all
// of them are in the workflow's history.
func DeliverBatch(ctx context.Context, c client.Client, taskQueue string, params Params, orderID string, ds []Delivery) error {
	switch {
	case len(ds) == 0:
		return nil
	case len(ds) == 1:
		return Deliver(ctx, c, taskQueue, params, ds[0].Event, ds[0].Source)
	case taskQueue == "":
		return fmt.Errorf("%w: %d events of order %s: empty task queue", ErrDeliver, len(ds), orderID)
	}
	for _, d := range ds {
		if d.OrderID != orderID {
			return fmt.Errorf("%w: batch of order %s holds %s", ErrDeliver, orderID, d.Key())
		}
	}
	id := api.WorkflowID(orderID)
	events := make([]fsm.Event, len(ds))
	for i, d := range ds {
		events[i] = d.Event
	}
	_, err := c.SignalWithStartWorkflow(ctx, id, api.SignalEvents, Batch{Deliveries: ds},
		startOptions(taskQueue, orderID, events...), api.WorkflowType, Input{Params: params})
	if err != nil {
		return fmt.Errorf("%w: %d events of order %s (%s … %s) to %s: %w", ErrDeliver, len(ds), orderID,
			ds[0].Key(), ds[len(ds)-1].Key(), id, err)
	}
	return nil
}
