package mq_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
)

// TestRewindPlanAndApply publishes n messages, notes a time, publishes m
// more and lets a consumer group take all of them; a plan to the noted time
// then says exactly the m later messages are redelivered, queue by queue as
// their send receipts placed them; Apply moves the committed offsets to the
// plan's targets, and a consumer of the group started afterwards receives
// the m later messages and none of the earlier ones.
func TestRewindPlanAndApply(t *testing.T) {
	namesrv := testenv.RocketMQNamesrv(t)
	topic, group := uniq.Name("rewind"), uniq.Name("rewind-g")
	testenv.CreateTopic(t, topic, 4)
	const n, m = 24, 16
	testenv.Publish(t, topic, n) // keys k-0 … k-23
	// The broker stamps a message with its store time in milliseconds:
	// keep the noted time clear of both batches.
	time.Sleep(50 * time.Millisecond)
	mark := time.Now()
	time.Sleep(50 * time.Millisecond)
	late := publishKeyed(t, namesrv, topic, "late", m) // key → queue ID
	testenv.WaitIndexed(t, namesrv, topic, n+m)
	latePerQ := map[int]int64{}
	for _, id := range late {
		latePerQ[id]++
	}

	r, rw := offsetClients(t, namesrv)
	ctx := context.Background()

	c := startCollecting(t, namesrv, topic, group)
	testenv.WaitConsumed(t, namesrv, group, topic)
	c.stop(t)
	plan := waitPlanOffline(t, rw, group, topic, mark)
	for _, q := range plan.Queues {
		t.Logf("queue %d: min %d max %d committed %d target %d earliest %v", q.QueueID, q.Min, q.Max, q.Committed, q.Target, q.EarliestStoreTime)
	}

	if plan.Group != group || plan.Topic != topic || !plan.To.Equal(mark) || len(plan.Queues) != 4 {
		t.Fatalf("plan: group %s topic %s to %v, %d queues; want %s %s %v, 4", plan.Group, plan.Topic, plan.To, len(plan.Queues), group, topic, mark)
	}
	if plan.Redeliver != m || plan.Clamped != 0 {
		t.Errorf("plan redelivers %d and clamps %d messages, want %d (published after the noted time) and 0", plan.Redeliver, plan.Clamped, m)
	}
	for i, q := range plan.Queues {
		if q.QueueID != i || q.Topic != topic || q.Broker == "" || q.BrokerAddr == "" {
			t.Errorf("queue %d: %+v", i, q)
		}
		if q.Committed != q.Max || q.Min != 0 {
			t.Errorf("queue %d: committed %d min %d max %d, want the group at max and min 0", i, q.Committed, q.Min, q.Max)
		}
		if q.Redelivered() != latePerQ[i] || q.Committed-q.Target != latePerQ[i] {
			t.Errorf("queue %d: target %d of committed %d redelivers %d, the receipts put %d later messages there", i, q.Target, q.Committed, q.Redelivered(), latePerQ[i])
		}
		if q.Max > latePerQ[i] && (q.EarliestStoreTime.IsZero() || !q.EarliestStoreTime.Before(mark)) {
			t.Errorf("queue %d holds earlier messages but its earliest store time is %v (noted time %v)", i, q.EarliestStoreTime, mark)
		}
	}
	if plan.Earliest.IsZero() || !plan.Earliest.Before(mark) {
		t.Errorf("plan.Earliest = %v, want a time before the noted %v", plan.Earliest, mark)
	}

	if err := rw.Apply(ctx, plan); err != nil {
		t.Fatal(err)
	}
	qs, err := r.Offsets(ctx, group, topic)
	if err != nil {
		t.Fatal(err)
	}
	for i, q := range qs {
		if q.Committed != plan.Queues[i].Target {
			t.Errorf("queue %d: committed %d after Apply, the plan's target is %d", q.QueueID, q.Committed, plan.Queues[i].Target)
		}
	}

	again := startCollecting(t, namesrv, topic, group)
	testenv.WaitFor(t, time.Minute, func() error {
		if got := again.distinct(); got < m {
			return fmt.Errorf("%d of the %d later messages received again", got, m)
		}
		return nil
	})
	time.Sleep(3 * time.Second) // anything else would arrive by now
	again.stop(t)
	got := again.keys()
	if want := slices.Sorted(maps.Keys(late)); !slices.Equal(got, want) {
		t.Errorf("after the rewind the group received %v, want the later messages %v", got, want)
	}
}

