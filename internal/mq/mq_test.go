package mq_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
)

// setup creates a fresh topic and a producer for it.
func setup(t *testing.T, queues int) (namesrv, topic string, p *mq.Producer) {
	t.Helper()
	namesrv = testenv.RocketMQNamesrv(t)
	topic = uniq.Name("mqtest")
	testenv.CreateTopic(t, topic, queues)
	p, err := mq.NewProducer(namesrv)
	if err != nil {
		t.Fatalf("NewProducer: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return namesrv, topic, p
}

// received records what a consumer saw.
type received struct {
	mu   sync.Mutex
	msgs map[string][]*primitive.MessageExt // by body
}

func (r *received) add(m *primitive.MessageExt) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.msgs == nil {
		r.msgs = map[string][]*primitive.MessageExt{}
	}
	r.msgs[string(m.Body)] = append(r.msgs[string(m.Body)], m)
}

func (r *received) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.msgs)
}

func (r *received) get(body string) []*primitive.MessageExt {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*primitive.MessageExt(nil), r.msgs[body]...)
}

func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func newConsumer(t *testing.T, cfg mq.ConsumerConfig, h mq.Handler) *mq.Consumer {
	t.Helper()
	c, err := mq.NewConsumer(cfg, h)
	if err != nil {
		t.Fatalf("NewConsumer: %v", err)
	}
	if err := c.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	return c
}

func TestPublishEventContractAndOrdering(t *testing.T) {
	namesrv, topic, p := setup(t, 4)
	ctx := context.Background()
	orders := []string{uniq.Name("o-a"), uniq.Name("o-b"), uniq.Name("o-c"), uniq.Name("o-d")}
	statuses := []fsm.Status{fsm.Created, fsm.Paid, fsm.Shipped}
	want := map[string]fsm.Event{}
	for _, o := range orders {
		for i, s := range statuses {
			e := fsm.Event{EventID: fmt.Sprintf("%s-%d", o, i), OrderID: o, UserID: 1, Status: s, Version: int64(i + 1),
				AmountCents: 100, OccurredAt: time.Now().UTC().Truncate(time.Microsecond)}
			r, err := p.PublishEvent(ctx, topic, e)
			if err != nil {
				t.Fatalf("PublishEvent: %v", err)
			}
			if r.MessageID == "" {
				t.Fatalf("PublishEvent returned no message ID")
			}
			body, _ := json.Marshal(e)
			want[string(body)] = e
		}
	}
	var got received
	newConsumer(t, mq.ConsumerConfig{NameServer: namesrv, Topic: topic, Group: uniq.Name("g")},
		func(_ context.Context, m *primitive.MessageExt) error { got.add(m); return nil })
	waitFor(t, "all events consumed", 60*time.Second, func() bool { return got.count() == len(want) })

	queueOf := map[string]int{}
	for body, e := range want {
		ms := got.get(body)
		if len(ms) == 0 {
			t.Fatalf("event %s not consumed", e.Key())
		}
		m := ms[0]
		if m.GetKeys() != e.OrderID || m.GetTags() != string(e.Status) || m.GetShardingKey() != e.OrderID {
			t.Errorf("event %s: keys %q tag %q sharding key %q", e.Key(), m.GetKeys(), m.GetTags(), m.GetShardingKey())
		}
		if m.Topic != topic {
			t.Errorf("event %s: topic %q, want %q", e.Key(), m.Topic, topic)
		}
		if q, ok := queueOf[e.OrderID]; ok && q != m.Queue.QueueId {
			t.Errorf("order %s is spread over queues %d and %d; the sharding key must pin it", e.OrderID, q, m.Queue.QueueId)
		}
		queueOf[e.OrderID] = m.Queue.QueueId
	}
}

