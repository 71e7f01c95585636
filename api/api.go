// Package api is orderflow's Temporal contract, in one place: the workflow
// type and its IDs, the signals, the queries, the search attribute and the
// application error types that the workflow, the activities, the bridge and
// the operator command share. It imports nothing of the project, so every
// layer can use it. docs/design.md describes each. The default task queue
// is configuration: config.DefaultTaskQueue.
package api

import (
	"strings"

	"go.temporal.io/sdk/temporal"
)

const (
	// WorkflowType is the registered name of OrderWorkflow.
	WorkflowType = "OrderWorkflow"
	// SignalEvent delivers one order event to an order's workflow
	// (workflows.Delivery).
	SignalEvent = "order-event"
	// SignalEvents delivers several events of one order at once, in the
	// order the workflow is to handle them (workflows.Batch): the bridge
	// sends it when it holds more than one event of the order.
	SignalEvents = "order-events"
	// QueryState returns the workflow's state (workflows.State).
	QueryState = "state"
	// QueryMetadata is Temporal's built-in query of a workflow's user
	// metadata (go.temporal.io/api/sdk/v1.WorkflowMetadata): its current
	// details, which OrderWorkflow keeps up to date, as the UI shows them.
	QueryMetadata = "__temporal_workflow_metadata"
	// SearchAttributeOrderStatus is the Keyword search attribute that holds
	// the order's current status, so the UI lists orders by status.
	SearchAttributeOrderStatus = "OrderStatus"
	// workflowIDPrefix prefixes the order ID in workflow IDs.
	workflowIDPrefix = "order:"
)

// Activity type names, as histories record them: the names of the methods
// of activities.Activities, which the workflow calls by method value.
const (
	ActivityLoadOrder   = "LoadOrder"
	ActivityApplyEvent  = "ApplyEvent"
	ActivityAwardPoints = "AwardPoints"
	// ActivityApplyEventAndAward is ApplyEvent and, when the decision
	// moves points, AwardPoints as one step.
	ActivityApplyEventAndAward = "ApplyEventAndAward"
	// ActivityLoadOrderAndApply is LoadOrder, then ApplyEventAndAward: a
	// fresh run's first step.
	ActivityLoadOrderAndApply = "LoadOrderAndApply"
)

// OrderStatusKey is the typed key of the OrderStatus search attribute.
var OrderStatusKey = temporal.NewSearchAttributeKeyKeyword(SearchAttributeOrderStatus)

// WorkflowID returns the ID of the workflow that serializes the order's
// events: "order:{order_id}".
func WorkflowID(orderID string) string { return workflowIDPrefix + orderID }

// OrderIDFromWorkflowID returns the order ID of an OrderWorkflow ID, and
// false when id is not one.
func OrderIDFromWorkflowID(id string) (string, bool) {
	orderID, ok := strings.CutPrefix(id, workflowIDPrefix)
	return orderID, ok && orderID != ""
}

// Application error types of the activities' non-retryable errors.
const (
	// ErrTypeInvalidEvent: the event breaks the message contract.
	ErrTypeInvalidEvent = "InvalidEvent"
	// ErrTypeInvalidInput: any other argument is invalid.
	ErrTypeInvalidInput = "InvalidInput"
	// ErrTypeUnknownOrder: points were awarded for an order that has no row.
	ErrTypeUnknownOrder = "UnknownOrder"
)

// ErrTypeBadWorkflowID is the type of the error with which OrderWorkflow
// fails when its workflow ID is not an order's ("order:{order_id}").
const ErrTypeBadWorkflowID = "BadWorkflowID"

// NonRetryableErrorTypes are the activity error types that are final: the
// input is invalid, and trying again cannot help.
func NonRetryableErrorTypes() []string {
	return []string{ErrTypeInvalidEvent, ErrTypeInvalidInput, ErrTypeUnknownOrder}
}
