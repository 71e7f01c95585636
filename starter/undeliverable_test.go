package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/orderflow/orderflow/api"
	"github.com/orderflow/orderflow/bridge"
	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/errclass"
	"github.com/orderflow/orderflow/internal/obs"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/store"
	"github.com/orderflow/orderflow/wire"
	"github.com/orderflow/orderflow/workflows"
)

// Events the engine refuses, and events it cannot take for too long, on
// the real broker, Temporal and PostgreSQL.

// plus24 is the SDK's default data converter, except that it presents the
// occurred_at of every delivery whose event ID starts with "plus24-" at
// +24:00, as message.Parse once let through: the default converter then
// fails as it did (Time.MarshalJSON: timezone hour outside of range).
type plus24 struct{ converter.DataConverter }

func (c plus24) ToPayloads(values ...any) (*commonpb.Payloads, error) {
	for i, v := range values {
		values[i] = at24(v)
	}
	return c.DataConverter.ToPayloads(values...)
}

func (c plus24) ToPayload(v any) (*commonpb.Payload, error) {
	return c.DataConverter.ToPayload(at24(v))
}

func at24(v any) any {
	shift := func(d workflows.Delivery) workflows.Delivery {
		if strings.HasPrefix(d.EventID, "plus24-") {
			d.OccurredAt = d.OccurredAt.In(time.FixedZone("", 24*3600))
		}
		return d
	}
	switch x := v.(type) {
	case workflows.Delivery:
		return shift(x)
	case workflows.Batch:
		ds := make([]workflows.Delivery, len(x.Deliveries))
		for i, d := range x.Deliveries {
			ds[i] = shift(d)
		}
		return workflows.Batch{Deliveries: ds}
	}
	return v
}

// countingDeliver counts the calls of deliver per message ID.
type countingDeliver struct {
	mu    sync.Mutex
	calls map[string]int
}

func (c *countingDeliver) wrap(d bridge.DeliverFunc) bridge.DeliverFunc {
	return func(ctx context.Context, e fsm.Event, src wire.Envelope) error {
		c.mu.Lock()
		if c.calls == nil {
			c.calls = map[string]int{}
		}
		c.calls[src.MessageID]++
		c.mu.Unlock()
		return d(ctx, e, src)
	}
}

func (c *countingDeliver) of(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[id]
}

// An event the SDK cannot encode for Temporal is parked at the first
// refusal with the converter's error as its reason, acked, and never
// delivered again: a sentinel published after it arrives, and by then (and
// a redelivery's delay later) the bridge was handed it exactly once and its
// dead letter was seen once.
func TestBridgeParksAnEventTemporalRefuses(t *testing.T) {
	e := newEnv(t, 1)
	e.startWorker(t)
	e.terminate(t, 2)
	tc, err := client.NewLazyClient(client.Options{HostPort: testenv.TemporalAddress(), Namespace: testenv.TemporalNamespace(),
		Logger: testenv.QuietTemporalLogger(), DataConverter: plus24{converter.GetDefaultDataConverter()}})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	var counted countingDeliver
	cfg := e.config()
	startBridge(t, cfg, counted.wrap(temporalDeliver(tc, e.taskQueue, testParams)), storePark(store.New(e.db)))

	bad := e.event(0, 1, fsm.Created)
	bad.EventID = "plus24-" + bad.EventID
	published := time.Now()
	receipt, err := e.producer.PublishEvent(context.Background(), e.topic, bad)
	if err != nil {
		t.Fatal(err)
	}
	sentinel := e.event(1, 1, fsm.Created)
	e.publish(t, sentinel)
	e.waitAccounted(t, []fsm.Key{sentinel.Key()}, 1, 60*time.Second)
	t.Logf("parked and the sentinel recorded %s after publishing", time.Since(published).Round(time.Millisecond))
	// Long enough for a hand-back to come back (retry-for, then delay
	// level 1): a refusal must not have been handed back at all.
	time.Sleep(cfg.RetryFor + 2*time.Second)

	if n := counted.of(receipt.MessageID); n != 1 {
		t.Errorf("the refused message was delivered to Temporal %d times, want 1", n)
	}
	body, _ := json.Marshal(bad)
	d, ok := e.deadLetters(t)[string(body)]
	if !ok {
		t.Fatalf("no dead letter holds the refused event")
	}
	wantReason := fmt.Sprintf("undeliverable: deliver order event %s to %s: ", bad.Key(), api.WorkflowID(bad.OrderID))
	if !strings.HasPrefix(d.Reason, wantReason) || !strings.Contains(d.Reason, "unable to encode") ||
		!strings.Contains(d.Reason, "timezone hour outside of range [0,23]") {
		t.Errorf("reason %q, want %q and the converter's error", d.Reason, wantReason)
	}
	if d.TimesSeen != 1 || d.MessageID != receipt.MessageID || d.Keys != bad.OrderID || d.Tags != string(fsm.Created) {
		t.Errorf("dead letter %+v, want seen once, message %s, keys %s, tag CREATED", d, receipt.MessageID, bad.OrderID)
	}
	if keys := e.recordedKeys(t); keys[bad.Key()] {
		t.Errorf("the refused event %s reached order_events", bad.Key())
	}
}

