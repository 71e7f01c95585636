package mq

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/orderflow/orderflow/internal/uniq"
)

// Handler processes one message. Returning nil acknowledges it; returning an
// error asks the broker to deliver it again later. ctx is cancelled when the
// consumer is stopped and its grace period has run out.
type Handler func(ctx context.Context, m *primitive.MessageExt) error

// ConsumerConfig configures NewConsumer.
type ConsumerConfig struct {
	// NameServer is the comma-separated list of name server host:port.
	NameServer string
	// Topic is the topic to subscribe to; every tag is consumed.
	Topic string
	// Group is the consumer group. A new group starts at the first offset.
	Group string
	// Goroutines is the number of callbacks the client runs at once (default 16).
	Goroutines int
	// BatchSize is the number of messages handed to one callback (default 1).
	// The messages of a batch are handled in order; if one fails, the whole
	// batch is delivered again (handling must be idempotent, as it must be
	// anyway under at-least-once delivery).
	BatchSize int
	// MaxReconsumeTimes is how many times a failed message is delivered again
	// before the broker moves it to the group's %DLQ% topic (default
	// DefaultMaxReconsumeTimes). It is high on purpose: a long outage of a
	// downstream service must not move messages out of reach; the bridge
	// parks a message it failed to deliver for too long well before
	// (RedeliveriesFor).
	MaxReconsumeTimes int32
	// MaxRetryDelayLevel caps the broker's redelivery delay level of a failed
	// message (default 5, one minute, with the broker's default levels
	// "1s 5s 10s 30s 1m 2m ..."). The first retry uses level 3 (10s) and each
	// further one the next level, up to this cap.
	//
	// Failed messages come back through the group's retry topic
	// %RETRY%<group>, which the broker creates on the group's first failure;
	// a consumer started before it existed learns its route on the client's
	// next periodic route update (every 30s), so the very first redelivery of
	// a new group can take up to 30s longer.
	MaxRetryDelayLevel int
	// Instance is the client instance name; empty for a unique one.
	Instance string
	// AccessKey and SecretKey are the ACL credentials for brokers that
	// require them (both empty: none).
	AccessKey, SecretKey string
	// TLS, when not nil, is the TLS configuration of the connections to
	// the name servers and the brokers (nil: plain TCP).
	TLS *tls.Config
	// MaxInflatedBody bounds how many bytes a compressed message body may
	// inflate to (0: no bound). A body that would inflate further reaches
	// the handler still compressed, and InflateRefused reports it. The
	// bound is process-wide: the client decodes messages in shared code.
	MaxInflatedBody int64
	// SentBack, when set, is called with each message the broker took back
	// into the group's retry topic (handed back, or past the client's
	// consume timeout), after the broker accepted it and before the
	// consumer's offset moves past it (third_party/rocketmq-client-go,
	// ORDERFLOW.md, change 8). It runs on the consuming goroutine.
	SentBack func(m *primitive.MessageExt)
}

// InflateRefused reports whether m is a compressed message whose body the
// client did not inflate because it would exceed
// ConsumerConfig.MaxInflatedBody; m.Body is then the compressed body as
// stored.
func InflateRefused(m *primitive.MessageExt) bool {
	return m.SysFlag&primitive.FlagCompressed != 0 && m.GetProperty(primitive.PropertyInflateLimitExceeded) != ""
}

// Consumer is a RocketMQ push consumer that knows which of its callbacks are
// running, so that Stop can wait for them before shutting the client down.
type Consumer struct {
	cfg     ConsumerConfig
	pc      pushClient
	handler BatchHandler

	// work is the context of every handler; cancelled when Stop gives up.
	work       context.Context
	cancelWork context.CancelFunc

	mu       sync.Mutex
	stopping bool
	inFlight int
	idle     chan struct{}

	lagMu sync.Mutex
	lags  map[primitive.MessageQueue]queueLag

	started  atomic.Bool
	rejected atomic.Int64
	stopOnce sync.Once
	stopErr  error
}

// BatchHandler processes the messages of one callback (up to
// ConsumerConfig.BatchSize, from one queue, in queue order). Returning nil
// acknowledges all of them; returning an error asks the broker to deliver
// all of them again later. ctx is as for Handler.
type BatchHandler func(ctx context.Context, msgs []*primitive.MessageExt) error

// NewConsumer creates a push consumer for cfg that hands each message to h,
// in order; a failure redelivers the callback's whole batch. Call Start to
// begin consuming.
func NewConsumer(cfg ConsumerConfig, h Handler) (*Consumer, error) {
	if h == nil {
		return nil, errors.New("mq: consumer needs a handler")
	}
	return NewBatchConsumer(cfg, perMessage(h))
}

// perMessage is the BatchHandler that hands each message to h in order and
// stops at the first failure.
func perMessage(h Handler) BatchHandler {
	return func(ctx context.Context, msgs []*primitive.MessageExt) error {
		for _, m := range msgs {
			if err := h(ctx, m); err != nil {
				return err
			}
		}
		return nil
	}
}

