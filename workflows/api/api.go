// Package api forwards to package api at the top of the module, where
// orderflow's Temporal names moved so that every layer can import them.
// These names remain until the last caller imports the new package.
package api

import "github.com/orderflow/orderflow/api"

// Names of the Temporal contract: see package api.
const (
	WorkflowType               = api.WorkflowType
	SignalEvent                = api.SignalEvent
	SignalEvents               = api.SignalEvents
	QueryState                 = api.QueryState
	QueryMetadata              = api.QueryMetadata
	SearchAttributeOrderStatus = api.SearchAttributeOrderStatus
	ActivityLoadOrder          = api.ActivityLoadOrder
	ActivityApplyEvent         = api.ActivityApplyEvent
	ActivityAwardPoints        = api.ActivityAwardPoints
	ErrTypeInvalidEvent        = api.ErrTypeInvalidEvent
	ErrTypeInvalidInput        = api.ErrTypeInvalidInput
	ErrTypeUnknownOrder        = api.ErrTypeUnknownOrder
)

// OrderStatusKey is api.OrderStatusKey.
var OrderStatusKey = api.OrderStatusKey

// WorkflowID is api.WorkflowID.
func WorkflowID(orderID string) string { return api.WorkflowID(orderID) }

// OrderIDFromWorkflowID is api.OrderIDFromWorkflowID.
func OrderIDFromWorkflowID(id string) (string, bool) { return api.OrderIDFromWorkflowID(id) }

// NonRetryableErrorTypes is api.NonRetryableErrorTypes.
func NonRetryableErrorTypes() []string { return api.NonRetryableErrorTypes() }
