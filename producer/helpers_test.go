package producer

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
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

// shopSchema is the table an upstream service's local transaction writes
// in the tests.
const shopSchema = `CREATE TABLE IF NOT EXISTS shop_orders (
	order_id text   NOT NULL,
	version  bigint NOT NULL,
	status   text   NOT NULL,
	PRIMARY KEY (order_id, version))`

// writeShopOrder is a local transaction: the upstream service's own write.
func writeShopOrder(e fsm.Event) func(tx *gorm.DB) error {
	return func(tx *gorm.DB) error {
		return tx.Exec(`INSERT INTO shop_orders (order_id, version, status) VALUES (?, ?, ?)`,
			e.OrderID, e.Version, string(e.Status)).Error
	}
}

// shopOrderExists reports whether the local transaction of e committed.
func shopOrderExists(t *testing.T, db *gorm.DB, e fsm.Event) bool {
	t.Helper()
	var n int64
	if err := db.Raw(`SELECT count(*) FROM shop_orders WHERE order_id = ? AND version = ?`, e.OrderID, e.Version).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n > 0
}

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
	if err := db.Exec(shopSchema).Error; err != nil {
		t.Fatal(err)
	}
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

// consumedThrough publishes a sentinel: a message of order, which the hash
// queue selector puts in the order's queue, after every message of the
// test was sent. It waits until r has consumed the sentinel and every
// message stored before it in that queue, and returns what r consumed, the
// sentinels left out. A message of the order stored before the sentinel
// is among what it returns, however slowly it was delivered. (A
// transactional message is stored when the broker handles its commit,
// which its send does not wait for: wait for the committed messages
// first.)
func (b broker) consumedThrough(t *testing.T, r *reader, order string) []received {
	t.Helper()
	p, err := mq.NewProducer(b.namesrv)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	s := fsm.Event{EventID: uniq.Name("sentinel"), OrderID: order, UserID: 7, Status: fsm.Created, Version: 999,
		AmountCents: 1, OccurredAt: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	rc, err := p.PublishEvent(context.Background(), b.topic, s)
	if err != nil {
		t.Fatal(err)
	}
	// The topic is fresh: its queues' offsets start at 0.
	got := r.waitFor(t, 60*time.Second, fmt.Sprintf("the sentinel at offset %d of queue %d and every message before it", rc.QueueOffset, rc.QueueID),
		func(got []received) bool {
			offsets := map[int64]bool{}
			for _, m := range got {
				if m.queue == rc.QueueID && m.offset <= rc.QueueOffset {
					offsets[m.offset] = true
				}
			}
			return int64(len(offsets)) == rc.QueueOffset+1
		})
	var out []received
	for _, m := range got {
		if m.event.OrderID == order && m.queue != rc.QueueID {
			t.Fatalf("order %s has messages in queues %d and %d: the sentinel does not follow them", order, m.queue, rc.QueueID)
		}
		if !strings.HasPrefix(m.event.EventID, "sentinel-") {
			out = append(out, m)
		}
	}
	return out
}

// withEvent reports whether got holds the message of eventID.
func withEvent(got []received, eventID string) int {
	n := 0
	for _, m := range got {
		if m.event.EventID == eventID {
			n++
		}
	}
	return n
}

func describe(got []received) string {
	s := ""
	for _, m := range got {
		s += fmt.Sprintf("\n  %s seq %d %s@%d (%s)", m.event.ProducerID, m.event.Seq, m.event.OrderID, m.event.Version, m.event.EventID)
	}
	return s
}

// checks records the answers a TxProducer gave to check-backs, by outbox
// row ID.
type checks struct {
	mu      sync.Mutex
	answers map[string][]mq.TxState
	errs    []error
}

func (c *checks) hook(id string, s mq.TxState, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.answers == nil {
		c.answers = map[string][]mq.TxState{}
	}
	c.answers[id] = append(c.answers[id], s)
	if err != nil {
		c.errs = append(c.errs, err)
	}
}

func (c *checks) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("answers %v, errors %v", c.answers, c.errs)
}

// waitAnswer waits until the check-back about outbox row id (any row but
// those in not, when id is empty) was answered want, and fails if it was
// answered otherwise (unknown aside). The broker checks back every 30 s
// about half messages older than 6 s (RocketMQ 5.3's defaults).
func (c *checks) waitAnswer(t *testing.T, id string, not []string, want mq.TxState) string {
	t.Helper()
	deadline := time.Now().Add(100 * time.Second)
	for {
		c.mu.Lock()
		found := ""
		for got, answers := range c.answers {
			if (id != "" && got != id) || (id == "" && slices.Contains(not, got)) {
				continue
			}
			for _, a := range answers {
				if a != mq.TxUnknown && a != want {
					c.mu.Unlock()
					t.Fatalf("check-back about %s answered %s, want %s (%s)", got, a, want, c)
				}
				if a == want {
					found = got
				}
			}
		}
		c.mu.Unlock()
		if found != "" {
			return found
		}
		if time.Now().After(deadline) {
			t.Fatalf("no check-back about %q answered %s within 100 s (%s)", id, want, c)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
