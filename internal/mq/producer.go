package mq

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/orderflow/orderflow/internal/uniq"
)

// Message is one message to publish.
type Message struct {
	Topic string
	Body  []byte
	// Keys is the message key (the order ID, by the contract). Empty for none.
	Keys string
	// Tag is the message tag (the status, by the contract). Empty for none.
	Tag string
	// ShardingKey picks the queue (the order ID, by the contract), so that
	// all events of one order share a queue. Empty for a random queue.
	ShardingKey string
	// Properties are user properties the message carries besides these.
	Properties map[string]string
}

// EventMessage returns the message that carries an event's JSON body on
// topic as the contract says: keys and sharding key the body's order_id, tag
// its status. The body is authoritative, so the routing is read from it; it
// is sent as it is. A body without an order_id is an error. It is the one
// place that lays out an event's message: package producer, the scenario
// publisher and the tests use it.
func EventMessage(topic string, body []byte) (Message, error) {
	var route struct {
		OrderID string `json:"order_id"`
		Status  string `json:"status"`
	}
	if err := json.Unmarshal(body, &route); err != nil {
		return Message{}, fmt.Errorf("mq: event body: %w", err)
	}
	if route.OrderID == "" {
		return Message{}, errors.New("mq: event body has no order_id")
	}
	return Message{Topic: topic, Body: body, Keys: route.OrderID, Tag: route.Status, ShardingKey: route.OrderID}, nil
}

// Receipt says where the broker stored a published message.
type Receipt struct {
	MessageID   string
	QueueID     int
	QueueOffset int64
}

// Producer publishes messages to RocketMQ with the hash queue selector.
// It is safe for concurrent use.
type Producer struct {
	p rocketmq.Producer
}

type producerConfig struct {
	group       string
	retries     int
	sendTimeout time.Duration
	creds       primitive.Credentials
	tls         *tls.Config
}

// ProducerOption configures NewProducer.
type ProducerOption func(*producerConfig)

// WithProducerGroup sets the producer group (default "orderflow-producer").
func WithProducerGroup(group string) ProducerOption {
	return func(c *producerConfig) { c.group = group }
}

// WithSendRetries sets how many times a failed send is retried by the client
// (default 3). A retry may store the message twice; consumers deduplicate.
func WithSendRetries(n int) ProducerOption {
	return func(c *producerConfig) { c.retries = n }
}

// WithSendTimeout sets the timeout of one send attempt (default 5s).
func WithSendTimeout(d time.Duration) ProducerOption {
	return func(c *producerConfig) { c.sendTimeout = d }
}

// WithCredentials sets the ACL access and secret keys for brokers that
// require them (both empty: none).
func WithCredentials(accessKey, secretKey string) ProducerOption {
	return func(c *producerConfig) { c.creds = credentials(accessKey, secretKey) }
}

// WithTLS connects to the name servers and the brokers over TLS with cfg
// (nil, the default: plain TCP). The client's TLS is patched in:
// third_party/rocketmq-client-go/ORDERFLOW.md, change 6.
func WithTLS(cfg *tls.Config) ProducerOption {
	return func(c *producerConfig) { c.tls = cfg }
}

// NewProducer creates and starts a producer that talks to the name servers
// in namesrv (comma-separated host:port list).
func NewProducer(namesrv string, opts ...ProducerOption) (*Producer, error) {
	addrs, err := nameServers(namesrv)
	if err != nil {
		return nil, err
	}
	cfg := producerConfig{group: "orderflow-producer", retries: 3, sendTimeout: 5 * time.Second}
	for _, o := range opts {
		o(&cfg)
	}
	quietDefault()
	p, err := rocketmq.NewProducer(
		producer.WithNsResolver(resolver(addrs)),
		producer.WithGroupName(cfg.group),
		producer.WithInstanceName(uniq.Name("orderflow-producer")),
		producer.WithQueueSelector(producer.NewHashQueueSelector()),
		producer.WithRetry(cfg.retries),
		producer.WithSendMsgTimeout(cfg.sendTimeout),
		producer.WithCredentials(cfg.creds),
		producer.WithTLS(cfg.tls),
	)
	if err != nil {
		return nil, fmt.Errorf("mq: create producer: %w", err)
	}
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("mq: start producer (name server %s): %w", namesrv, err)
	}
	return &Producer{p: p}, nil
}

