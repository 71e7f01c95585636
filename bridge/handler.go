// Package bridge turns one RocketMQ message into a durable effect: a
// SignalWithStart of the order's workflow for a valid event, a
// dead_letters row for an invalid message (message.Parse decides). Its
// Handler acknowledges a message only after that effect is durable and
// retries in-process, with backoff, while Temporal or PostgreSQL is down.
// A valid event that the duplicate filter (package dedup) confirms was
// already durably signalled or recorded is acked without a signal. The
// consumer that feeds it is internal/mq's; the process is starter.
package bridge

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/cenkalti/backoff/v5"
	"go.opentelemetry.io/otel/trace"

	"github.com/orderflow/orderflow/dedup"
	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/internal/spanattr"
	"github.com/orderflow/orderflow/message"
)

// Targets of the bridge's attempts, the values of the "target" label.
const (
	targetTemporal = "temporal"
	targetPostgres = "postgres"
)

// DeliverFunc hands a valid event to its order's workflow and returns once
// Temporal has accepted it (the signal is in the workflow's history).
type DeliverFunc func(ctx context.Context, e fsm.Event, src message.Envelope) error

// ParkFunc stores an invalid message in dead_letters and returns once the
// row is committed.
type ParkFunc func(ctx context.Context, dl message.DeadLetter) error

// RetryPolicy bounds the bridge's in-process retries of one message before
// it hands the message back to the broker.
type RetryPolicy struct {
	// For is the total time spent retrying one message.
	For time.Duration
	// Attempt bounds one attempt.
	Attempt time.Duration
	// Initial and Max bound the backoff between attempts.
	Initial, Max time.Duration
}

var DefaultRetry = RetryPolicy{For: 15 * time.Second, Attempt: 10 * time.Second, Initial: 200 * time.Millisecond, Max: 2 * time.Second}

// Handler turns one RocketMQ message into a durable effect: a signal in
// Temporal for a valid event, a dead_letters row for an invalid message.
// Handle returns nil (ack) only after that effect is durable, or when the
// duplicate filter confirms that it already is. Make one with NewHandler;
// it is safe for concurrent use.
type Handler struct {
	log     *slog.Logger
	deliver DeliverFunc
	// deliverMany, when set, delivers several events of one order at once.
	deliverMany DeliverManyFunc
	park        ParkFunc
	record      RecordFunc    // nil: sequence numbers are not recorded
	dedup       *dedup.Filter // nil: every valid event is signalled
	metrics     *Metrics
	retry       RetryPolicy
	now         func() time.Time
}

// NewHandler returns a Handler that delivers valid events with deliver,
// parks invalid messages with park, counts into m and retries as retry
// says.
func NewHandler(log *slog.Logger, deliver DeliverFunc, park ParkFunc, m *Metrics, retry RetryPolicy) *Handler {
	return &Handler{log: log, deliver: deliver, park: park, metrics: m, retry: retry, now: time.Now}
}

// WithDedup puts the duplicate filter f in front of the delivery: a valid
// event f confirms was already durably signalled or recorded with the same
// content is acked without a signal (its sequence number still recorded),
// and every event signalled is reported to f. Call it before h handles
// messages. It returns h.
func (h *Handler) WithDedup(f *dedup.Filter) *Handler {
	h.dedup = f
	return h
}

// Handle is the mq.Handler of the bridge: HandleBatch of one message.
func (h *Handler) Handle(ctx context.Context, m *primitive.MessageExt) error {
	return h.HandleBatch(ctx, []*primitive.MessageExt{m})
}

// Item is one valid event to deliver and the message that carried it.
type Item struct {
	Event  fsm.Event
	Source message.Envelope
}

// DeliverManyFunc hands several valid events of one order to its workflow
// at once, to be handled in the order given, and returns once Temporal has
// accepted all of them.
type DeliverManyFunc func(ctx context.Context, orderID string, items []Item) error

// WithDeliverMany makes h deliver the events of one order that arrive in one
// batch of messages with a single call of f (one signal) instead of one
// call of the DeliverFunc per event. Call it before h handles messages. It
// returns h.
func (h *Handler) WithDeliverMany(f DeliverManyFunc) *Handler {
	h.deliverMany = f
	return h
}

// pending is a message of a batch on its way to its effect.
type pending struct {
	m *primitive.MessageExt
	// ctx carries the message's span, "process <topic>", which continues
	// the trace its producer put in the message's properties.
	ctx    context.Context
	span   trace.Span
	log    *slog.Logger
	start  time.Time
	item   Item
	result string // set once the message's effect is durable
	err    error
}