// NewBatchConsumer creates a push consumer for cfg that hands the messages
// of each callback to h at once. Call Start to begin consuming.
func NewBatchConsumer(cfg ConsumerConfig, h BatchHandler) (*Consumer, error) {
	if h == nil {
		return nil, errors.New("mq: consumer needs a handler")
	}
	if cfg.Topic == "" || cfg.Group == "" {
		return nil, fmt.Errorf("mq: consumer needs a topic and a group (topic %q, group %q)", cfg.Topic, cfg.Group)
	}
	addrs, err := nameServers(cfg.NameServer)
	if err != nil {
		return nil, err
	}
	if cfg.Goroutines <= 0 {
		cfg.Goroutines = 16
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 1
	}
	if cfg.MaxReconsumeTimes <= 0 {
		cfg.MaxReconsumeTimes = DefaultMaxReconsumeTimes
	}
	if cfg.MaxRetryDelayLevel <= 0 {
		cfg.MaxRetryDelayLevel = 5
	}
	if cfg.Instance == "" {
		cfg.Instance = uniq.Name("orderflow-consumer")
	}
	if cfg.MaxInflatedBody > 0 {
		primitive.SetInflateLimit(cfg.MaxInflatedBody)
	}
	quietDefault()
	pc, err := rocketmq.NewPushConsumer(
		consumer.WithNsResolver(resolver(addrs)),
		consumer.WithGroupName(cfg.Group),
		consumer.WithInstance(cfg.Instance),
		consumer.WithConsumerModel(consumer.Clustering),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
		consumer.WithConsumeGoroutineNums(cfg.Goroutines),
		consumer.WithConsumeMessageBatchMaxSize(cfg.BatchSize),
		consumer.WithMaxReconsumeTimes(cfg.MaxReconsumeTimes),
		consumer.WithCredentials(credentials(cfg.AccessKey, cfg.SecretKey)),
		consumer.WithTLS(cfg.TLS),
		consumer.WithSentBackHook(cfg.SentBack),
	)
	if err != nil {
		return nil, fmt.Errorf("mq: create consumer for group %s: %w", cfg.Group, err)
	}
	return newBatchConsumer(cfg, pc, h)
}

// pushClient is the part of the client's push consumer that Consumer uses;
// tests of Consumer's own concurrency give it a fake.
type pushClient interface {
	Subscribe(topic string, selector consumer.MessageSelector,
		f func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error)) error
	Start() error
	Shutdown() error
}

// newConsumer wires a Consumer over pc, subscribed to cfg.Topic, that
// hands each message to h.
func newConsumer(cfg ConsumerConfig, pc pushClient, h Handler) (*Consumer, error) {
	return newBatchConsumer(cfg, pc, perMessage(h))
}

// newBatchConsumer wires a Consumer over pc, subscribed to cfg.Topic.
func newBatchConsumer(cfg ConsumerConfig, pc pushClient, h BatchHandler) (*Consumer, error) {
	work, cancel := context.WithCancel(context.Background())
	c := &Consumer{cfg: cfg, pc: pc, handler: h, work: work, cancelWork: cancel, lags: map[primitive.MessageQueue]queueLag{}}
	sel := consumer.MessageSelector{Type: consumer.TAG, Expression: "*"}
	if err := pc.Subscribe(cfg.Topic, sel, c.consume); err != nil {
		cancel()
		return nil, fmt.Errorf("mq: subscribe group %s to %s: %w", cfg.Group, cfg.Topic, err)
	}
	return c, nil
}

// Start begins consuming. It fails when the topic does not exist or the name
// server cannot be reached.
func (c *Consumer) Start() error {
	if err := c.pc.Start(); err != nil {
		return fmt.Errorf("mq: start consumer group %s on %s (name server %s): %w",
			c.cfg.Group, c.cfg.Topic, c.cfg.NameServer, err)
	}
	c.started.Store(true)
	return nil
}

// Started reports whether the consumer has started and not yet been stopped.
func (c *Consumer) Started() bool {
	if !c.started.Load() {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.stopping
}

// InFlight returns the number of callbacks running now.
func (c *Consumer) InFlight() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inFlight
}

// Rejected returns how many messages were handed back unprocessed because
// the consumer was stopping.
func (c *Consumer) Rejected() int64 { return c.rejected.Load() }

// queueLag is the backlog of one queue as last observed: the highest
// message offset received and the highest max offset the broker reported.
type queueLag struct {
	topic     string
	offset    int64
	maxOffset int64
	at        time.Time
}

// lag is how many messages the broker holds behind the newest one received.
func (l queueLag) lag() int64 { return max(0, l.maxOffset-l.offset-1) }

// lagExpiry drops a queue's figure when no message of it was seen for this
// long (the queue was rebalanced away, or it is idle and caught up).
const lagExpiry = 2 * time.Minute