// padded is a valid event of order n at version v whose body carries an
// unknown field of pad bytes (ignored by the contract, carried in the
// delivery's source).
func (e *env) padded(t *testing.T, n int, v int64, pad int) (fsm.Event, []byte) {
	t.Helper()
	ev := e.event(n, v, fsm.Created)
	raw, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	m["pad"] = strings.Repeat("p", pad)
	body, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return ev, body
}

// A backlog of one order's events too large for one signal: Temporal
// refuses it whole (Blob data size exceeds limit, a permanent error); the
// bridge splits it into signals within the budget, in order, and every
// event arrives.
func TestBridgeSplitsABatchOverTheBlobLimit(t *testing.T) {
	e := newEnv(t, 1)
	e.startWorker(t)
	e.terminate(t, 2)
	const n, pad = 28, 60000

	// The premise: these deliveries in one signal are over the limit,
	// and the real server refuses them for good.
	var ds []workflows.Delivery
	size := 0
	for v := int64(1); v <= n; v++ {
		ev, body := e.padded(t, 1, v, pad)
		env := wire.NewEnvelope(e.topic, fmt.Sprintf("M%d", v), ev.OrderID, string(ev.Status), body, time.Time{}, false)
		ds = append(ds, workflows.Delivery{Event: ev, Source: &env})
	}
	if size, _ = workflows.EncodedSize(workflows.Batch{Deliveries: ds}); size <= workflows.BlobSizeLimit {
		t.Fatalf("the batch encodes to %d bytes, not over the %d limit", size, workflows.BlobSizeLimit)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	err := workflows.DeliverBatch(ctx, e.tc, e.taskQueue, testParams, ds[0].OrderID, ds)
	cancel()
	if err == nil || errclass.Of(err) != errclass.Permanent || !strings.Contains(err.Error(), "Blob data size exceeds limit") {
		t.Fatalf("one signal of %d bytes: %v (%s); want the server's permanent refusal", size, err, errclass.Of(err))
	}

	// The bridge, its backlog waiting: one callback takes them all.
	var want []fsm.Key
	for v := int64(1); v <= n; v++ {
		ev, body := e.padded(t, 0, v, pad)
		e.publishRaw(t, body, ev.OrderID, string(ev.Status))
		want = append(want, ev.Key())
	}
	cfg := e.config()
	cfg.BatchSize, cfg.BatchSignals = 32, true
	var mu sync.Mutex
	var signals []int // events per order-events signal
	many := temporalDeliverMany(e.tc, e.taskQueue, testParams)
	b, err := newBridge(cfg, bridgeDeps{Log: obs.NewLogger(testWriter(t), slog.LevelWarn, "bridge"), Registry: prometheus.NewRegistry(),
		Deliver: temporalDeliver(e.tc, e.taskQueue, testParams),
		DeliverMany: func(ctx context.Context, orderID string, items []bridge.Item) error {
			mu.Lock()
			signals = append(signals, len(items))
			mu.Unlock()
			return many(ctx, orderID, items)
		},
		Park: storePark(store.New(e.db))})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Stop() })
	e.waitAccounted(t, want, 0, 90*time.Second)
	waitMetric(t, b.Addr(), `orderflow_bridge_messages_total{result="signalled"}`, n)
	mu.Lock()
	t.Logf("events per order-events signal: %v", signals)
	mu.Unlock()

	// Every signal in the order's history is within the budget; the order
	// ends at the last version.
	id := api.WorkflowID(want[0].OrderID)
	inSignals := 0
	it := e.tc.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", id, err)
		}
		a := ev.GetWorkflowExecutionSignaledEventAttributes()
		if a == nil {
			continue
		}
		if s := a.GetInput().Size(); s > workflows.SignalBudget {
			t.Errorf("a %s signal of %d bytes, over the budget %d", a.GetSignalName(), s, workflows.SignalBudget)
		}
		var batch workflows.Batch
		switch a.GetSignalName() {
		case api.SignalEvents:
			if err := converter.GetDefaultDataConverter().FromPayloads(a.GetInput(), &batch); err != nil {
				t.Fatal(err)
			}
			inSignals += len(batch.Deliveries)
		case api.SignalEvent:
			inSignals++
		}
	}
	if inSignals < n {
		t.Errorf("%d events in %s's signals, want %d", inSignals, id, n)
	}
	var version int64
	if err := e.sqlDB.QueryRow(`SELECT version FROM orders WHERE order_id = $1`, want[0].OrderID).Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version != n {
		t.Errorf("order at version %d, want %d", version, n)
	}
}

