package smoke

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
)

// consumerSettle is the shortest life of a push consumer in these tests; see
// the shutdown in TestRocketMQRoundTrip.
const consumerSettle = 2 * time.Second

// received is one delivered message, copied out of the consumer callback.
type received struct {
	body, keys, tag, msgID string
	queueID                int
}

// TestRocketMQRoundTrip produces messages with keys, a tag and a sharding key
// through the hash queue selector to a fresh topic, and consumes them with a
// push consumer in a fresh group.
func TestRocketMQRoundTrip(t *testing.T) {
	namesrv := testenv.NamesrvList(testenv.RocketMQNamesrv(t))
	topic := uniq.Name("smoke-topic")
	const queues = 8
	testenv.CreateTopic(t, topic, queues)

	p, err := rocketmq.NewProducer(
		producer.WithNsResolver(primitive.NewPassthroughResolver(namesrv)),
		producer.WithGroupName(uniq.Name("smoke-producer")),
		// Clients of one process share a connection per instance name, and
		// shutting the shared one down races with the consumer's rebalance
		// inside rocketmq-client-go: give each client its own.
		producer.WithInstanceName(uniq.Name("smoke-producer")),
		producer.WithQueueSelector(producer.NewHashQueueSelector()),
		producer.WithRetry(2),
	)
	if err != nil {
		t.Fatalf("new producer: %v", err)
	}
	if err := p.Start(); err != nil {
		t.Fatalf("start producer: %v", err)
	}
	t.Cleanup(func() { _ = p.Shutdown() })

	// Three events of one order and one of another: one order's events must
	// share a queue.
	type sent struct {
		orderID, tag, body string
		queueID            int
	}
	orderA, orderB := uniq.Name("order-a"), uniq.Name("order-b")
	msgs := []sent{
		{orderID: orderA, tag: "CREATED"},
		{orderID: orderA, tag: "PAID"},
		{orderID: orderB, tag: "CREATED"},
		{orderID: orderA, tag: "SHIPPED"},
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range msgs {
		m := &msgs[i]
		m.body = fmt.Sprintf(`{"order_id":%q,"status":%q,"version":%d}`, m.orderID, m.tag, i+1)
		msg := primitive.NewMessage(topic, []byte(m.body))
		msg.WithKeys([]string{m.orderID})
		msg.WithTag(m.tag)
		msg.WithShardingKey(m.orderID)
		res, err := p.SendSync(ctx, msg)
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		if res.Status != primitive.SendOK {
			t.Fatalf("send %d: status %v, want SendOK", i, res.Status)
		}
		m.queueID = res.MessageQueue.QueueId
	}
	if msgs[0].queueID != msgs[1].queueID || msgs[0].queueID != msgs[3].queueID {
		t.Fatalf("events of one order went to queues %d, %d, %d: the sharding key was ignored",
			msgs[0].queueID, msgs[1].queueID, msgs[3].queueID)
	}

	got := make(chan received, 64)
	done := make(chan struct{})
	var inflight sync.WaitGroup // the client's Shutdown does not wait for callbacks
	c, err := rocketmq.NewPushConsumer(
		consumer.WithNsResolver(primitive.NewPassthroughResolver(namesrv)),
		consumer.WithGroupName(uniq.Name("smoke-group")),
		consumer.WithInstance(uniq.Name("smoke-consumer")),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	)
	if err != nil {
		t.Fatalf("new push consumer: %v", err)
	}
	err = c.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, batch ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		inflight.Add(1)
		defer inflight.Done()
		for _, m := range batch {
			r := received{body: string(m.Body), keys: m.GetKeys(), tag: m.GetTags(), msgID: m.MsgId, queueID: m.Queue.QueueId}
			select {
			case got <- r:
			case <-done:
				return consumer.ConsumeRetryLater, nil
			}
		}
		return consumer.ConsumeSuccess, nil
	})
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	if err := c.Start(); err != nil {
		t.Fatalf("start push consumer: %v", err)
	}
	started := time.Now()
	defer func() {
		close(done)
		// rocketmq-client-go v2.1.2 flags its client closed without
		// synchronisation while a rebalance that the broker triggered (on
		// the consumer's own registration) may still be sending requests: a
		// data race inside the library. Let that rebalance finish first.
		time.Sleep(time.Until(started.Add(consumerSettle)))
		_ = c.Shutdown()
		inflight.Wait()
	}()

	byBody := map[string]received{}
	timeout := time.After(90 * time.Second)
	for len(byBody) < len(msgs) {
		select {
		case r := <-got:
			byBody[r.body] = r
		case <-timeout:
			t.Fatalf("received %d of %d messages within 90s", len(byBody), len(msgs))
		}
	}
	for i, m := range msgs {
		r, ok := byBody[m.body]
		if !ok {
			t.Fatalf("message %d (%s) not received; got %v", i, m.body, byBody)
		}
		if r.keys != m.orderID {
			t.Errorf("message %d: keys = %q, want %q", i, r.keys, m.orderID)
		}
		if r.tag != m.tag {
			t.Errorf("message %d: tag = %q, want %q", i, r.tag, m.tag)
		}
		if r.queueID != m.queueID {
			t.Errorf("message %d: consumed from queue %d, sent to queue %d", i, r.queueID, m.queueID)
		}
		if r.msgID == "" {
			t.Errorf("message %d: empty message ID", i)
		}
	}
}