// observeLag records, for the queue of each message, how many messages the
// broker holds behind it (from the queue's max offset, which the client
// attaches to every pulled message).
func (c *Consumer) observeLag(msgs []*primitive.MessageExt) {
	now := time.Now()
	c.lagMu.Lock()
	defer c.lagMu.Unlock()
	for _, m := range msgs {
		if m.Queue == nil {
			continue
		}
		maxOffset, err := strconv.ParseInt(m.GetProperty(primitive.PropertyMaxOffset), 10, 64)
		if err != nil {
			continue
		}
		// Callbacks of one queue run concurrently and finish in any order:
		// keep the newest offsets seen, never an older observation.
		l, ok := c.lags[*m.Queue]
		if !ok {
			l = queueLag{topic: m.Queue.Topic, offset: -1}
		}
		l.offset = max(l.offset, m.QueueOffset)
		l.maxOffset = max(l.maxOffset, maxOffset)
		l.at = now
		c.lags[*m.Queue] = l
	}
}

// Lag returns, per topic (the group's retry topic included), how many
// messages the broker holds behind the last message this instance received
// from each of its queues: the consumer's backlog, as of its last callback
// per queue. (The client's own GetOffsetDiffMap is not used: it reads the
// queue state without synchronisation.)
func (c *Consumer) Lag() map[string]int64 {
	now := time.Now()
	c.lagMu.Lock()
	defer c.lagMu.Unlock()
	out := map[string]int64{}
	for q, l := range c.lags {
		if now.Sub(l.at) > lagExpiry {
			delete(c.lags, q)
			continue
		}
		out[l.topic] += l.lag()
	}
	return out
}

// enter registers a callback; false when the consumer is stopping.
func (c *Consumer) enter() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopping {
		return false
	}
	c.inFlight++
	return true
}

func (c *Consumer) leave() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inFlight--
	if c.inFlight == 0 && c.idle != nil {
		close(c.idle)
		c.idle = nil
	}
}

// consume is the callback given to the client.
func (c *Consumer) consume(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
	if len(msgs) == 0 {
		return consumer.ConsumeSuccess, nil
	}
	c.observeLag(msgs)
	if !c.enter() {
		// Stopping: hand the messages back untouched, to come again soon.
		c.rejected.Add(int64(len(msgs)))
		c.setRetryDelay(ctx, 1)
		return consumer.ConsumeRetryLater, nil
	}
	defer c.leave()
	if err := c.safeHandle(msgs); err != nil {
		c.setRetryDelay(ctx, c.retryDelayLevel(msgs))
		return consumer.ConsumeRetryLater, nil
	}
	return consumer.ConsumeSuccess, nil
}

// safeHandle runs the handler and turns a panic into an error, so that a bug
// never acknowledges a message nor ends the process.
func (c *Consumer) safeHandle(msgs []*primitive.MessageExt) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("mq: handler panicked on a batch of %d message(s) from %s: %v", len(msgs), msgs[0].MsgId, r)
		}
	}()
	return c.handler(c.work, msgs)
}

// retryDelayLevel is the broker delay level for the next delivery of msgs:
// RetryDelayLevel of the most redelivered one.
func (c *Consumer) retryDelayLevel(msgs []*primitive.MessageExt) int {
	var times int32
	for _, m := range msgs {
		times = max(times, m.ReconsumeTimes)
	}
	return RetryDelayLevel(times, c.cfg.MaxRetryDelayLevel)
}

func (c *Consumer) setRetryDelay(ctx context.Context, level int) {
	if cc, ok := primitive.GetConcurrentlyCtx(ctx); ok && cc != nil {
		cc.DelayLevelWhenNextConsume = level
	}
}

// settle is how long Stop waits after the last callback returned before it
// shuts the client down, so that the client records the results of the last
// callbacks in its offsets before it persists them.
const settle = 300 * time.Millisecond

// Stop stops the consumer gracefully: new callbacks hand their messages back
// unprocessed at once, running ones are waited for until ctx is done (then
// their context is cancelled and they get a moment to return), and finally
// the client is shut down, which persists the consumed offsets. Messages not
// acknowledged are delivered again, to this group, later. Stop is idempotent.
func (c *Consumer) Stop(ctx context.Context) error {
	c.stopOnce.Do(func() {
		c.mu.Lock()
		c.stopping = true
		idle := make(chan struct{})
		if c.inFlight == 0 {
			close(idle)
		} else {
			c.idle = idle
		}
		c.mu.Unlock()

		var waitErr error
		select {
		case <-idle:
		case <-ctx.Done():
			c.cancelWork()
			select {
			case <-idle:
			case <-time.After(5 * time.Second):
				waitErr = fmt.Errorf("mq: %d callbacks still running at shutdown: %w", c.InFlight(), ctx.Err())
			}
		}
		c.cancelWork()
		if !c.started.Load() {
			// The client cannot shut down what it never started.
			c.stopErr = waitErr
			return
		}
		time.Sleep(settle)
		if err := c.pc.Shutdown(); err != nil {
			c.stopErr = errors.Join(waitErr, fmt.Errorf("mq: shut consumer down: %w", err))
			return
		}
		c.stopErr = waitErr
	})
	return c.stopErr
}