func TestPublishRawKeepsBodyAndEmptyKeys(t *testing.T) {
	namesrv, topic, p := setup(t, 1)
	bodies := []string{"{not json", "\x00\xff binary", strings.Repeat("x", 70000)}
	for _, b := range bodies {
		if _, err := p.PublishRaw(context.Background(), topic, []byte(b), "", "", ""); err != nil {
			t.Fatalf("PublishRaw: %v", err)
		}
	}
	var got received
	newConsumer(t, mq.ConsumerConfig{NameServer: namesrv, Topic: topic, Group: uniq.Name("g")},
		func(_ context.Context, m *primitive.MessageExt) error { got.add(m); return nil })
	waitFor(t, "raw messages consumed", 60*time.Second, func() bool { return got.count() == len(bodies) })
	for _, b := range bodies {
		ms := got.get(b)
		if len(ms) == 0 {
			t.Fatalf("body of %d bytes not consumed intact", len(b))
		}
		if ms[0].GetKeys() != "" || ms[0].GetTags() != "" {
			t.Errorf("raw message has keys %q tag %q, want none", ms[0].GetKeys(), ms[0].GetTags())
		}
	}
}

func TestPublishErrors(t *testing.T) {
	if _, err := mq.NewProducer(" , "); err == nil {
		t.Fatal("NewProducer with no address succeeded")
	}
	_, _, p := setup(t, 1)
	if _, err := p.Publish(context.Background(), mq.Message{Body: []byte("x")}); err == nil || !strings.Contains(err.Error(), "topic is empty") {
		t.Fatalf("Publish without topic: %v", err)
	}
}

func TestConsumerConfigErrors(t *testing.T) {
	h := func(context.Context, *primitive.MessageExt) error { return nil }
	for _, c := range []struct {
		cfg  mq.ConsumerConfig
		h    mq.Handler
		want string
	}{
		{mq.ConsumerConfig{NameServer: "127.0.0.1:9876", Topic: "t", Group: "g"}, nil, "handler"},
		{mq.ConsumerConfig{NameServer: "127.0.0.1:9876", Group: "g"}, h, "topic and a group"},
		{mq.ConsumerConfig{NameServer: "127.0.0.1:9876", Topic: "t"}, h, "topic and a group"},
		{mq.ConsumerConfig{NameServer: "", Topic: "t", Group: "g"}, h, "name server"},
	} {
		_, err := mq.NewConsumer(c.cfg, c.h)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewConsumer(%+v): %v, want an error about %q", c.cfg, err, c.want)
		}
	}
}

