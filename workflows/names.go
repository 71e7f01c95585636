// Package workflows holds OrderWorkflow, the durable per-order serializer of
// orderflow, and the names the bridge and the worker share with it.
package workflows

// Names shared by the worker, the bridge and the tests.
const (
	// TaskQueue is the default task queue of OrderWorkflow.
	TaskQueue = "orderflow"
	// WorkflowType is the registered name of OrderWorkflow.
	WorkflowType = "OrderWorkflow"
	// SignalEvent delivers one fsm.Event to an order's workflow.
	SignalEvent = "order-event"
	// QueryState returns the workflow's State.
	QueryState = "state"
	// SearchAttributeOrderStatus is the Keyword search attribute that holds
	// the order's current status.
	SearchAttributeOrderStatus = "OrderStatus"
	// workflowIDPrefix prefixes the order ID in workflow IDs.
	workflowIDPrefix = "order:"
)

// WorkflowID returns the ID of the workflow that serializes the order's
// events: "order:{order_id}".
func WorkflowID(orderID string) string { return workflowIDPrefix + orderID }

// OrderIDFromWorkflowID returns the order ID of an OrderWorkflow ID, and
// false when id is not one.
func OrderIDFromWorkflowID(id string) (string, bool) {
	if len(id) <= len(workflowIDPrefix) || id[:len(workflowIDPrefix)] != workflowIDPrefix {
		return "", false
	}
	return id[len(workflowIDPrefix):], true
}
