package producer

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/internal/spanattr"
)

// tracer is the producer's tracer from OpenTelemetry's global provider, a
// no-op unless the process set one. It is looked up at each use: a
// tracer kept from before a later SetTracerProvider would keep sending
// to the first provider set.
func tracer() trace.Tracer { return otel.Tracer("github.com/orderflow/orderflow/producer") }

// startSend starts the span of one Send, "send <topic>", a child of the
// span in ctx. Its context is what the message carries (traced).
func startSend(ctx context.Context, topic string, e fsm.Event) (context.Context, trace.Span) {
	return tracer().Start(ctx, "send "+topic,
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(
			spanattr.MessagingSystem.String("rocketmq"),
			spanattr.MessagingOperation.String("send"),
			spanattr.MessagingDestination.String(topic),
			spanattr.OrderID.String(e.OrderID),
			spanattr.Version.Int64(e.Version),
			spanattr.Status.String(string(e.Status)),
		))
}

// traced puts the W3C trace context of the span in ctx in m's properties
// (traceparent, tracestate), so that the bridge continues the trace: when
// the caller traces, the message's trace is the caller's.
func traced(ctx context.Context, m mq.Message) mq.Message {
	mq.InjectTrace(ctx, &m)
	return m
}

// endSend ends span with what the send came to.
func endSend(span trace.Span, s Sent, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	} else {
		span.SetAttributes(spanattr.MessagingMessageID.String(s.MessageID),
			spanattr.ProducerID.String(s.Event.ProducerID), spanattr.Seq.Int64(s.Event.Seq))
	}
	span.End()
}