// HandleBatch is the mq.BatchHandler of the bridge. Each message's
// handling is a span, "process <topic>", continuing the trace its producer
// put in the message's properties, with the order's attributes and the
// outcome (the result label of the metrics). It parks the invalid
// messages of msgs and drops the confirmed duplicates one by one, then
// delivers the valid events: those of one order together, in the batch's
// order (with the DeliverManyFunc, one signal per order), different orders
// at once. It returns nil (ack the batch) only when every message's effect
// is durable; otherwise the broker delivers the whole batch again, which
// the effects' idempotence makes harmless.
func (h *Handler) HandleBatch(ctx context.Context, msgs []*primitive.MessageExt) error {
	ps := make([]*pending, len(msgs))
	var orders []string
	byOrder := map[string][]*pending{}
	var firstErr error
	for i, m := range msgs {
		p := &pending{m: m, start: h.now()}
		p.ctx, p.span = startMessageSpan(ctx, m)
		ps[i] = p
		if firstErr != nil {
			p.err = firstErr
			continue
		}
		deliver, err := h.prepare(p.ctx, p)
		if err != nil {
			p.err, firstErr = err, err
			continue
		}
		if deliver {
			id := p.item.Event.OrderID
			if _, ok := byOrder[id]; !ok {
				orders = append(orders, id)
			}
			byOrder[id] = append(byOrder[id], p)
		}
	}
	if firstErr == nil && len(orders) > 0 {
		if len(orders) == 1 {
			h.deliverOrder(byOrder[orders[0]])
		} else {
			var wg sync.WaitGroup
			for _, id := range orders {
				wg.Go(func() {
					ps := byOrder[id]
					defer func() {
						// A bug must neither acknowledge a message nor end
						// the process (the consumer recovers the callback's
						// own goroutine, not this one).
						if r := recover(); r != nil {
							for _, p := range ps {
								p.result, p.err = "", fmt.Errorf("delivering the events of order %s panicked: %v", id, r)
							}
						}
					}()
					h.deliverOrder(ps)
				})
			}
			wg.Wait()
		}
	}
	var err error
	for _, p := range ps {
		if p.err == nil && p.result == "" {
			p.err = fmt.Errorf("message %s: not handled", p.m.MsgId)
		}
		result := p.result
		if p.err != nil {
			result = ResultRetry
			if err == nil {
				err = p.err
			}
		}
		failed(p.span, p.err)
		p.span.SetAttributes(spanattr.Outcome.String(result))
		p.span.End()
		h.metrics.messages.WithLabelValues(result).Inc()
		h.metrics.handleSeconds.WithLabelValues(result).Observe(h.now().Sub(p.start).Seconds())
		if result != ResultRetry && p.m.StoreTimestamp > 0 {
			h.metrics.storeLatency.Observe(h.now().Sub(time.UnixMilli(p.m.StoreTimestamp)).Seconds())
		}
	}
	return err
}

// prepare decides what becomes of p's message: an invalid one is parked
// and a confirmed duplicate acked (p.result is set), a valid event is to be
// delivered (true, with p.item set).
func (h *Handler) prepare(ctx context.Context, p *pending) (bool, error) {
	m := p.m
	log := h.log.With("msg_id", m.MsgId, "topic", m.Topic, "keys", m.GetKeys(), "tag", m.GetTags(),
		"reconsume_times", m.ReconsumeTimes)
	env := envelope(m)
	r := decode(ctx, env)
	if r.Rejection != nil {
		p.span.SetAttributes(spanattr.ParkReason.String(r.Rejection.Reason))
		err := step(ctx, "park", func(ctx context.Context) error {
			return h.attempt(ctx, log, targetPostgres, func(ctx context.Context) error { return h.park(ctx, r.DeadLetter) })
		})
		if err != nil {
			log.Error("cannot park invalid message; the broker will deliver it again", "reason", r.Rejection.Reason, "err", err)
			return false, err
		}
		h.metrics.rejections.WithLabelValues(r.Rejection.Kind).Inc()
		log.Warn("invalid message parked in dead_letters", "reason", r.Rejection.Reason, "body_bytes", len(m.Body))
		if !env.InflateRefused {
			if pid, seq := sequenceOf(env.Body); pid != "" {
				if err := h.recordSeq(ctx, log, pid, seq); err != nil {
					return false, err
				}
			}
		}
		p.result = ResultParked
		return false, nil
	}

	e := r.Event
	p.span.SetAttributes(spanattr.Event(e)...)
	log = log.With("order_id", e.OrderID, "version", e.Version, "status", string(e.Status), "event_id", e.EventID)
	p.log = log
	if len(r.Mismatch) > 0 {
		for _, f := range r.Mismatch {
			h.metrics.mismatches.WithLabelValues(f).Inc()
		}
		log.Warn("message keys or tag disagree with the body; the body is authoritative", "mismatch", r.Mismatch)
	}
	if h.dedup != nil {
		dctx, dspan := tracer.Start(ctx, "dedup")
		v := h.dedup.Check(dctx, e)
		dspan.SetAttributes(dedupAttributes(v)...)
		dspan.End()
		if v.Duplicate {
			log.Debug("duplicate acked without a signal", "confirmed_by", v.Tier)
			if err := h.recordSeq(ctx, log, e.ProducerID, e.Seq); err != nil {
				return false, err
			}
			p.result = ResultDuplicate
			return false, nil
		}
		if v.Conflict {
			log.Info("business key already delivered with other content; the workflow parks the conflict", "seen_by", v.Tier)
		}
	}
	p.item = Item{Event: e, Source: env}
	return true, nil
}

