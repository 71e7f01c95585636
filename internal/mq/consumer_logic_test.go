package mq

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// fakeClient stands in for the RocketMQ push consumer: the test calls the
// subscribed callback from as many goroutines as it likes, as the client's
// pull loops would. It lets Consumer's own concurrency (callbacks, Stop,
// the lag and in-flight figures) run under the race detector, which the
// real client's own races keep out of the tests that use it.
type fakeClient struct {
	mu       sync.Mutex
	callback func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error)
	started  bool
	shutdown atomic.Bool
}

func (f *fakeClient) Subscribe(_ string, _ consumer.MessageSelector,
	cb func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.callback = cb
	return nil
}

func (f *fakeClient) Start() error { f.mu.Lock(); f.started = true; f.mu.Unlock(); return nil }

func (f *fakeClient) Shutdown() error { f.shutdown.Store(true); return nil }

// deliver calls the callback with msgs, as the client does, and returns the
// result and the redelivery level asked for.
func (f *fakeClient) deliver(msgs ...*primitive.MessageExt) (consumer.ConsumeResult, int) {
	cc := primitive.NewConsumeConcurrentlyContext()
	ctx := primitive.WithConcurrentlyCtx(context.Background(), cc)
	f.mu.Lock()
	cb := f.callback
	f.mu.Unlock()
	r, _ := cb(ctx, msgs...)
	return r, cc.DelayLevelWhenNextConsume
}

func testMessage(queue int, offset, maxOffset int64) *primitive.MessageExt {
	m := &primitive.MessageExt{QueueOffset: offset}
	m.Queue = &primitive.MessageQueue{Topic: "T", BrokerName: "b", QueueId: queue}
	m.MsgId = "m-" + strconv.Itoa(queue) + "-" + strconv.FormatInt(offset, 10)
	m.WithProperty(primitive.PropertyMaxOffset, strconv.FormatInt(maxOffset, 10))
	return m
}

func TestConsumerConcurrentCallbacksAndStop(t *testing.T) {
	fc := &fakeClient{}
	var handled atomic.Int64
	release := make(chan struct{})
	c, err := newConsumer(ConsumerConfig{Topic: "T", Group: "G", MaxRetryDelayLevel: 5}, fc,
		func(ctx context.Context, m *primitive.MessageExt) error {
			handled.Add(1)
			if m.QueueOffset%7 == 0 {
				return errors.New("not yet") // handed back
			}
			if m.QueueOffset == 1 {
				<-release // one slow callback, in flight while Stop begins
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	const queues, perQueue = 4, 50
	var wg sync.WaitGroup
	var acked, retried atomic.Int64
	for q := range queues {
		for o := range perQueue {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, level := fc.deliver(testMessage(q, int64(o), perQueue))
				switch r {
				case consumer.ConsumeSuccess:
					acked.Add(1)
				case consumer.ConsumeRetryLater:
					retried.Add(1)
					if level < 1 || level > 5 {
						t.Errorf("retry level %d, want 1..5", level)
					}
				}
				_ = c.InFlight()
				_ = c.Lag()
				_ = c.Started()
			}()
		}
	}
	// Stop while the slow callbacks are in flight; then let them finish.
	stopped := make(chan error, 1)
	go func() {
		time.Sleep(50 * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		stopped <- c.Stop(ctx)
	}()
	time.Sleep(100 * time.Millisecond)
	close(release)
	wg.Wait()
	if err := <-stopped; err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if !fc.shutdown.Load() {
		t.Error("Stop did not shut the client down")
	}
	if c.Started() || c.InFlight() != 0 {
		t.Errorf("after Stop: started %v, in flight %d", c.Started(), c.InFlight())
	}
	total := acked.Load() + retried.Load()
	if total != queues*perQueue {
		t.Errorf("%d callbacks answered, want %d", total, queues*perQueue)
	}
	// Every callback either ran the handler or was handed back because the
	// consumer was stopping: nothing was acked without being handled.
	if acked.Load() > handled.Load() || retried.Load() < int64(c.Rejected()) {
		t.Errorf("acked %d, handled %d, retried %d, handed back while stopping %d",
			acked.Load(), handled.Load(), retried.Load(), c.Rejected())
	}
	// After Stop, a late callback is handed back untouched.
	before := handled.Load()
	if r, _ := fc.deliver(testMessage(0, 999, 1000)); r != consumer.ConsumeRetryLater || handled.Load() != before {
		t.Errorf("a callback after Stop: %v, handled %d more", r, handled.Load()-before)
	}
}

func TestConsumerLagKeepsTheNewestObservation(t *testing.T) {
	fc := &fakeClient{}
	c, err := newConsumer(ConsumerConfig{Topic: "T", Group: "G"}, fc, func(context.Context, *primitive.MessageExt) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for o := range 100 {
		wg.Add(1)
		go func() { defer wg.Done(); fc.deliver(testMessage(1, int64(o), 200)) }()
	}
	wg.Wait()
	// The newest offset seen is 99 of a queue whose max offset is 200: 100
	// messages behind it, whatever order the callbacks finished in.
	if got := c.Lag()["T"]; got != 100 {
		t.Errorf("lag %d, want 100", got)
	}
}
