// Package spanattr names the attributes orderflow sets on its OpenTelemetry
// spans, so that the producer, the bridge and the activities describe an
// event alike (docs/design.md, Tracing).
package spanattr

import (
	"go.opentelemetry.io/otel/attribute"

	"github.com/orderflow/orderflow/fsm"
)

// orderflow's own attributes.
const (
	OrderID        = attribute.Key("orderflow.order_id")
	Version        = attribute.Key("orderflow.version")
	Status         = attribute.Key("orderflow.status")
	EventID        = attribute.Key("orderflow.event_id")
	ProducerID     = attribute.Key("orderflow.producer_id")
	Seq            = attribute.Key("orderflow.seq")
	Outcome        = attribute.Key("orderflow.outcome")
	Reason         = attribute.Key("orderflow.reason")
	ParkReason     = attribute.Key("orderflow.park_reason")
	Rejection      = attribute.Key("orderflow.rejection")
	Repeat         = attribute.Key("orderflow.repeat")
	ReconsumeTimes = attribute.Key("orderflow.reconsume_times")
	DedupVerdict   = attribute.Key("orderflow.dedup.verdict")
	DedupTier      = attribute.Key("orderflow.dedup.tier")
	PointsKind     = attribute.Key("orderflow.points.kind")
	Points         = attribute.Key("orderflow.points")
	PointsInserted = attribute.Key("orderflow.points.inserted")
)

// OpenTelemetry's messaging attributes.
const (
	MessagingSystem      = attribute.Key("messaging.system")
	MessagingOperation   = attribute.Key("messaging.operation.type")
	MessagingDestination = attribute.Key("messaging.destination.name")
	MessagingMessageID   = attribute.Key("messaging.message.id")
	RocketMQKeys         = attribute.Key("messaging.rocketmq.message.keys")
	RocketMQTag          = attribute.Key("messaging.rocketmq.message.tag")
)

// Event returns the attributes that name an event: order ID, version,
// status and event ID.
func Event(e fsm.Event) []attribute.KeyValue {
	return []attribute.KeyValue{
		OrderID.String(e.OrderID),
		Version.Int64(e.Version),
		Status.String(string(e.Status)),
		EventID.String(e.EventID),
	}
}
