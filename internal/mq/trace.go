package mq

import (
	"context"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"go.opentelemetry.io/otel/propagation"
)

// traceContext is the propagation of a trace through a message: the W3C
// trace context (user properties traceparent and tracestate), whatever
// propagators the process has set globally, so that producers and the
// bridge agree on it by contract.
var traceContext propagation.TraceContext

// InjectTrace adds the W3C trace context of the span in ctx to m's user
// properties (traceparent, and tracestate when there is one). It adds
// nothing when ctx holds no valid span context.
func InjectTrace(ctx context.Context, m *Message) {
	c := propagation.MapCarrier{}
	traceContext.Inject(ctx, c)
	if len(c) == 0 {
		return
	}
	if m.Properties == nil {
		m.Properties = make(map[string]string, len(c))
	}
	for k, v := range c {
		m.Properties[k] = v
	}
}

// ExtractTrace returns ctx with the W3C trace context m carries in its user
// properties as the remote parent of the spans started from it; ctx as it
// is when m carries none, or a malformed one.
func ExtractTrace(ctx context.Context, m *primitive.MessageExt) context.Context {
	return traceContext.Extract(ctx, messageCarrier{m})
}

// messageCarrier reads a received message's user properties.
type messageCarrier struct{ m *primitive.MessageExt }

func (c messageCarrier) Get(key string) string { return c.m.GetProperty(key) }
func (c messageCarrier) Set(string, string)    {}
func (c messageCarrier) Keys() []string        { return traceContext.Fields() }
