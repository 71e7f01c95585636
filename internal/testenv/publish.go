package testenv

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/orderflow/orderflow/internal/mq"
)

// Publish sends n small messages to topic on the local broker, eight at a
// time, each with its own sharding key so that they spread over the
// topic's queues, and returns how many the broker stored in each queue (by
// queue ID, from the send receipts). The bodies are not order events.
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
	return perQ
}
