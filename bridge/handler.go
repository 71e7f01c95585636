// Package bridge turns one RocketMQ message into a durable effect: a
// SignalWithStart of the order's workflow for a valid event, a
// dead_letters row for an invalid message (message.Parse decides) or for a
// valid event the engine refuses for good or that could not be delivered
// for longer than a bound (undeliverable). Its Handler acknowledges a
// message only after that effect is durable. Every error it meets has a
// class (package errclass): a transient one is retried in-process, with
// backoff, then the message goes back to the broker; a permanent one stops
// the retries at once. A valid event that the duplicate filter (package
// dedup) confirms was already durably signalled or recorded is acked
// without a signal, and so is a copy of an event this process was
// delivering, once that delivery succeeded. The consumer that feeds it is
// internal/mq's; the process is starter.
package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/cenkalti/backoff/v5"
	"go.opentelemetry.io/otel/trace"

	"github.com/orderflow/orderflow/dedup"
	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/errclass"
	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/internal/spanattr"
	"github.com/orderflow/orderflow/wire"
)

// Targets of the bridge's attempts, the values of the "target" label.
const (
	targetTemporal = "temporal"
	targetPostgres = "postgres"
)

// DeliverFunc hands a valid event to its order's workflow and returns once
// Temporal has accepted it (the signal is in the workflow's history).
type DeliverFunc func(ctx context.Context, e fsm.Event, src wire.Envelope) error

// ParkFunc stores a message in dead_letters (an invalid one, or an
// undeliverable event) and returns once the row is committed.
type ParkFunc func(ctx context.Context, dl wire.DeadLetter) error

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
	receipts    ReceiptFunc   // nil: receipts are not recorded
	dedup       *dedup.Filter // nil: every valid event is signalled
	metrics     *Metrics
	retry       RetryPolicy
	now         func() time.Time
	// bound: a valid event whose message has been failing this long
	// (mq.Failing at maxLevel) is parked as undeliverable; 0: never.
	bound    time.Duration
	maxLevel int
	// size measures an event in a signal; a DeliverManyFunc signal holds
	// at most budget bytes of them. nil or 0: no bound.
	size   SizeFunc
	budget int
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
// a copy of an event h is delivering at the time waits for that delivery
// and is acked without a signal once it succeeded, and every event
// signalled is reported to f. Call it before h handles messages. It
// returns h.
func (h *Handler) WithDedup(f *dedup.Filter) *Handler {
	h.dedup = f
	return h
}

// WithDeliveryBound makes h park a valid event it cannot deliver (the
// error is transient, the retries are spent) in dead_letters as
// undeliverable, "undeliverable: not delivered for <d>: <last error>", once
// its message has been failing for at least after: mq.Failing of the
// message, whose consumer caps its redelivery delay at maxRetryDelayLevel.
// The message is then acked instead of going back to the broker, so that
// no message is retried for ever (nor reaches the broker's %DLQ%). Call it
// before h handles messages. It returns h.
func (h *Handler) WithDeliveryBound(after time.Duration, maxRetryDelayLevel int) *Handler {
	h.bound, h.maxLevel = after, maxRetryDelayLevel
	return h
}

// SizeFunc is the encoded size, in bytes, of an event in a signal;
// its error says the event cannot be encoded at all.
type SizeFunc func(Item) (int, error)

// WithSignalBudget makes h put the events of one order that go to the
// DeliverManyFunc in as many signals as it takes for each to hold at most
// budget bytes, as size measures them, in order; an event alone over the
// budget (or that size cannot measure) goes in a signal of its own. Call it
// before h handles messages. It returns h.
func (h *Handler) WithSignalBudget(size SizeFunc, budget int) *Handler {
	h.size, h.budget = size, budget
	return h
}

// Handle is the mq.Handler of the bridge: HandleBatch of one message.
func (h *Handler) Handle(ctx context.Context, m *primitive.MessageExt) error {
	return h.HandleBatch(ctx, []*primitive.MessageExt{m})
}

