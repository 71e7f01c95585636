package bridge

import (
	"context"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/orderflow/orderflow/dedup"
	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/internal/spanattr"
	"github.com/orderflow/orderflow/message"
	"github.com/orderflow/orderflow/wire"
)

// tracer is the bridge's tracer from OpenTelemetry's global provider, a
// no-op unless the process set one. It is looked up at each use: a
// tracer kept from before a later SetTracerProvider would keep sending
// to the first provider set.
func tracer() trace.Tracer { return otel.Tracer("github.com/orderflow/orderflow/bridge") }

// startMessageSpan starts the span of one delivery of m, a child of the
// trace context its producer put in its properties (a new trace when there
// is none).
func startMessageSpan(ctx context.Context, m *primitive.MessageExt) (context.Context, trace.Span) {
	ctx = mq.ExtractTrace(ctx, m)
	return tracer().Start(ctx, "process "+m.Topic,
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			spanattr.MessagingSystem.String("rocketmq"),
			spanattr.MessagingOperation.String("process"),
			spanattr.MessagingDestination.String(m.Topic),
			spanattr.MessagingMessageID.String(originalMessageID(m)),
			spanattr.RocketMQKeys.String(m.GetKeys()),
			spanattr.RocketMQTag.String(m.GetTags()),
			spanattr.ReconsumeTimes.Int64(int64(m.ReconsumeTimes)),
		))
}

// decode is message.Parse in a span: the event's attributes, or the
// rejection's kind and reason.
func decode(ctx context.Context, env wire.Envelope) message.Received {
	_, span := tracer().Start(ctx, "decode")
	defer span.End()
	r := message.Parse(env)
	if r.Rejection != nil {
		span.SetAttributes(spanattr.Rejection.String(r.Rejection.Kind), spanattr.ParkReason.String(r.Rejection.Reason))
	} else {
		span.SetAttributes(spanattr.Event(r.Event)...)
	}
	return r
}

// step runs f in a child span named name of the span in ctx, recording its
// error.
func step(ctx context.Context, name string, f func(context.Context) error) error {
	ctx, span := tracer().Start(ctx, name)
	defer span.End()
	err := f(ctx)
	failed(span, err)
	return err
}

// failed records err, if any, on span and marks it failed.
func failed(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
}

// dedupAttributes describe the duplicate filter's answer: duplicate,
// in_flight (the same event is being delivered), conflict or new, and the
// tier that decided.
func dedupAttributes(v dedup.Admission) []attribute.KeyValue {
	verdict := "new"
	switch {
	case v.Duplicate:
		verdict = "duplicate"
	case v.Follow != nil:
		verdict = "in_flight"
	case v.Conflict:
		verdict = "conflict"
	}
	attrs := []attribute.KeyValue{spanattr.DedupVerdict.String(verdict)}
	if v.Tier != "" {
		attrs = append(attrs, spanattr.DedupTier.String(v.Tier))
	}
	return attrs
}