// TestRewindRefusedWhileConsumersOnline: Apply refuses while a consumer of
// the group runs, and changes nothing, whatever the plan said about
// consumers; once the consumer has stopped, the same plan applies.
func TestRewindRefusedWhileConsumersOnline(t *testing.T) {
	namesrv := testenv.RocketMQNamesrv(t)
	topic, group := uniq.Name("rewind-on"), uniq.Name("rewind-on-g")
	testenv.CreateTopic(t, topic, 2)
	start := time.Now().Add(-time.Second)
	const n = 8
	testenv.Publish(t, topic, n)

	r, rw := offsetClients(t, namesrv)
	ctx := context.Background()

	c := startCollecting(t, namesrv, topic, group)
	defer c.stop(t)
	testenv.WaitConsumed(t, namesrv, group, topic)
	var plan mq.RewindPlan
	testenv.WaitFor(t, 30*time.Second, func() error {
		var err error
		if plan, err = rw.Plan(ctx, group, topic, start); err != nil {
			return err
		}
		if plan.ConsumersOnline != 1 {
			return fmt.Errorf("%d consumers online, want 1", plan.ConsumersOnline)
		}
		return nil
	})
	if plan.Redeliver != n {
		t.Errorf("plan redelivers %d messages, want all %d", plan.Redeliver, n)
	}

	stale := plan
	stale.ConsumersOnline = 0 // Apply asks the brokers again
	for _, p := range []mq.RewindPlan{plan, stale} {
		err := rw.Apply(ctx, p)
		if !errors.Is(err, mq.ErrConsumersOnline) || !strings.Contains(err.Error(), "stop the bridges") {
			t.Fatalf("Apply with a consumer running: err = %v, want ErrConsumersOnline saying to stop the bridges", err)
		}
	}
	qs, err := r.Offsets(ctx, group, topic)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		if q.Committed != q.Max {
			t.Errorf("queue %d: committed %d after a refused Apply, want it left at %d", q.QueueID, q.Committed, q.Max)
		}
	}

	c.stop(t)
	waitPlanOffline(t, rw, group, topic, start)
	if err := rw.Apply(ctx, plan); err != nil {
		t.Fatalf("Apply once the consumer stopped: %v", err)
	}
	qs, err = r.Offsets(ctx, group, topic)
	if err != nil {
		t.Fatal(err)
	}
	for i, q := range qs {
		if want := plan.Queues[i].Target; q.Committed != want || want != q.Min {
			t.Errorf("queue %d: committed %d after Apply, want the target %d = min %d", q.QueueID, q.Committed, want, q.Min)
		}
	}
}

