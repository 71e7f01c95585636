package testenv

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/internal/uniq"
)

// Publish sends n small messages to topic on the local broker, eight at a
// time, each with its own sharding key so that they spread over the
// topic's queues, and returns how many the broker stored in each queue (by
// queue ID, from the send receipts), once the broker's queues hold them
// all (WaitIndexed). The bodies are not order events.
func Publish(t testing.TB, topic string, n int) map[int]int64 {
	t.Helper()
	p, err := mq.NewProducer(RocketMQNamesrv(t))
	if err != nil {
		t.Fatalf("testenv: producer: %v; %s", err, runMakeUp)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*serviceWait)
	defer cancel()
	var (
		mu      sync.Mutex
		perQ    = map[int]int64{}
		firstEr error
		wg      sync.WaitGroup
	)
	next := make(chan int)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				key := fmt.Sprintf("k-%d", i)
				r, err := p.PublishRaw(ctx, topic, []byte(fmt.Sprintf(`{"n":%d}`, i)), key, "T", key)
				mu.Lock()
				if err != nil && firstEr == nil {
					firstEr = err
				}
				if err == nil {
					perQ[r.QueueID]++
				}
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	if firstEr != nil {
		t.Fatalf("testenv: publish %d messages to %s: %v", n, topic, firstEr)
	}
	WaitIndexed(t, RocketMQNamesrv(t), topic, int64(n))
	return perQ
}

// WaitIndexed waits, for up to 30 s, until the queues of topic on the
// brokers namesrv routes to hold n messages in all. A broker files a
// stored message into its queue a moment after the send receipt, so a
// queue's maximum offset, a consumer's lag and a read of the backlog trail
// the receipts for that moment.
func WaitIndexed(t testing.TB, namesrv, topic string, n int64) {
	t.Helper()
	r, err := mq.NewOffsetReader(namesrv, "", "", nil)
	if err != nil {
		t.Fatalf("testenv: offset reader: %v", err)
	}
	defer r.Close()
	group := uniq.Name("indexed") // no consumer: only its offsets are read
	WaitFor(t, 30*time.Second, func() error {
		qs, err := r.Offsets(context.Background(), group, topic)
		if err != nil {
			return err
		}
		var stored int64
		for _, q := range qs {
			stored += q.Max - q.Min
		}
		if stored < n {
			return fmt.Errorf("%d of %d messages filed in the queues of %s", stored, n, topic)
		}
		return nil
	})
}

// WaitConsumed waits until group has committed, in every queue of topic,
// the queue's maximum offset: it has consumed every message stored (its
// client commits every 5 s).
func WaitConsumed(t testing.TB, namesrv, group, topic string) {
	t.Helper()
	r, err := mq.NewOffsetReader(namesrv, "", "", nil)
	if err != nil {
		t.Fatalf("testenv: offset reader: %v", err)
	}
	defer r.Close()
	WaitFor(t, time.Minute, func() error {
		qs, err := r.Offsets(context.Background(), group, topic)
		if err != nil {
			return err
		}
		for _, q := range qs {
			if q.Committed != q.Max {
				return fmt.Errorf("queue %d of %s: group %s committed %d of max %d", q.QueueID, topic, group, q.Committed, q.Max)
			}
		}
		return nil
	})
}