// Item is one valid event to deliver and the message that carried it.
type Item struct {
	Event  fsm.Event
	Source wire.Envelope
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
	// lead is the message's entry in the duplicate filter's in-flight
	// table: its copies in this process follow its delivery.
	lead *dedup.Delivery
	// follow is another callback's delivery of the same event, whose
	// outcome the message waits for.
	follow *dedup.Delivery
	// shares is the message of the same batch, with the same event, whose
	// delivery this one shares.
	shares *pending
	// delivered: the event is durably signalled.
	delivered bool
	// seq: the message is acked as signalled or duplicate once its
	// sequence number is recorded (recordSeqs, at the end of the batch).
	seq bool
	// undelivered is the transient error that kept the event from its
	// workflow this time (err holds it too, unless the message was
	// parked as undeliverable since).
	undelivered error
	// parked is the reason under which the event was parked as
	// undeliverable; a copy sharing its delivery is parked with it.
	parked string
}

// orderGroups are valid events to deliver, by order, in the batch's order.
type orderGroups struct {
	ids []string
	by  map[string][]*pending
}

func (g *orderGroups) add(p *pending) {
	id := p.item.Event.OrderID
	if g.by == nil {
		g.by = map[string][]*pending{}
	}
	if _, ok := g.by[id]; !ok {
		g.ids = append(g.ids, id)
	}
	g.by[id] = append(g.by[id], p)
}

// HandleBatch is the mq.BatchHandler of the bridge. Each message's
// handling is a span, "process <topic>", continuing the trace its producer
// put in the message's properties, with the order's attributes and the
// outcome (the result label of the metrics). It parks the invalid
// messages of msgs and drops the confirmed duplicates one by one, then
// delivers the valid events: those of one order together, in the batch's
// order (with the DeliverManyFunc, one signal per order), different orders
// at once. A copy of an event this process is delivering right now (the
// duplicate filter's in-flight table) is not delivered again: a copy of an
// earlier message of the batch shares that message's delivery and fate; a
// copy of another callback's delivery waits for it once the batch's own
// deliveries are done, is acked as a duplicate when it succeeded, and is
// delivered otherwise. HandleBatch returns nil (ack the batch) only when
// every message's effect is durable; otherwise the broker delivers the
// whole batch again, which the effects' idempotence makes harmless.
func (h *Handler) HandleBatch(ctx context.Context, msgs []*primitive.MessageExt) error {
	ps := make([]*pending, len(msgs))
	// Whatever happens (a failure, a panic), no entry of the in-flight
	// table outlives the batch: copies waiting for it then deliver
	// themselves.
	defer releaseLeads(ps)
	var own orderGroups
	var followers []*pending
	leads := map[*dedup.Delivery]*pending{}
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
		switch {
		case p.follow != nil:
			if lead, ok := leads[p.follow]; ok {
				p.shares, p.follow = lead, nil
			} else {
				followers = append(followers, p)
			}
		case deliver:
			if p.lead != nil {
				leads[p.lead] = p
			}
			own.add(p)
		}
	}
	if firstErr == nil {
		h.deliverAll(own)
		// The batch's own deliveries are over: only now may it wait for
		// others', which never wait for anything, so no two batches wait
		// for each other.
		releaseLeads(ps)
		h.awaitFollowed(ctx, ps, followers)
		for _, p := range ps {
			if p.shares != nil {
				h.share(p)
			}
		}
	}
	if firstErr == nil {
		h.recordSeqs(ps)
		h.settleReceipts(ctx, ps)
	}
	var err error
	for _, p := range ps {
		if p.err == nil && p.result == "" {
			p.err = fmt.Errorf("message %s: not handled", p.m.MsgId)
			if firstErr != nil {
				p.err = fmt.Errorf("message %s: not handled: another message of the batch failed: %w", p.m.MsgId, firstErr)
			}
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
			stored := time.UnixMilli(p.m.StoreTimestamp)
			h.metrics.storeLatency.Observe(h.now().Sub(stored).Seconds())
			if p.m.BornTimestamp > 0 {
				h.metrics.bornToStore.Observe(max(stored.Sub(time.UnixMilli(p.m.BornTimestamp)), 0).Seconds())
			}
		}
	}
	return err
}