// TestRewindPlanEarliestStoreTime: a queue's earliest store time is not
// after the send receipt of the first message stored there (nor before the
// send began) and stays so as more messages arrive; an empty queue has
// none. A time before every message targets the queues' minimums, a time
// after all of them their maximums; an unknown topic wraps ErrNoTopic.
func TestRewindPlanEarliestStoreTime(t *testing.T) {
	namesrv := testenv.RocketMQNamesrv(t)
	topic, group := uniq.Name("rewind-early"), uniq.Name("rewind-early-g")
	testenv.CreateTopic(t, topic, 4)
	p, err := mq.NewProducer(namesrv)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	sent := time.Now().Truncate(time.Millisecond)
	first, err := p.PublishRaw(ctx, topic, []byte(`{"first":true}`), "first", "T", "first")
	if err != nil {
		t.Fatal(err)
	}
	acked := time.Now()
	testenv.WaitIndexed(t, namesrv, topic, 1)

	rw, err := mq.NewRewinder(namesrv, "", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()

	plan, err := rw.Plan(ctx, group, topic, sent.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range plan.Queues {
		if q.QueueID == first.QueueID {
			if q.Max != 1 || q.EarliestStoreTime.IsZero() || q.EarliestStoreTime.After(acked) || q.EarliestStoreTime.Before(sent) {
				t.Errorf("queue %d of the first message: max %d, earliest store time %v; want 1 and within [%v, %v]",
					q.QueueID, q.Max, q.EarliestStoreTime, sent, acked)
			}
			if !plan.Earliest.Equal(q.EarliestStoreTime) {
				t.Errorf("plan.Earliest = %v, want the first message's %v", plan.Earliest, q.EarliestStoreTime)
			}
		} else if q.Max != 0 || !q.EarliestStoreTime.IsZero() {
			t.Errorf("empty queue %d: max %d, earliest store time %v; want 0 and the zero time", q.QueueID, q.Max, q.EarliestStoreTime)
		}
		if q.Committed != -1 || q.Target != q.Min || q.Redelivered() != 0 || q.Clamped != 0 {
			t.Errorf("queue %d, a time before every message: %+v; want no committed offset and the target at min", q.QueueID, q)
		}
	}
	earliest := plan.Earliest

	testenv.Publish(t, topic, 20)
	testenv.WaitIndexed(t, namesrv, topic, 21)
	after := time.Now().Add(time.Hour)
	plan, err = rw.Plan(ctx, group, topic, after)
	if err != nil {
		t.Fatal(err)
	}
	var stored int64
	for _, q := range plan.Queues {
		stored += q.Max - q.Min
		if q.Target != q.Max {
			t.Errorf("queue %d, a time after every message: target %d, want max %d", q.QueueID, q.Target, q.Max)
		}
		if q.Max > 0 && (q.EarliestStoreTime.Before(sent) || q.EarliestStoreTime.After(time.Now())) {
			t.Errorf("queue %d: earliest store time %v, not between the first send %v and now", q.QueueID, q.EarliestStoreTime, sent)
		}
		if q.QueueID == first.QueueID && !q.EarliestStoreTime.Equal(earliest) {
			t.Errorf("queue %d: earliest store time %v after more messages, want still the first message's %v", q.QueueID, q.EarliestStoreTime, earliest)
		}
	}
	if stored != 21 || !plan.Earliest.Equal(earliest) {
		t.Errorf("the queues store %d messages from %v, want 21 from %v", stored, plan.Earliest, earliest)
	}

	if _, err := rw.Plan(ctx, group, uniq.Name("no-such-topic"), after); !errors.Is(err, mq.ErrNoTopic) {
		t.Errorf("an unknown topic: err = %v, want ErrNoTopic", err)
	}
}

// offsetClients returns an offset reader and a rewinder on the name
// server, closed when the test ends.
func offsetClients(t *testing.T, namesrv string) (*mq.OffsetReader, *mq.Rewinder) {
	t.Helper()
	r, err := mq.NewOffsetReader(namesrv, "", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	rw, err := mq.NewRewinder(namesrv, "", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rw.Close() })
	return r, rw
}

// publishKeyed sends n messages with keys prefix-0 … and returns the queue
// ID each key was stored in.
func publishKeyed(t *testing.T, namesrv, topic, prefix string, n int) map[string]int {
	t.Helper()
	p, err := mq.NewProducer(namesrv)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	out := make(map[string]int, n)
	for i := range n {
		key := fmt.Sprintf("%s-%d", prefix, i)
		r, err := p.PublishRaw(context.Background(), topic, []byte(fmt.Sprintf(`{%q:%d}`, prefix, i)), key, "T", key)
		if err != nil {
			t.Fatal(err)
		}
		out[key] = r.QueueID
	}
	return out
}

// collector is a consumer that records the keys it receives.
type collector struct {
	c    *mq.Consumer
	once sync.Once
	mu   sync.Mutex
	seen map[string]int
}

func startCollecting(t *testing.T, namesrv, topic, group string) *collector {
	t.Helper()
	col := &collector{seen: map[string]int{}}
	c, err := mq.NewConsumer(mq.ConsumerConfig{NameServer: namesrv, Topic: topic, Group: group, Goroutines: 4},
		func(_ context.Context, m *primitive.MessageExt) error {
			col.mu.Lock()
			col.seen[m.GetKeys()]++
			col.mu.Unlock()
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	col.c = c
	return col
}

func (c *collector) distinct() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}

func (c *collector) keys() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(maps.Keys(c.seen))
}

func (c *collector) stop(t *testing.T) {
	t.Helper()
	c.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.c.Stop(ctx); err != nil {
			t.Error(err)
		}
	})
}

