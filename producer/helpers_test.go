package producer

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"gorm.io/gorm"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/message"
)

// event returns version v of order id, a valid event.
func event(id string, v int64) fsm.Event {
	statuses := []fsm.Status{fsm.Created, fsm.Paid, fsm.Shipped, fsm.Delivered, fsm.Completed}
	return fsm.Event{
		EventID:     fmt.Sprintf("%s-v%d-%s", id, v, uniq.Name("e")),
		OrderID:     id,
		UserID:      7,
		Status:      statuses[(v-1)%int64(len(statuses))],
		Version:     v,
		AmountCents: 1000,
		OccurredAt:  time.Date(2025, 1, 1, 0, 0, int(v), 0, time.UTC),
	}
}

// broker is a fresh topic on the real broker and a database with the
// producer's schema.
type broker struct {
	namesrv string
	topic   string
	db      *gorm.DB
	dsn     string
}

func newBroker(t *testing.T, queues int) broker {
	t.Helper()
	namesrv := testenv.RocketMQNamesrv(t)
	topic := uniq.Name("producer-topic")
	testenv.CreateTopic(t, topic, queues)
	db, dsn := testenv.NewDatabase(t)
	return broker{namesrv: namesrv, topic: topic, db: db, dsn: dsn}
}

func (b broker) config(producerID string) Config {
	return Config{NameServer: b.namesrv, Topic: b.topic, ProducerID: producerID, SendTimeout: 5 * time.Second}
}

// received is one consumed message.
type received struct {
	event     fsm.Event
	keys, tag string
	sharding  string
	queue     int
	offset    int64
	props     map[string]string
}

// reader consumes a topic from its first offset.
type reader struct {
	mu   sync.Mutex
	msgs []received
	bad  []string
}

func newReader(t *testing.T, b broker) *reader {
	t.Helper()
	r := &reader{}
	c, err := mq.NewConsumer(mq.ConsumerConfig{NameServer: b.namesrv, Topic: b.topic, Group: uniq.Name("producer-reader")},
		func(_ context.Context, m *primitive.MessageExt) error {
			e, err := message.Decode(m.Body)
			r.mu.Lock()
			defer r.mu.Unlock()
			if err != nil {
				r.bad = append(r.bad, fmt.Sprintf("%v: %q", err, m.Body))
				return nil
			}
			r.msgs = append(r.msgs, received{event: e, keys: m.GetKeys(), tag: m.GetTags(), sharding: m.GetShardingKey(),
				queue: m.Queue.QueueId, offset: m.QueueOffset, props: m.GetProperties()})
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	return r
}

// all returns what was consumed so far, by producer and sequence number.
func (r *reader) all(t *testing.T) []received {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.bad) > 0 {
		t.Fatalf("consumed messages that break the contract: %v", r.bad)
	}
	out := append([]received(nil), r.msgs...)
	sort.Slice(out, func(a, b int) bool {
		if out[a].event.ProducerID != out[b].event.ProducerID {
			return out[a].event.ProducerID < out[b].event.ProducerID
		}
		return out[a].event.Seq < out[b].event.Seq
	})
	return out
}

// waitFor waits until cond holds on what was consumed, or fails after d.
func (r *reader) waitFor(t *testing.T, d time.Duration, what string, cond func([]received) bool) []received {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		got := r.all(t)
		if cond(got) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s, still waiting for %s; consumed %d message(s): %s", d, what, len(got), describe(got))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func describe(got []received) string {
	s := ""
	for _, m := range got {
		s += fmt.Sprintf("\n  %s seq %d %s@%d (%s)", m.event.ProducerID, m.event.Seq, m.event.OrderID, m.event.Version, m.event.EventID)
	}
	return s
}