func TestConsumerStartFailsOnMissingTopic(t *testing.T) {
	namesrv := testenv.RocketMQNamesrv(t)
	c, err := mq.NewConsumer(mq.ConsumerConfig{NameServer: namesrv, Topic: uniq.Name("absent"), Group: uniq.Name("g")},
		func(context.Context, *primitive.MessageExt) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err == nil {
		_ = c.Stop(context.Background())
		t.Fatal("Start on a missing topic succeeded")
	}
	if c.Started() {
		t.Fatal("Started() after a failed Start")
	}
	if err := c.Stop(context.Background()); err != nil {
		t.Fatalf("Stop after a failed Start: %v", err)
	}
}

// A handler error or panic is not an ack: the broker delivers the message
// again, and the process survives.
func TestFailedMessagesAreDeliveredAgain(t *testing.T) {
	namesrv, topic, p := setup(t, 2)
	for _, b := range []string{"fail-once", "panic-once"} {
		if _, err := p.PublishRaw(context.Background(), topic, []byte(b), b, "", ""); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	calls := map[string]int{}
	var got received
	group := uniq.Name("g")
	// The broker creates a group's retry topic on the first failure, and the
	// client learns its route only on its next periodic update (30s); made
	// up front, the redelivery takes the configured 1s delay.
	testenv.CreateTopic(t, "%RETRY%"+group, 1)
	newConsumer(t, mq.ConsumerConfig{NameServer: namesrv, Topic: topic, Group: group, MaxRetryDelayLevel: 1},
		func(_ context.Context, m *primitive.MessageExt) error {
			mu.Lock()
			calls[string(m.Body)]++
			n := calls[string(m.Body)]
			mu.Unlock()
			if n == 1 {
				if string(m.Body) == "panic-once" {
					panic("handler bug")
				}
				return errors.New("downstream unavailable")
			}
			got.add(m)
			return nil
		})
	waitFor(t, "both messages delivered again", 60*time.Second, func() bool { return got.count() == 2 })
	for _, b := range []string{"fail-once", "panic-once"} {
		m := got.get(b)[0]
		if m.ReconsumeTimes < 1 {
			t.Errorf("%s: ReconsumeTimes %d, want >= 1", b, m.ReconsumeTimes)
		}
		if m.Topic != topic || m.GetKeys() != b {
			t.Errorf("%s: redelivered with topic %q keys %q, want the original %q %q", b, m.Topic, m.GetKeys(), topic, b)
		}
	}
}

// Stop waits for running callbacks, hands new ones back unprocessed, and a
// consumer of the same group later receives everything not acked: nothing is
// lost across a graceful stop.
func TestStopWaitsForInFlightAndLosesNothing(t *testing.T) {
	namesrv, topic, p := setup(t, 2)
	const n = 40
	for i := 0; i < n; i++ {
		if _, err := p.PublishRaw(context.Background(), topic, []byte(fmt.Sprintf("m-%03d", i)), "", "", ""); err != nil {
			t.Fatal(err)
		}
	}
	group := uniq.Name("g")
	var done received
	var afterStop atomic.Int64
	var stopped atomic.Bool
	release := make(chan struct{})
	var entered atomic.Int64

	first, err := mq.NewConsumer(mq.ConsumerConfig{NameServer: namesrv, Topic: topic, Group: group, Goroutines: 2, MaxRetryDelayLevel: 1},
		func(ctx context.Context, m *primitive.MessageExt) error {
			if stopped.Load() {
				afterStop.Add(1)
			}
			if entered.Add(1) > 4 {
				<-release // block the later ones until the test says so
			}
			done.add(m)
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "two callbacks blocked", 60*time.Second, func() bool { return first.InFlight() == 2 })

	stopErr := make(chan error, 1)
	go func() { stopErr <- first.Stop(context.Background()) }()
	waitFor(t, "stopping", 5*time.Second, func() bool { return !first.Started() })
	stopped.Store(true)
	select {
	case err := <-stopErr:
		t.Fatalf("Stop returned (%v) while 2 callbacks were running", err)
	case <-time.After(1500 * time.Millisecond):
	}
	close(release)
	select {
	case err := <-stopErr:
		if err != nil {
			t.Fatalf("Stop: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Stop did not return after the callbacks finished")
	}
	if afterStop.Load() != 0 {
		t.Fatalf("%d callbacks ran the handler after Stop began", afterStop.Load())
	}
	firstDone := done.count()
	t.Logf("first consumer handled %d, handed back %d", firstDone, first.Rejected())

	newConsumer(t, mq.ConsumerConfig{NameServer: namesrv, Topic: topic, Group: group, MaxRetryDelayLevel: 1},
		func(_ context.Context, m *primitive.MessageExt) error { done.add(m); return nil })
	waitFor(t, "every message handled by one consumer or the other", 90*time.Second, func() bool { return done.count() == n })
}

// When the grace period runs out, Stop cancels the handlers' context and
// returns once they do.
func TestStopCancelsHandlersAfterGrace(t *testing.T) {
	namesrv, topic, p := setup(t, 1)
	if _, err := p.PublishRaw(context.Background(), topic, []byte("slow"), "", "", ""); err != nil {
		t.Fatal(err)
	}
	cancelled := make(chan struct{})
	c, err := mq.NewConsumer(mq.ConsumerConfig{NameServer: namesrv, Topic: topic, Group: uniq.Name("g")},
		func(ctx context.Context, m *primitive.MessageExt) error {
			<-ctx.Done()
			close(cancelled)
			return ctx.Err()
		})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "callback running", 60*time.Second, func() bool { return c.InFlight() == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := c.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	select {
	case <-cancelled:
	default:
		t.Fatal("handler context was not cancelled")
	}
	if d := time.Since(start); d < 300*time.Millisecond || d > 5*time.Second {
		t.Fatalf("Stop took %s, want the 300ms grace plus a little", d)
	}
}

// Lag reports the backlog behind the messages being handled, and 0 once the
// consumer has caught up.
func TestLag(t *testing.T) {
	namesrv, topic, p := setup(t, 1)
	const n = 30
	for i := 0; i < n; i++ {
		if _, err := p.PublishRaw(context.Background(), topic, []byte(fmt.Sprintf("m-%d", i)), "", "", ""); err != nil {
			t.Fatal(err)
		}
	}
	// The lag comes from the queue maximum the broker sends with a pull,
	// and the broker indexes a stored message into its queue a moment
	// after the send receipt: start the consumer once all n are indexed.
	testenv.WaitIndexed(t, namesrv, topic, n)
	release := make(chan struct{})
	var handled atomic.Int64
	c := newConsumer(t, mq.ConsumerConfig{NameServer: namesrv, Topic: topic, Group: uniq.Name("g"), Goroutines: 1},
		func(context.Context, *primitive.MessageExt) error {
			<-release
			handled.Add(1)
			return nil
		})
	waitFor(t, "first callback", 60*time.Second, func() bool { return c.InFlight() == 1 })
	if lag := c.Lag()[topic]; lag != n-1 {
		t.Errorf("lag while the first of %d messages is handled = %d, want %d", n, lag, n-1)
	}
	close(release)
	waitFor(t, "all handled", 60*time.Second, func() bool { return handled.Load() == n })
	if lag := c.Lag()[topic]; lag != 0 {
		t.Errorf("lag after all messages were handled = %d, want 0", lag)
	}
}

func TestCreateTopicRefusesNoQueues(t *testing.T) {
	err := mq.CreateTopic(context.Background(), []string{"127.0.0.1:9876"}, "127.0.0.1:10911", "no-queues", 0, nil)
	if err == nil || !strings.Contains(err.Error(), "queues must be at least 1") {
		t.Fatalf("CreateTopic with 0 queues: %v, want a clear refusal", err)
	}
}

func TestCreateTopicGivesUpWhenTheBrokerIsUnreachable(t *testing.T) {
	testenv.QuietRocketMQ()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := mq.CreateTopic(ctx, []string{"127.0.0.1:1"}, "127.0.0.1:1", uniq.Name("unreachable"), 4, nil)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("CreateTopic against a closed port: %v, want a deadline error", err)
	}
}

// TestNameServerByHostName: the client accepts only IP addresses, so a
// name server given by host name (as docker-compose and Kubernetes name
// it) is resolved first; a producer and a consumer configured with
// "localhost" exchange a message.
func TestNameServerByHostName(t *testing.T) {
	namesrv := testenv.RocketMQNamesrv(t)
	_, port, err := net.SplitHostPort(strings.Split(namesrv, ",")[0])
	if err != nil {
		t.Fatal(err)
	}
	byName := net.JoinHostPort("localhost", port)
	topic := uniq.Name("mqhost")
	testenv.CreateTopic(t, topic, 1)
	p, err := mq.NewProducer(byName)
	if err != nil {
		t.Fatalf("NewProducer(%s): %v", byName, err)
	}
	t.Cleanup(func() { _ = p.Close() })
	body := []byte(uniq.Name("by-host-name"))
	if _, err := p.Publish(context.Background(), mq.Message{Topic: topic, Body: body, Keys: "k", Tag: "T"}); err != nil {
		t.Fatalf("publish through %s: %v", byName, err)
	}
	var got received
	newConsumer(t, mq.ConsumerConfig{NameServer: byName, Topic: topic, Group: uniq.Name("mqhost-g")},
		func(_ context.Context, m *primitive.MessageExt) error { got.add(m); return nil })
	waitFor(t, "the message through a name server given by host name", 60*time.Second,
		func() bool { return len(got.get(string(body))) > 0 })
}
