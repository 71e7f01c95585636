package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/orderflow/orderflow/internal/backlog"
	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
)

// TestLagCountsPublishedThenDrained publishes 1,000 messages to a fresh
// topic of 4 queues while no consumer of the group runs: `orderflow lag`
// and the broker-side lag metric (the collector the worker runs) both
// count 1,000, queue by queue as the send receipts say. A consumer of the
// group then takes every message: both reach 0, with the committed offsets
// at the ends of the topic's queues.
func TestLagCountsPublishedThenDrained(t *testing.T) {
	namesrv := testenv.RocketMQNamesrv(t)
	topic, group := uniq.Name("lag"), uniq.Name("lag-g")
	testenv.CreateTopic(t, topic, 4)
	testenv.CreateTopic(t, backlog.RetryTopic(group), 1)
	const n = 1000
	perQ := testenv.Publish(t, topic, n)
	args := []string{"lag", "-rocketmq-namesrv", namesrv, "-topic", topic, "-consumer-group", group}

	lagJSON := func() (backlog.Report, error) {
		code, out, errOut := runCmd(append(args, "-json")...)
		var rep backlog.Report
		if code != 0 {
			return rep, fmt.Errorf("lag -json: exit %d\n%s", code, errOut)
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			return rep, fmt.Errorf("lag -json: %v\n%s", err, out)
		}
		return rep, nil
	}
	rep, err := lagJSON()
	if err != nil {
		t.Fatal(err)
	}
	if rep.Total != n || len(rep.Queues) != 5 || len(rep.Missing) != 0 || rep.Group != group || rep.Topic != topic {
		t.Fatalf("before any consumer: %+v, want total %d over 4+1 queues", rep, n)
	}
	for i, q := range rep.Queues[:4] {
		if q.Topic != topic || q.Queue != i || q.Lag != perQ[i] || q.Max != perQ[i] || q.Committed != nil {
			t.Errorf("queue %d: %+v, want lag %d (receipts), nothing committed", i, q, perQ[i])
		}
	}
	if q := rep.Queues[4]; q.Topic != backlog.RetryTopic(group) || q.Lag != 0 {
		t.Errorf("retry queue: %+v", q)
	}

	code, out, errOut := runCmd(args...)
	if code != 0 {
		t.Fatalf("lag: exit %d\n%s%s", code, out, errOut)
	}
	t.Logf("orderflow lag:\n%s", out)
	total := regexp.MustCompile(`(?m)^total: (\d+) messages not consumed by group ` + regexp.QuoteMeta(group) + ` \(` +
		regexp.QuoteMeta(topic) + ` (\d+), ` + regexp.QuoteMeta(backlog.RetryTopic(group)) + ` 0\)`)
	if m := total.FindStringSubmatch(out); m == nil || m[1] != "1000" || m[2] != "1000" {
		t.Errorf("the table's total line does not say 1000:\n%s", out)
	}
	if rows := regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(topic)+`\s+\S+\s+\d\s+0\s+\d+\s+-\s+\d+$`).FindAllString(out, -1); len(rows) != 4 {
		t.Errorf("%d rows of the topic's queues with nothing committed, want 4:\n%s", len(rows), out)
	}

	// The metric the worker exports, from the same offsets.
	r, err := backlog.NewReader(backlog.Config{NameServer: namesrv, Topic: topic, Group: group})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	col := backlog.NewCollector(r.Read, time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)))
	reg := prometheus.NewRegistry()
	reg.MustRegister(col)
	metric := func() (float64, int, error) {
		col.Refresh(context.Background())
		fams, err := reg.Gather()
		if err != nil {
			return 0, 0, err
		}
		var sum float64
		var series int
		for _, f := range fams {
			if f.GetName() == backlog.LagMetric {
				for _, m := range f.GetMetric() {
					sum += m.GetGauge().GetValue()
					series++
				}
			}
		}
		return sum, series, nil
	}
	if sum, series, err := metric(); err != nil || sum != n || series != 5 {
		t.Fatalf("%s: sum %v over %d series (%v), want %d over 5", backlog.LagMetric, sum, series, err, n)
	}

	// A consumer of the group drains the topic; the client commits its
	// offsets every 5 s.
	var got atomic.Int64
	c, err := mq.NewConsumer(mq.ConsumerConfig{NameServer: namesrv, Topic: topic, Group: group, Goroutines: 8, BatchSize: 16},
		func(context.Context, *primitive.MessageExt) error { got.Add(1); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Stop(context.Background()) }()
	testenv.WaitFor(t, 2*time.Minute, func() error {
		rep, err := lagJSON()
		if err != nil {
			return err
		}
		if rep.Total != 0 {
			return fmt.Errorf("lag %d after the consumer took %d messages", rep.Total, got.Load())
		}
		for _, q := range rep.Queues[:4] {
			if q.Committed == nil || *q.Committed != q.Max {
				return fmt.Errorf("queue %s/%d: committed %v of max %d", q.Topic, q.Queue, q.Committed, q.Max)
			}
		}
		return nil
	})
	if sum, series, err := metric(); err != nil || sum != 0 || series != 5 {
		t.Errorf("%s after draining: sum %v over %d series (%v), want 0 over 5", backlog.LagMetric, sum, series, err)
	}
	if got.Load() < n {
		t.Errorf("the consumer took %d messages, %d were published", got.Load(), n)
	}
	code, out, _ = runCmd(args...)
	if code != 0 || !strings.Contains(out, "total: 0 messages not consumed") {
		t.Errorf("lag after draining: exit %d\n%s", code, out)
	}
}

// TestLagNamesTheUnreachableNameServer: exit 1 and a one-line error
// naming the name server nobody listens on; bad usage exits 2.
func TestLagNamesTheUnreachableNameServer(t *testing.T) {
	testenv.SkipShort(t, "a closed local port")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	code, out, errOut := runCmd("lag", "-rocketmq-namesrv", addr)
	if code != 1 || out != "" || !strings.Contains(errOut, "name server "+addr) || !strings.Contains(errOut, "make up") ||
		strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
		t.Fatalf("lag against %s: exit %d\n%s%s", addr, code, out, errOut)
	}
	t.Logf("lag against %s: %s", addr, errOut)
	for _, args := range [][]string{{"lag", "-consumer-group", ""}, {"lag", "extra"}, {"lag", "-no-such-flag"}} {
		if code, _, errOut := runCmd(args...); code != 2 {
			t.Errorf("%q: exit %d, want 2\n%s", args, code, errOut)
		}
	}
	if code, _, errOut := runCmd("lag", "-h"); code != 0 || !strings.Contains(errOut, "ROCKETMQ_NAMESRV") || !strings.Contains(errOut, "ORDERFLOW_CONSUMER_GROUP") {
		t.Errorf("lag -h: exit %d\n%s", code, errOut)
	}
}
