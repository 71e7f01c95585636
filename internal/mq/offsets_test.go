package mq_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
)

// TestOffsetsOnBroker reads the offsets of a fresh topic's queues after
// publishing to it: each queue's maximum is what the send receipts say it
// stored, its minimum 0, and the group has committed nothing; once a
// consumer of the group has taken every message, its committed offsets
// reach the maximums.
func TestOffsetsOnBroker(t *testing.T) {
	namesrv := testenv.RocketMQNamesrv(t)
	topic, group := uniq.Name("offsets"), uniq.Name("offsets-g")
	testenv.CreateTopic(t, topic, 4)
	const n = 40
	perQ := testenv.Publish(t, topic, n)

	r, err := mq.NewOffsetReader(namesrv, "", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	qs, err := r.Offsets(ctx, group, topic)
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != 4 {
		t.Fatalf("%d queues, want 4: %+v", len(qs), qs)
	}
	var stored int64
	for i, q := range qs {
		if q.Topic != topic || q.QueueID != i || q.Broker == "" || q.BrokerAddr == "" {
			t.Errorf("queue %d: %+v", i, q)
		}
		if q.Min != 0 || q.Max != perQ[i] || q.Committed != -1 {
			t.Errorf("queue %d: min %d max %d committed %d, want 0, %d (receipts), -1", i, q.Min, q.Max, q.Committed, perQ[i])
		}
		stored += q.Max - q.Min
	}
	if stored != n {
		t.Errorf("the queues store %d messages, %d were published", stored, n)
	}

	var got atomic.Int64
	c, err := mq.NewConsumer(mq.ConsumerConfig{NameServer: namesrv, Topic: topic, Group: group, Goroutines: 4},
		func(context.Context, *primitive.MessageExt) error { got.Add(1); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Stop(context.Background()) }()
	// The client commits its offsets every 5 s.
	testenv.WaitFor(t, time.Minute, func() error {
		qs, err := r.Offsets(ctx, group, topic)
		if err != nil {
			return err
		}
		for _, q := range qs {
			if q.Committed != q.Max {
				return fmt.Errorf("queue %d: committed %d of max %d (%d messages consumed)", q.QueueID, q.Committed, q.Max, got.Load())
			}
		}
		return nil
	})

	if _, err := r.Offsets(ctx, group, uniq.Name("no-such-topic")); !errors.Is(err, mq.ErrNoTopic) {
		t.Errorf("an unknown topic: err = %v, want ErrNoTopic", err)
	}
}

// TestOffsetsNameTheUnreachableNameServer: a name server nobody listens on
// fails the read quickly, with its address in the error.
func TestOffsetsNameTheUnreachableNameServer(t *testing.T) {
	testenv.SkipShort(t, "a closed local port")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	r, err := mq.NewOffsetReader(addr, "", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	begin := time.Now()
	_, err = r.Offsets(context.Background(), "g", "t")
	if err == nil || !strings.Contains(err.Error(), addr) {
		t.Fatalf("err = %v, want one naming %s", err, addr)
	}
	if took := time.Since(begin); took > 15*time.Second {
		t.Errorf("took %v", took)
	}
	if _, err := mq.NewOffsetReader(" , ", "", "", nil); err == nil {
		t.Error("an empty name server list was accepted")
	}
}