// releaseLeads ends the in-flight entries of ps that are still open: their
// events were not delivered (an entry of a delivered event is ended when
// its signal succeeded).
func releaseLeads(ps []*pending) {
	for _, p := range ps {
		if p != nil && p.lead != nil {
			p.lead.Done(false)
		}
	}
}

// deliverAll delivers the events of g: those of one order with
// deliverOrder, different orders at once.
func (h *Handler) deliverAll(g orderGroups) {
	switch len(g.ids) {
	case 0:
		return
	case 1:
		h.deliverOrder(g.by[g.ids[0]])
		return
	}
	var wg sync.WaitGroup
	for _, id := range g.ids {
		wg.Go(func() {
			ps := g.by[id]
			defer func() {
				// A bug must neither acknowledge a message nor end the
				// process (the consumer recovers the callback's own
				// goroutine, not this one).
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

// awaitFollowed settles the followers, messages carrying an event another
// callback of this process was delivering: each waits for that delivery,
// at most the retry budget, and is acked as a duplicate when it succeeded;
// otherwise it is delivered like any new event (copies of one failed
// delivery together, the later ones sharing the first's). When a message
// of ps failed already, the batch goes back to the broker whatever
// happens, and the followers fail with it without waiting.
func (h *Handler) awaitFollowed(ctx context.Context, ps, followers []*pending) {
	if len(followers) == 0 {
		return
	}
	for _, p := range ps {
		if p.err != nil {
			for _, f := range followers {
				f.err = fmt.Errorf("message %s: another message of the batch failed: %w", f.m.MsgId, p.err)
			}
			return
		}
	}
	wctx, cancel := context.WithTimeout(ctx, h.retry.For)
	defer cancel()
	var again orderGroups
	first := map[*dedup.Delivery]*pending{}
	for _, p := range followers {
		if p.follow.Wait(wctx) {
			h.ackDuplicate(p)
			continue
		}
		if f, ok := first[p.follow]; ok {
			p.shares = f
			continue
		}
		first[p.follow] = p
		p.log.Info("the delivery of the same event by another callback did not succeed in time; delivering it")
		again.add(p)
	}
	h.deliverAll(again)
}

// share settles p, which shares the delivery of p.shares: a duplicate once
// that delivery succeeded, parked with it when it was parked as
// undeliverable, failed with it otherwise.
func (h *Handler) share(p *pending) {
	switch s := p.shares; {
	case s.delivered:
		h.ackDuplicate(p)
	case s.parked != "":
		h.parkUndeliverable(p, s.parked)
	case s.err != nil:
		p.err = fmt.Errorf("message %s: the delivery of message %s, with the same event, failed: %w", p.m.MsgId, s.m.MsgId, s.err)
	default:
		p.err = fmt.Errorf("message %s: the delivery of message %s, with the same event, did not happen", p.m.MsgId, s.m.MsgId)
	}
}

// ackDuplicate acks p, whose event this process delivered while p waited:
// its sequence number is recorded, no signal sent.
func (h *Handler) ackDuplicate(p *pending) {
	e := p.item.Event
	p.log.Debug("duplicate acked without a signal", "confirmed_by", dedup.TierInFlight, "producer_id", e.ProducerID, "seq", e.Seq)
	p.result, p.seq = ResultDuplicate, true
}

// prepare decides what becomes of p's message: an invalid one is parked
// and a confirmed duplicate acked (p.result is set), a valid event is to be
// delivered (true, with p.item and, with the duplicate filter, p.lead set)
// or follows a delivery of the same event in flight (p.follow set).
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
		// Its sequence number, if any, is not recorded: an invalid message
		// proves nothing, and its number stays a hole until a valid copy
		// arrives.
		p.result = ResultParked
		return false, nil
	}

	e := r.Event
	p.span.SetAttributes(spanattr.Event(e)...)
	log = log.With("order_id", e.OrderID, "version", e.Version, "status", string(e.Status), "event_id", e.EventID)
	p.log = log
	p.item = Item{Event: e, Source: env}
	if len(r.Mismatch) > 0 {
		for _, f := range r.Mismatch {
			h.metrics.mismatches.WithLabelValues(f).Inc()
		}
		log.Warn("message keys or tag disagree with the body; the body is authoritative", "mismatch", r.Mismatch)
	}
	if h.dedup != nil {
		dctx, dspan := tracer().Start(ctx, "dedup")
		a := h.dedup.Admit(dctx, e)
		dspan.SetAttributes(dedupAttributes(a)...)
		dspan.End()
		switch {
		case a.Duplicate:
			log.Debug("duplicate acked without a signal", "confirmed_by", a.Tier)
			p.result, p.seq = ResultDuplicate, true
			return false, nil
		case a.Follow != nil:
			log.Debug("the same event is being delivered; the message waits for that delivery")
			p.follow = a.Follow
			return false, nil
		case a.Conflict:
			log.Info("business key already delivered with other content; the workflow parks the conflict", "seen_by", a.Tier)
		}
		p.lead = a.Lead
	}
	return true, nil
}

// deliverOrder delivers the events of one order, in order: with the
// DeliverManyFunc in as few signals as the signal budget allows, else one
// call of the DeliverFunc each. An event the engine refuses for good is
// parked as undeliverable and the others go on without it; a transient
// failure stops the order there (no later event of it overtakes an earlier
// one), and the events not delivered go back to the broker, or are parked
// as undeliverable when their messages have been failing past the bound.
// It sets each pending's result or err, and ends the in-flight entry of
// each event it delivered.
func (h *Handler) deliverOrder(ps []*pending) {
	sizes := h.sizes(ps)
	for i := 0; i < len(ps); {
		n := h.signalLen(ps[i:], sizes)
		if err := h.deliverRun(ps[i : i+n]); err != nil {
			for _, p := range ps[i+n:] {
				p.err, p.undelivered = err, err
			}
			break
		}
		i += n
	}
	for _, p := range ps {
		if p.undelivered != nil {
			h.parkOverdue(p)
		}
	}
}

// sizes are the encoded sizes of ps's events, by pending, when signals
// have a budget and ps holds more than one event (-1 for an event that
// cannot be measured); nil otherwise: a lone event goes in a signal of its
// own whatever its size, so measuring it (an encoding) would be wasted.
func (h *Handler) sizes(ps []*pending) map[*pending]int {
	if h.deliverMany == nil || h.size == nil || h.budget <= 0 || len(ps) < 2 {
		return nil
	}
	out := make(map[*pending]int, len(ps))
	for _, p := range ps {
		n, err := h.size(p.item)
		if err != nil {
			n = -1
		}
		out[p] = n
	}
	return out
}

// signalLen is how many of the order's next events, ps, go in one signal:
// one without the DeliverManyFunc; with it, all of them without a budget,
// else as many as fit in the budget by their sizes, at least one. An event
// that cannot be measured goes alone.
func (h *Handler) signalLen(ps []*pending, sizes map[*pending]int) int {
	switch {
	case h.deliverMany == nil:
		return 1
	case sizes == nil:
		return len(ps)
	}
	total := 0
	for i, p := range ps {
		n := sizes[p]
		switch {
		case n < 0 && i == 0:
			return 1
		case n < 0 || (i > 0 && total+n > h.budget):
			return i
		}
		total += n
	}
	return len(ps)
}

// deliverRun delivers run, events of one order, in one signal, and settles
// each delivered one. When the engine refuses the signal for good, it
// looks for the culprit: it delivers each half of run on its own, in
// order, down to single events, and parks a single event refused for good
// as undeliverable. It returns the transient error that stopped it; each
// event of run not delivered then carries that error.
func (h *Handler) deliverRun(run []*pending) error {
	err := h.signal(run)
	if err == nil {
		for _, p := range run {
			h.signalled(p)
		}
		return nil
	}
	if r, ok := refused(err); ok {
		if len(run) == 1 {
			h.parkUndeliverable(run[0], undeliverable(r.err.Error()))
			return nil
		}
		half := len(run) / 2
		run[0].log.Warn("Temporal refused a signal of several events for good; delivering its halves apart to find the culprit",
			"batch", len(run), "err", err)
		if err := h.deliverRun(run[:half]); err != nil {
			for _, p := range run[half:] {
				p.err, p.undelivered = err, err
			}
			return err
		}
		return h.deliverRun(run[half:])
	}
	for _, p := range run {
		p.err, p.undelivered = err, err
	}
	return err
}

// signal delivers run in one signal, with its retries: a single event with
// the DeliverFunc, several with the DeliverManyFunc (the signal carries
// the first message's trace; the others' spans end at the bridge,
// design.md §2.9).
func (h *Handler) signal(run []*pending) error {
	first := run[0]
	var err error
	if len(run) == 1 {
		e, env := first.item.Event, first.item.Source
		err = step(first.ctx, "deliver", func(ctx context.Context) error {
			return h.attempt(ctx, first.log, targetTemporal, func(ctx context.Context) error { return h.deliver(ctx, e, env) })
		})
	} else {
		items := make([]Item, len(run))
		for i, p := range run {
			items[i] = p.item
		}
		err = step(first.ctx, "deliver", func(ctx context.Context) error {
			return h.attempt(ctx, first.log.With("batch", len(run)), targetTemporal, func(ctx context.Context) error {
				return h.deliverMany(ctx, first.item.Event.OrderID, items)
			})
		})
	}
	if err != nil {
		first.log.Error("cannot deliver to Temporal", "events", len(run), "err", err)
	}
	return err
}

// signalled settles p, whose event is durably signalled: the duplicate
// filter learns it, its in-flight entry ends, and once its sequence number
// is recorded it is acked.
func (h *Handler) signalled(p *pending) {
	e := p.item.Event
	p.delivered = true
	if h.dedup != nil {
		h.dedup.Delivered(p.ctx, e)
	}
	if p.lead != nil {
		// After Delivered: a copy that no longer finds the entry
		// finds the event in the Bloom filter and Redis.
		p.lead.Done(true)
	}
	h.metrics.eventLatency.Observe(h.now().Sub(e.OccurredAt).Seconds())
	p.log.Debug("event signalled")
	p.result, p.seq = ResultSignalled, true
}

// parkOverdue parks p, whose event could not be delivered this time, as
// undeliverable when its message has been failing for the bound or longer
// (mq.Failing); otherwise, and while the bridge is stopping, p goes back
// to the broker.
func (h *Handler) parkOverdue(p *pending) {
	if h.bound <= 0 || p.ctx.Err() != nil {
		return
	}
	failing := mq.Failing(p.m, h.maxLevel, h.now())
	if failing < h.bound {
		p.log.Info("event not delivered; the broker will deliver it again", "failing_for", failing.Round(time.Second).String(),
			"bound", h.bound.String())
		return
	}
	h.parkUndeliverable(p, undeliverable(fmt.Sprintf("not delivered for %s: %v", failing.Round(time.Second), p.undelivered)))
}

// undeliverable is the reason of an undeliverable event's dead letter:
// detail after the kind, storable and bounded.
func undeliverable(detail string) string {
	return wire.Sanitize(wire.KindUndeliverable+": "+detail, wire.MaxReasonLen)
}

// parkUndeliverable parks p's message, a valid event that cannot reach its
// workflow, in dead_letters with reason: p is acked as parked. Its sequence
// number is not recorded: the event had no effect, and its number stays a
// hole (a suspected loss) until a copy is delivered. While parking fails, p
// goes back to the broker (never acked).
func (h *Handler) parkUndeliverable(p *pending, reason string) {
	dl := wire.DeadLetter{Envelope: p.item.Source, Reason: reason}
	p.span.SetAttributes(spanattr.ParkReason.String(reason))
	err := step(p.ctx, "park", func(ctx context.Context) error {
		return h.attempt(ctx, p.log, targetPostgres, func(ctx context.Context) error { return h.park(ctx, dl) })
	})
	if err != nil {
		p.log.Error("cannot park undeliverable event; the broker will deliver it again", "reason", reason, "err", err)
		p.err = fmt.Errorf("message %s: park undeliverable event: %w", p.m.MsgId, err)
		return
	}
	p.parked, p.err, p.undelivered = reason, nil, nil
	h.metrics.rejections.WithLabelValues(wire.KindUndeliverable).Inc()
	p.log.Warn("undeliverable event parked in dead_letters", "reason", reason)
	p.result = ResultParked
}

// attempt runs f until it succeeds, the retry budget is spent or ctx is done,
// with exponential backoff (and jitter) between attempts. A permanent error
// (errclass) stops it at once: it returns a *refusal.
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
			if errclass.Of(err) == errclass.Permanent {
				return struct{}{}, backoff.Permanent(err)
			}
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
	case errclass.Of(last) == errclass.Permanent:
		return &refusal{target: target, err: last}
	case ctx.Err() != nil:
		return fmt.Errorf("%s: attempt %d: %w (stopping: %w)", target, n, last, ctx.Err())
	}
	return fmt.Errorf("%s: gave up after %d attempts: %w", target, n, err)
}

// refusal is the error of an attempt stopped by a permanent error: the
// target refused the input, and no retry can change that.
type refusal struct {
	target string
	err    error
}

func (r *refusal) Error() string { return r.target + ": refused: " + r.err.Error() }

func (r *refusal) Unwrap() error { return r.err }

// refused reports whether err is, or wraps, a refusal.
func refused(err error) (*refusal, bool) {
	var r *refusal
	ok := errors.As(err, &r)
	return r, ok
}

// envelope is the message as received, for message.Parse: a body the
// client left compressed (too large to inflate, or undecodable) carries its
// compression and the client's error.
func envelope(m *primitive.MessageExt) wire.Envelope {
	var storedAt time.Time
	if m.StoreTimestamp > 0 {
		storedAt = time.UnixMilli(m.StoreTimestamp).UTC()
	}
	env := wire.NewEnvelope(m.Topic, originalMessageID(m), m.GetKeys(), m.GetTags(), m.Body, storedAt,
		mq.InflateRefused(m))
	env.Compression, env.DecodeError = mq.Compression(m), mq.DecodeError(m)
	env.Queue = queueOffset(m)
	return env
}

// originalMessageID is the ID the producer's send returned: the message's
// UNIQ_KEY property, which every delivery carries, redeliveries through
// the retry topic included (RocketMQ 5.3: internal/mq's redelivery test).
// A message without one (a producer that sets none) has the broker's ID,
// which a redelivery replaces with a new one, keeping the first as
// ORIGIN_MESSAGE_ID.
func originalMessageID(m *primitive.MessageExt) string {
	if id := m.GetProperty(primitive.PropertyUniqueClientMessageIdKeyIndex); id != "" {
		return id
	}
	if id := m.GetProperty(primitive.PropertyOriginMessageId); id != "" {
		return id
	}
	return m.MsgId
}
