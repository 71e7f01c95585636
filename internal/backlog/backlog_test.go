package backlog_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/orderflow/orderflow/internal/backlog"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
)

func TestLag(t *testing.T) {
	for _, c := range []struct {
		min, max, committed, want int64
	}{
		{0, 0, -1, 0},      // empty queue, no offset
		{0, 250, -1, 250},  // nothing committed: from the first message
		{40, 250, -1, 210}, // ... the first still stored
		{0, 250, 100, 150}, // committed
		{0, 250, 250, 0},   // drained
		{40, 250, 10, 210}, // committed below min: retention deleted the rest
		{0, 5, 7, 0},       // committed past max (a broker that lost data): never negative
	} {
		if got := backlog.Lag(c.min, c.max, c.committed); got != c.want {
			t.Errorf("Lag(min %d, max %d, committed %d) = %d, want %d", c.min, c.max, c.committed, got, c.want)
		}
	}
}

func TestNewReaderRejectsBadInput(t *testing.T) {
	for _, cfg := range []backlog.Config{
		{NameServer: "127.0.0.1:9876", Group: "g"},
		{NameServer: "127.0.0.1:9876", Topic: "t"},
		{NameServer: " ", Topic: "t", Group: "g"},
	} {
		if r, err := backlog.NewReader(cfg); err == nil {
			r.Close()
			t.Errorf("NewReader(%+v) succeeded", cfg)
		}
	}
}

// TestReaderListsAMissingRetryTopic: before the group's first consumer the
// broker has no retry topic; the report says so and counts the topic's
// messages. A topic that does not exist is an error.
func TestReaderListsAMissingRetryTopic(t *testing.T) {
	namesrv := testenv.RocketMQNamesrv(t)
	topic, group := uniq.Name("backlog"), uniq.Name("backlog-g")
	testenv.CreateTopic(t, topic, 2)
	perQ := testenv.Publish(t, topic, 30)
	r, err := backlog.NewReader(backlog.Config{NameServer: namesrv, Topic: topic, Group: group})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rep, err := r.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Total != 30 || len(rep.Queues) != 2 || len(rep.Missing) != 1 || rep.Missing[0] != backlog.RetryTopic(group) {
		t.Fatalf("report %+v, want 30 messages in 2 queues and the retry topic missing", rep)
	}
	for i, q := range rep.Queues {
		if q.Topic != topic || q.Queue != i || q.Committed != nil || q.Lag != perQ[i] {
			t.Errorf("queue %d: %+v, want lag %d (receipts), nothing committed", i, q, perQ[i])
		}
	}

	r2, err := backlog.NewReader(backlog.Config{NameServer: namesrv, Topic: uniq.Name("no-such-topic"), Group: group})
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if _, err := r2.Read(context.Background()); err == nil || !strings.Contains(err.Error(), "no such topic") {
		t.Errorf("a topic that does not exist: err = %v", err)
	}
}

// TestCollectorCountsFailedReads: a collector reading from a name server
// nobody listens on exports no lag series and counts each failed read;
// gathering never fails. A collector whose reads succeed exports one series
// per queue, and keeps them through a later failure.
func TestCollectorCountsFailedReads(t *testing.T) {
	testenv.SkipShort(t, "a closed local port")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	r, err := backlog.NewReader(backlog.Config{NameServer: addr, Topic: "t", Group: "g"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c := backlog.NewCollector(r.Read, time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)))
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		c.Refresh(ctx)
	}
	lag, errs := gather(t, reg)
	if len(lag) != 0 || errs != 2 {
		t.Fatalf("after 2 failed reads: %d lag series, %v errors; want none and 2", len(lag), errs)
	}

	// Reads that succeed, then one that fails.
	fail := false
	read := func(context.Context) (backlog.Report, error) {
		if fail {
			return backlog.Report{}, errors.New("planted failure")
		}
		return backlog.Report{Group: "g", Topic: "t", Total: 7, Queues: []backlog.Queue{
			{Topic: "t", Broker: "broker-a", Queue: 0, Max: 5, Lag: 5},
			{Topic: "t", Broker: "broker-a", Queue: 1, Max: 2, Lag: 2},
			{Topic: "%RETRY%g", Broker: "broker-a", Queue: 0},
		}}, nil
	}
	c = backlog.NewCollector(read, time.Minute, slog.New(slog.NewTextHandler(io.Discard, nil)))
	reg = prometheus.NewRegistry()
	reg.MustRegister(c)
	c.Refresh(ctx)
	fail = true
	c.Refresh(ctx)
	lag, errs = gather(t, reg)
	if len(lag) != 3 || lag["t/broker-a/0"] != 5 || lag["t/broker-a/1"] != 2 || lag["%RETRY%g/broker-a/0"] != 0 || errs != 1 {
		t.Fatalf("lag %v, errors %v; want 3 series (5, 2, 0) and 1 error", lag, errs)
	}
}

// gather returns the lag series (topic/broker/queue -> value) and the
// error counter of reg.
func gather(t *testing.T, reg *prometheus.Registry) (map[string]float64, float64) {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	lag := map[string]float64{}
	var errs float64
	for _, f := range fams {
		switch f.GetName() {
		case backlog.LagMetric:
			for _, m := range f.GetMetric() {
				lag[label(m, "topic")+"/"+label(m, "broker")+"/"+label(m, "queue")] = m.GetGauge().GetValue()
			}
		case backlog.ErrorsMetric:
			errs = f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return lag, errs
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