// Temporal unreachable for longer than -undeliverable-after: the message
// goes back to the broker, comes again, and once it has been failing past
// the bound it is parked as undeliverable with how long and the last
// error, under the message ID its producer got.
func TestBridgeParksWhatFailsPastTheBound(t *testing.T) {
	e := newEnv(t, 1)
	e.terminate(t, 1)
	proxy := testenv.StartProxy(t, testenv.TemporalAddress())
	proxy.Cut()
	cfg := e.config()
	cfg.TemporalAddress = proxy.Addr()
	cfg.RetryFor, cfg.AttemptTimeout = time.Second, 300*time.Millisecond
	cfg.MaxRetryDelayLevel, cfg.UndeliverableAfter = 1, 4*time.Second
	tc, err := client.NewLazyClient(client.Options{HostPort: cfg.TemporalAddress, Namespace: cfg.TemporalNamespace,
		Logger: testenv.QuietTemporalLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	b := startBridge(t, cfg, temporalDeliver(tc, e.taskQueue, testParams), storePark(store.New(e.db)))
	ev := e.event(0, 1, fsm.Created)
	receipt, err := e.producer.PublishEvent(context.Background(), e.topic, ev)
	if err != nil {
		t.Fatal(err)
	}
	e.waitAccounted(t, nil, 1, 90*time.Second)
	body, _ := json.Marshal(ev)
	d, ok := e.deadLetters(t)[string(body)]
	if !ok {
		t.Fatal("the dead letter does not hold the event as published")
	}
	var failing time.Duration
	var rest string
	if _, err := fmt.Sscanf(d.Reason, "undeliverable: not delivered for %s", &rest); err == nil {
		failing, err = time.ParseDuration(strings.TrimSuffix(rest, ":"))
		if err != nil {
			failing = 0
		}
	}
	if failing < cfg.UndeliverableAfter || !strings.Contains(d.Reason, ": temporal: gave up after ") {
		t.Errorf("reason %q, want not delivered for at least %s and the last error", d.Reason, cfg.UndeliverableAfter)
	}
	if d.MessageID != receipt.MessageID || d.TimesSeen != 1 {
		t.Errorf("dead letter of message %s seen %d times, want %s seen once", d.MessageID, d.TimesSeen, receipt.MessageID)
	}
	if got := metric(t, b.Addr(), `orderflow_bridge_messages_total{result="retry"}`); got < 4 {
		t.Errorf("retry = %v, want the message handed back at least 4 times first (1 s each)", got)
	}
	waitMetric(t, b.Addr(), `orderflow_bridge_messages_total{result="parked"}`, 1)
	waitMetric(t, b.Addr(), `orderflow_bridge_rejections_total{reason="undeliverable"}`, 1)
}
