// Package producer publishes order events to orderflow for upstream order
// services: contract-conformant messages, numbered per producer, sent either
// synchronously or as RocketMQ transactional messages tied to the caller's
// local PostgreSQL transaction through an outbox row.
//
// Every message is laid out as the message contract says (docs/design.md
// §2.1): the body is message.Encode of the event (which validates it), and
// mq.EventMessage routes it from the body: the keys and the sharding key
// are the order ID, the tag is the status, and the hash queue selector puts
// one order's events on one queue.
//
// Every message carries producer_id (Config.ProducerID) and seq, numbered
// 1, 2, 3 … per producer ID without holes, across restarts: the counter is
// the row of producer_sequences in the producer's database. A send takes
// that row's lock when it allocates its number and keeps it until its own
// transaction ends, and the increment commits only with a message the
// broker stored (Producer) or with the outbox row of a committed local
// transaction (TxProducer). A failed send leaves no hole; the next send
// takes the same number. Sends of one producer ID are therefore serialized
// (also across processes sharing the ID); use one producer ID per instance
// for parallel streams.
//
// Producer.Skip is the one way to make a hole: it spends a number without
// sending anything, to simulate a lost message in tests and demonstrations,
// and Producer.SendSkipped sends a message with such a number later, as a
// late arrival.
//
// Tracing: each Send is an OpenTelemetry span, "send <topic>" (kind
// producer), a child of the span in the caller's context, made with the
// global tracer provider (a no-op unless the caller's process set one). The
// message carries that span's W3C trace context in its user properties
// traceparent and tracestate, so that orderflow's bridge continues the
// caller's trace. A caller without tracing sends no trace context.
//
// The tables live in the producer's own database: apply Schema there
// (CreateSchema does, idempotently). orderflow's migrations create them too
// (migrations/00005_outbox.sql, the same statements), for its own tools.
package producer

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/message"
)

// DefaultTopic is the topic of the message contract.
const DefaultTopic = "ORDER_EVENTS"

// MaxProducerIDLen is the longest producer ID the message contract
// accepts.
const MaxProducerIDLen = fsm.MaxProducerIDLen

// Config configures a Producer or a TxProducer.
type Config struct {
	// NameServer is the comma-separated list of RocketMQ name servers
	// (host:port), as ROCKETMQ_NAMESRV holds it. Required.
	NameServer string
	// Topic is the topic every message goes to (default ORDER_EVENTS).
	Topic string
	// ProducerID names the sequence the messages are numbered in; it is
	// every message's producer_id. Required; 1-64 characters of
	// [A-Za-z0-9._:-] (fsm.ProducerIDRule), as the bridge parks any other
	// producer_id. Keep it stable across restarts of the same
	// producer, and distinct between producers sending at the same time.
	ProducerID string
	// Group is the RocketMQ producer group. A TxProducer requires it: the
	// broker checks back with any live producer of the group, so every
	// producer of a group must use the same database. A Producer defaults
	// to "orderflow-producer".
	Group string
	// AccessKey and SecretKey are the RocketMQ ACL credentials (empty:
	// none).
	AccessKey, SecretKey string
	// TLS, when not nil, is the TLS configuration of the connections to
	// the name servers and the brokers (nil: plain TCP, clear text).
	// orderflow's programs build it from ROCKETMQ_TLS and its companions
	// (config.Config.RocketMQTLSConfig).
	TLS *tls.Config
	// SendTimeout bounds one attempt to send (default 5 s).
	SendTimeout time.Duration
	// MaxAttempts bounds the attempts to send one message, with backoff
	// from 200 ms doubling to 2 s in between (default 5).
	MaxAttempts int
	// LocalTimeout bounds a TxProducer's local transaction, from its begin
	// to its commit, half message included (default 1 min). It must stay
	// well below the broker's check-back horizon (transactionCheckMax ×
	// transactionCheckInterval, 15 × 30 s by default), after which the
	// broker drops a half message it never learned the outcome of.
	LocalTimeout time.Duration
	// Logger receives the producer's logs (default slog.Default()).
	Logger *slog.Logger

	hooks *hooks // set by tests only
}

// hooks let tests interfere with the transactional protocol.
type hooks struct {
	// endState replaces what TxProducer.Send tells the broker after its
	// local transaction ended.
	endState func(mq.TxState) mq.TxState
	// checked sees each check-back's answer.
	checked func(outboxID string, s mq.TxState, err error)
}

func (c Config) withDefaults() Config {
	if c.Topic == "" {
		c.Topic = DefaultTopic
	}
	if c.SendTimeout <= 0 {
		c.SendTimeout = 5 * time.Second
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 5
	}
	if c.LocalTimeout <= 0 {
		c.LocalTimeout = time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c Config) validate() error {
	if c.NameServer == "" {
		return errors.New("producer: NameServer is required")
	}
	return checkProducerID(c.ProducerID)
}

func checkProducerID(id string) error {
	switch {
	case id == "":
		return errors.New("producer: ProducerID is required")
	case !fsm.ValidProducerID(id):
		return fmt.Errorf("producer: ProducerID %q must be %s", id, fsm.ProducerIDRule)
	}
	return nil
}

func (c Config) mqOptions() []mq.ProducerOption {
	// The client does not retry on its own: MaxAttempts is the bound.
	return []mq.ProducerOption{mq.WithSendRetries(0), mq.WithSendTimeout(c.SendTimeout),
		mq.WithCredentials(c.AccessKey, c.SecretKey), mq.WithTLS(c.TLS)}
}

// Sent is a message the broker stored.
type Sent struct {
	// Event is the event as sent, ProducerID and Seq set.
	Event fsm.Event
	// Body is the message body as sent.
	Body []byte
	// MessageID is the broker's message ID, as consumers see it.
	MessageID string
	// QueueID and QueueOffset say where the broker stored the message
	// (synchronous sends only; a transactional message's place is decided
	// at its commit).
	QueueID     int
	QueueOffset int64
}

// number validates e, sets its producer ID and sequence number, and lays
// out its message.
func number(topic, producerID string, seq int64, e fsm.Event) (fsm.Event, mq.Message, error) {
	e.ProducerID, e.Seq = producerID, seq
	body, err := message.Encode(e)
	if err != nil {
		return e, mq.Message{}, err
	}
	m, err := mq.EventMessage(topic, body)
	return e, m, err
}

// retry runs f until it succeeds, MaxAttempts attempts are spent or ctx is
// done, each attempt bounded by SendTimeout, with backoff in between.
func retry[T any](ctx context.Context, c Config, what string, f func(context.Context) (T, error)) (T, error) {
	n := 0
	v, err := backoff.Retry(ctx, func() (T, error) {
		n++
		actx, cancel := context.WithTimeout(ctx, c.SendTimeout)
		defer cancel()
		return f(actx)
	},
		backoff.WithBackOff(&backoff.ExponentialBackOff{InitialInterval: 200 * time.Millisecond, Multiplier: 2,
			MaxInterval: 2 * time.Second, RandomizationFactor: 0.2}),
		backoff.WithMaxTries(uint(c.MaxAttempts)),
		backoff.WithNotify(func(err error, wait time.Duration) {
			c.Logger.Warn("send failed; retrying", "what", what, "attempt", n, "backoff", wait, "err", err)
		}))
	if err != nil {
		return v, fmt.Errorf("%s: gave up after %d attempt(s): %w", what, n, err)
	}
	return v, nil
}