// waitPlanOffline plans until the brokers have seen the group's consumers
// leave, and returns that plan.
func waitPlanOffline(t *testing.T, rw *mq.Rewinder, group, topic string, to time.Time) mq.RewindPlan {
	t.Helper()
	var plan mq.RewindPlan
	testenv.WaitFor(t, 30*time.Second, func() error {
		var err error
		if plan, err = rw.Plan(context.Background(), group, topic, to); err != nil {
			return err
		}
		if plan.ConsumersOnline != 0 {
			return fmt.Errorf("%d consumers of group %s still online", plan.ConsumersOnline, group)
		}
		return nil
	})
	return plan
}

// TestRewindNeverSkips: a plan to a time later than the group's progress
// keeps each queue at its committed offset, counting the messages the time
// would have skipped, and Apply leaves the offsets there: the group still
// consumes every message it has not consumed yet.
func TestRewindNeverSkips(t *testing.T) {
	namesrv := testenv.RocketMQNamesrv(t)
	topic, group := uniq.Name("rewind-skip"), uniq.Name("rewind-skip-g")
	testenv.CreateTopic(t, topic, 2)
	testenv.Publish(t, topic, 12)
	testenv.WaitIndexed(t, namesrv, topic, 12)
	_, rw := offsetClients(t, namesrv)
	ctx := context.Background()
	c := startCollecting(t, namesrv, topic, group)
	testenv.WaitConsumed(t, namesrv, group, topic)
	c.stop(t)
	// Then the group has consumed the first message of each queue, and no
	// more.
	start := waitPlanOffline(t, rw, group, topic, time.Now().Add(-time.Hour))
	for i := range start.Queues {
		start.Queues[i].Target = start.Queues[i].Min + 1
	}
	if err := rw.Apply(ctx, start); err != nil {
		t.Fatal(err)
	}
	plan, err := rw.Plan(ctx, group, topic, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var unconsumed int64
	for _, q := range plan.Queues {
		if q.Committed != q.Min+1 {
			t.Fatalf("queue %d: committed %d, want %d", q.QueueID, q.Committed, q.Min+1)
		}
		if q.Target != q.Committed || q.Clamped != q.Max-q.Committed {
			t.Errorf("queue %d: target %d, %d clamped; want the committed offset %d and %d clamped", q.QueueID, q.Target, q.Clamped,
				q.Committed, q.Max-q.Committed)
		}
		unconsumed += q.Max - q.Committed
	}
	if plan.Clamped != unconsumed || plan.Redeliver != 0 || unconsumed != 10 {
		t.Errorf("plan: %d clamped, %d redelivered; want the %d (10) messages not consumed clamped and none redelivered",
			plan.Clamped, plan.Redeliver, unconsumed)
	}
	if err := rw.Apply(ctx, plan); err != nil {
		t.Fatal(err)
	}
	after, err := rw.Plan(ctx, group, topic, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range after.Queues {
		if q.Committed != q.Min+1 {
			t.Errorf("queue %d: committed %d after Apply, want still %d", q.QueueID, q.Committed, q.Min+1)
		}
	}
}