// deliverOrder delivers the events of one order, in order: all in one
// call of the DeliverManyFunc when there is one and several events, else
// one call of the DeliverFunc each. It sets each pending's result or err.
func (h *Handler) deliverOrder(ps []*pending) {
	var err error
	if h.deliverMany != nil && len(ps) > 1 {
		items := make([]Item, len(ps))
		for i, p := range ps {
			items[i] = p.item
		}
		// The signal carries the first message's trace; the others'
		// spans end at the bridge (design.md §2.9).
		log := ps[0].log.With("batch", len(ps))
		err = step(ps[0].ctx, "deliver", func(ctx context.Context) error {
			return h.attempt(ctx, log, targetTemporal, func(ctx context.Context) error {
				return h.deliverMany(ctx, ps[0].item.Event.OrderID, items)
			})
		})
		if err != nil {
			log.Error("cannot deliver events to Temporal; the broker will deliver them again", "err", err)
		}
	}
	for _, p := range ps {
		if err != nil {
			p.err = err
			continue
		}
		if h.deliverMany == nil || len(ps) == 1 {
			e, env := p.item.Event, p.item.Source
			err = step(p.ctx, "deliver", func(ctx context.Context) error {
				return h.attempt(ctx, p.log, targetTemporal, func(ctx context.Context) error { return h.deliver(ctx, e, env) })
			})
			if err != nil {
				p.log.Error("cannot deliver event to Temporal; the broker will deliver it again", "err", err)
				p.err = err
				continue
			}
		}
		e := p.item.Event
		if h.dedup != nil {
			h.dedup.Delivered(p.ctx, e)
		}
		h.metrics.eventLatency.Observe(h.now().Sub(e.OccurredAt).Seconds())
		p.log.Debug("event signalled")
		if err = h.recordSeq(p.ctx, p.log, e.ProducerID, e.Seq); err != nil {
			p.err = err
			continue
		}
		p.result = ResultSignalled
	}
}

// attempt runs f until it succeeds, the retry budget is spent or ctx is done,
// with exponential backoff (and jitter) between attempts.
func (h *Handler) attempt(ctx context.Context, log *slog.Logger, target string, f func(context.Context) error) error {
	n := 0
	var last error
	_, err := backoff.Retry(ctx, func() (struct{}, error) {
		n++
		actx, cancel := context.WithTimeout(ctx, h.retry.Attempt)
		defer cancel()
		if err := f(actx); err != nil {
			h.metrics.attemptErrors.WithLabelValues(target).Inc()
			last = err
			return struct{}{}, err
		}
		return struct{}{}, nil
	},
		backoff.WithBackOff(&backoff.ExponentialBackOff{InitialInterval: h.retry.Initial, Multiplier: 2,
			MaxInterval: h.retry.Max, RandomizationFactor: 0.2}),
		backoff.WithMaxElapsedTime(h.retry.For),
		backoff.WithNotify(func(err error, wait time.Duration) {
			log.Warn("attempt failed; retrying", "target", target, "attempt", n, "backoff", wait, "err", err)
		}))
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("%s: attempt %d: %w (stopping: %w)", target, n, last, ctx.Err())
	}
	return fmt.Errorf("%s: gave up after %d attempts: %w", target, n, err)
}

// envelope is the message as received, for message.Parse.
func envelope(m *primitive.MessageExt) message.Envelope {
	var storedAt time.Time
	if m.StoreTimestamp > 0 {
		storedAt = time.UnixMilli(m.StoreTimestamp).UTC()
	}
	return message.NewEnvelope(m.Topic, originalMessageID(m), m.GetKeys(), m.GetTags(), m.Body, storedAt,
		mq.InflateRefused(m))
}

// originalMessageID is the ID the producer's send returned: a message the
// broker delivers again through the retry topic carries a new ID and the
// original one as a property.
func originalMessageID(m *primitive.MessageExt) string {
	if id := m.GetProperty(primitive.PropertyOriginMessageId); id != "" {
		return id
	}
	return m.MsgId
}
