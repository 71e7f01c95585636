package mq_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
)

// What a message handed back keeps when the broker delivers it again
// through the group's retry topic: its born timestamp (the producer's send),
// its message ID (the producer's, UNIQ_KEY), its topic, keys and body; its
// ReconsumeTimes counts the redeliveries; its store timestamp is the retry
// topic's. Failing, which reads these, grows with them.
func TestRedeliveryKeepsBornTimestampAndCountsReconsumes(t *testing.T) {
	namesrv, topic, p := setup(t, 1)
	receipt, err := p.PublishRaw(context.Background(), topic, []byte("again"), "k-1", "PAID", "")
	if err != nil {
		t.Fatal(err)
	}
	group := uniq.Name("g")
	testenv.CreateTopic(t, "%RETRY%"+group, 1)
	const deliveries = 4
	var mu sync.Mutex
	var seen []*primitive.MessageExt
	newConsumer(t, mq.ConsumerConfig{NameServer: namesrv, Topic: topic, Group: group, MaxRetryDelayLevel: 1},
		func(_ context.Context, m *primitive.MessageExt) error {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, m)
			if len(seen) < deliveries {
				return errors.New("downstream unavailable")
			}
			return nil
		})
	waitFor(t, "the message delivered 4 times", 90*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) >= deliveries
	})
	mu.Lock()
	defer mu.Unlock()
	first := seen[0]
	if first.BornTimestamp <= 0 || first.ReconsumeTimes != 0 || first.MsgId != receipt.MessageID {
		t.Fatalf("first delivery: born %d, reconsumed %d, ID %s; want a born timestamp, 0, %s",
			first.BornTimestamp, first.ReconsumeTimes, first.MsgId, receipt.MessageID)
	}
	for i, m := range seen[1:] {
		n := int32(i + 1)
		if m.BornTimestamp != first.BornTimestamp {
			t.Errorf("redelivery %d: born %d, want the original %d", n, m.BornTimestamp, first.BornTimestamp)
		}
		if m.ReconsumeTimes != n {
			t.Errorf("redelivery %d: ReconsumeTimes %d, want %d", n, m.ReconsumeTimes, n)
		}
		if m.MsgId != receipt.MessageID || m.Topic != topic || m.GetKeys() != "k-1" || string(m.Body) != "again" {
			t.Errorf("redelivery %d: ID %s topic %s keys %s body %q; want the original %s %s k-1 again",
				n, m.MsgId, m.Topic, m.GetKeys(), m.Body, receipt.MessageID, topic)
		}
		if m.StoreTimestamp < seen[i].StoreTimestamp {
			t.Errorf("redelivery %d: stored at %d, before the delivery before it (%d)", n, m.StoreTimestamp, seen[i].StoreTimestamp)
		}
		// At delay level 1 (1 s) every redelivery held the message back at
		// least one second more, and it is older than that.
		if f := mq.Failing(m, 1, time.Now()); f != time.Duration(n)*time.Second {
			t.Errorf("redelivery %d: failing for %s, want %ds", n, f, n)
		}
	}
}

func TestHeldBack(t *testing.T) {
	for _, c := range []struct {
		times    int32
		maxLevel int
		want     time.Duration
	}{
		{0, 5, 0},
		{1, 5, 10 * time.Second},                 // level 3
		{2, 5, 40 * time.Second},                 // + level 4 (30 s)
		{3, 5, 100 * time.Second},                // + level 5 (1 m)
		{10, 5, 40*time.Second + 8*time.Minute},  // level 5 from the third on
		{62, 5, 40*time.Second + 60*time.Minute}, // the default bound of an hour
		{5, 1, 5 * time.Second},                  // level 1 throughout
		{4, 2, 20 * time.Second},                 // level 2 (5 s) throughout
		{3, 3, 30 * time.Second},                 // level 3 throughout
		// Levels 3..18 (10 s, 30 s, 1..10 m, 20 m, 30 m, 1 h, 2 h), then 2 h once more.
		{17, 18, 40*time.Second + 55*time.Minute + 50*time.Minute + 3*time.Hour + 2*time.Hour},
		{100000, 1, 100000 * time.Second},
		{math.MaxInt32, 18, math.MaxInt64}, // saturates
	} {
		if got := mq.HeldBack(c.times, c.maxLevel); got != c.want {
			t.Errorf("HeldBack(%d, %d) = %s, want %s", c.times, c.maxLevel, got, c.want)
		}
	}
}

func TestRedeliveriesFor(t *testing.T) {
	for _, c := range []struct {
		d        time.Duration
		maxLevel int
		want     int64
	}{
		{0, 5, 0},
		{10 * time.Second, 5, 1},
		{11 * time.Second, 5, 2},
		{time.Hour, 5, 62},   // 10 s + 30 s + 59 min < 1 h <= 10 s + 30 s + 60 min
		{time.Hour, 1, 3600}, // one second each
		{5 * time.Second, 1, 5},
		{time.Hour, 18, 13}, // 10 s, 30 s, 1..9 m: 55 m 40 s; + 10 m
	} {
		if got := mq.RedeliveriesFor(c.d, c.maxLevel); got != c.want {
			t.Errorf("RedeliveriesFor(%s, %d) = %d, want %d", c.d, c.maxLevel, got, c.want)
		}
	}
}

// Failing is the smaller of the time the broker held the message back and
// its age; an age in the future (a producer's clock ahead) is left out.
func TestFailing(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	msg := func(times int32, born time.Time) *primitive.MessageExt {
		m := &primitive.MessageExt{ReconsumeTimes: times}
		if !born.IsZero() {
			m.BornTimestamp = born.UnixMilli()
		}
		return m
	}
	for _, c := range []struct {
		name string
		m    *primitive.MessageExt
		want time.Duration
	}{
		{"first delivery of an old message", msg(0, now.Add(-3*time.Hour)), 0},
		{"held back less than its age", msg(3, now.Add(-3*time.Hour)), 100 * time.Second},
		{"counted faster than it aged", msg(62, now.Add(-20*time.Minute)), 20 * time.Minute},
		{"no born timestamp", msg(3, time.Time{}), 100 * time.Second},
		{"born in the future", msg(3, now.Add(time.Hour)), 100 * time.Second},
	} {
		if got := mq.Failing(c.m, 5, now); got != c.want {
			t.Errorf("%s: Failing = %s, want %s", c.name, got, c.want)
		}
	}
}
