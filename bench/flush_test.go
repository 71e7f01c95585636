package main

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/scenario"
)

func TestParseFlushFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-flush-messages", "5"},
		{"-flush-senders", "0"},
		{"-flush-orders", "-1"},
		{"-flush-async-ports", "25876"},
		{"-flush-async-ports", "25876,26911,1"},
		{"-flush-sync-ports", "25876,26921"},  // the async name server's port
		{"-flush-sync-ports", "25886,26912"},  // the async broker's port + 1
		{"-flush-sync-ports", "25886,26913"},  // its port - 2 is the async broker's + 1
		{"-flush-async-ports", "25876,65535"}, // the broker also takes port + 1
	} {
		if _, _, _, err := parse(args); err == nil {
			t.Errorf("parse(%q) accepted bad input", args)
		}
	}
	_, _, o, err := parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	f := o.flush
	if !f.Enabled || f.Messages != 5000 || f.Senders != 8 || f.Orders != 300 ||
		f.AsyncPorts[0] != 25876 || f.AsyncPorts[1] != 26911 || f.SyncPorts[0] != 25886 || f.SyncPorts[1] != 26921 {
		t.Errorf("flush defaults %+v", f)
	}
	if _, _, o, err = parse([]string{"-flush=false"}); err != nil || o.flush.Enabled {
		t.Errorf("-flush=false: enabled %v, err %v", o.flush.Enabled, err)
	}
}

func TestParseFlushDiskType(t *testing.T) {
	out := `14:25:51,069 |-INFO in org.apache.rocketmq.logging.ch.qos.logback ... Logger[RocketmqStoreError]
============127.0.0.1:10911============
flushConsumerOffsetInterval                       =  5000
flushDiskType                                     =  SYNC_FLUSH
flushIntervalCommitLog                            =  500
`
	if got, ok := parseFlushDiskType(out); !ok || got != "SYNC_FLUSH" {
		t.Errorf("parseFlushDiskType = %q, %v; want SYNC_FLUSH", got, ok)
	}
	if _, ok := parseFlushDiskType("flushDiskTypeX = A\nconnect to 127.0.0.1:10911 failed\n"); ok {
		t.Error("parseFlushDiskType found a flush type in output without one")
	}
}

func TestFlushBrokerEnvOverridesInherited(t *testing.T) {
	t.Setenv("ORDERFLOW_DATA", "/elsewhere")
	t.Setenv("ORDERFLOW_ROCKETMQ_PROFILE", "ha")
	t.Setenv("ORDERFLOW_BROKER_FLUSH", "SYNC_FLUSH")
	f := newFlushBroker("/repo", t.TempDir(), asyncFlush, []int{25876, 26911})
	if f.Data != "/repo/.data/bench-async-flush" || f.namesrv() != "127.0.0.1:25876" || f.broker() != "127.0.0.1:26911" {
		t.Errorf("broker %+v", f)
	}
	// exec keeps the last value of a key: ours come last.
	last := map[string]string{}
	for _, kv := range f.env() {
		k, v, _ := strings.Cut(kv, "=")
		last[k] = v
	}
	for k, want := range map[string]string{"ORDERFLOW_DATA": f.Data, "ORDERFLOW_ROCKETMQ_PROFILE": "single",
		"ORDERFLOW_BROKER_FLUSH": asyncFlush, "ORDERFLOW_NAMESRV_PORT": "25876", "ORDERFLOW_BROKER_PORT": "26911"} {
		if last[k] != want {
			t.Errorf("%s = %q, want %q", k, last[k], want)
		}
	}
}

// fakePublisher records the topics it was sent to, in order, and fails the
// sends whose body is "fail".
type fakePublisher struct {
	mu    sync.Mutex
	order *[]string
}

func (p *fakePublisher) Publish(_ context.Context, m mq.Message) (mq.Receipt, error) {
	p.mu.Lock()
	*p.order = append(*p.order, m.Topic)
	p.mu.Unlock()
	if string(m.Body) == "fail" {
		return mq.Receipt{}, errors.New("refused")
	}
	return mq.Receipt{}, nil
}

func TestMeasureSendsHalvesInABBAOrder(t *testing.T) {
	var order []string
	fake := &fakePublisher{order: &order}
	const n = 11
	var msgs [2][]mq.Message
	for i := range n {
		msgs[0] = append(msgs[0], mq.Message{Topic: "async", Body: []byte("x")})
		body := "x"
		if i == 7 {
			body = "fail"
		}
		msgs[1] = append(msgs[1], mq.Message{Topic: "sync", Body: []byte(body)})
	}
	res, err := measureSends(context.Background(), [2]scenario.Publisher{fake, fake}, msgs, n, 1)
	if err != nil {
		t.Fatal(err)
	}
	// Halves of 5 and 6: async 5, sync 5, sync 6, async 6.
	want := strings.Repeat("async ", 5) + strings.Repeat("sync ", 11) + strings.Repeat("async ", 6)
	if got := strings.Join(order, " ") + " "; got != want {
		t.Errorf("send order\n%s\nwant\n%s", got, want)
	}
	if res[0].Messages != n || res[0].Errors != 0 || res[1].Messages != n-1 || res[1].Errors != 1 {
		t.Errorf("results %+v", res)
	}
	if res[0].Rate <= 0 || res[0].P99 < res[0].P50 || res[0].Senders != 1 {
		t.Errorf("async result %+v", res[0])
	}
}

func TestSendBatchConcurrentSendsEachMessageOnce(t *testing.T) {
	var order []string
	fake := &fakePublisher{order: &order}
	msgs := make([]mq.Message, 100)
	for i := range msgs {
		msgs[i] = mq.Message{Topic: "t", Body: []byte("x")}
	}
	lat, failed, _, firstErr := sendBatch(context.Background(), fake, msgs, 8)
	if len(lat) != 100 || failed != 0 || firstErr != nil || len(order) != 100 {
		t.Errorf("%d latencies, %d failed (%v), %d sends; want 100, 0, 100", len(lat), failed, firstErr, len(order))
	}
}