// ErrNotStored is wrapped when the broker answered a send with a status other
// than SEND_OK (for example a flush timeout): the message may or may not be
// stored, so the caller should treat it as failed and send again.
var ErrNotStored = errors.New("mq: broker did not confirm the message as stored")

// Publish sends m synchronously and returns where the broker stored it.
func (p *Producer) Publish(ctx context.Context, m Message) (Receipt, error) {
	if m.Topic == "" {
		return Receipt{}, errors.New("mq: publish: topic is empty")
	}
	res, err := p.p.SendSync(ctx, m.primitive())
	for attempt := 0; err != nil && brokerBusy(err) && attempt < busyRetries; attempt++ {
		select {
		case <-ctx.Done():
			return Receipt{}, fmt.Errorf("mq: publish to %s: %w (then %w)", m.Topic, err, ctx.Err())
		case <-time.After(busyBackoff << attempt):
		}
		res, err = p.p.SendSync(ctx, m.primitive())
	}
	if err != nil {
		return Receipt{}, fmt.Errorf("mq: publish to %s: %w", m.Topic, err)
	}
	if res.Status != primitive.SendOK {
		return Receipt{}, fmt.Errorf("mq: publish to %s: status %d: %w", m.Topic, res.Status, ErrNotStored)
	}
	return receipt(res), nil
}

// A broker that answers SYSTEM_BUSY (response code 2: flow control, its
// send queue full or waited on too long) has not stored the message. The
// client retries other such codes at once but not this one, which the Java
// client does retry; Publish sends again after busyBackoff, doubled each
// time, at most busyRetries times (1.55 s in all).
const (
	busyRetries = 5
	busyBackoff = 50 * time.Millisecond
)

// brokerBusy reports whether err is a broker's SYSTEM_BUSY answer, which
// the client reports as text ("CODE: 2, DESC: [TIMEOUT_CLEAN_QUEUE]broker
// busy, ...") or, on some paths, as a primitive.MQBrokerErr.
func brokerBusy(err error) bool {
	var be primitive.MQBrokerErr
	if errors.As(err, &be) {
		return be.ResponseCode == 2
	}
	return strings.HasPrefix(err.Error(), "CODE: 2,")
}

// primitive is m as the client sends it.
func (m Message) primitive() *primitive.Message {
	msg := primitive.NewMessage(m.Topic, m.Body)
	for k, v := range m.Properties {
		msg.WithProperty(k, v)
	}
	if m.Keys != "" {
		msg.WithKeys([]string{m.Keys})
	}
	if m.Tag != "" {
		msg.WithTag(m.Tag)
	}
	if m.ShardingKey != "" {
		msg.WithShardingKey(m.ShardingKey)
	}
	return msg
}

// receipt is where res says the broker stored a message.
func receipt(res *primitive.SendResult) Receipt {
	r := Receipt{MessageID: res.MsgID, QueueOffset: res.QueueOffset}
	if res.MessageQueue != nil {
		r.QueueID = res.MessageQueue.QueueId
	}
	return r
}

// PublishEvent sends e, encoded as JSON, on topic with the keys, tag and
// sharding key of the message contract (see EventMessage). e is any value
// that encodes to the contract's fields, such as an fsm.Event.
func (p *Producer) PublishEvent(ctx context.Context, topic string, e any) (Receipt, error) {
	body, err := json.Marshal(e)
	if err != nil {
		return Receipt{}, fmt.Errorf("mq: encode event: %w", err)
	}
	m, err := EventMessage(topic, body)
	if err != nil {
		return Receipt{}, err
	}
	return p.Publish(ctx, m)
}

// PublishRaw sends body as it is, for messages that do not (or need not)
// follow the contract, such as deliberately malformed test input.
func (p *Producer) PublishRaw(ctx context.Context, topic string, body []byte, keys, tag, shardingKey string) (Receipt, error) {
	return p.Publish(ctx, Message{Topic: topic, Body: body, Keys: keys, Tag: tag, ShardingKey: shardingKey})
}

// Close shuts the producer down.
func (p *Producer) Close() error {
	if err := p.p.Shutdown(); err != nil {
		return fmt.Errorf("mq: shut producer down: %w", err)
	}
	return nil
}
