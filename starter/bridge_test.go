package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/orderflow/orderflow/api"
	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/obs"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/store"
	"github.com/orderflow/orderflow/workflows"
)

// Valid messages become order_events rows through Temporal; invalid ones
// become dead_letters rows with their reasons and do not hold up the valid
// messages behind them in the same queue.
func TestBridgeSignalsValidAndParksInvalid(t *testing.T) {
	e := newEnv(t, 1) // one queue: bad messages sit in front of good ones
	e.startWorker(t)
	const orders = 8
	e.terminate(t, orders)

	missingUser := e.event(100, 1, fsm.Created)
	raw, _ := json.Marshal(missingUser)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	delete(m, "user_id")
	missingUserBody, _ := json.Marshal(m)
	badStatusBody := strings.Replace(string(raw), `"CREATED"`, `"REFUNDED"`, 1)
	oversizeBody := `{"pad":"` + strings.Repeat("x", 70000-10) + `"}`
	bad := []struct{ body, keys, reason string }{
		{`{"order_id": "o-1", "status": `, "o-1", "malformed_json: unexpected end of JSON input"},
		{string(missingUserBody), missingUser.OrderID, "missing_field: user_id: is required"},
		{badStatusBody, missingUser.OrderID, `invalid_field: status: "REFUNDED" is not a lifecycle state`},
		// The producer compresses bodies over 4 KiB: the bridge refuses to
		// inflate this one past the limit and parks it as received.
		{oversizeBody, "", "oversize: compressed body inflates past 65536 bytes"},
		{`[1,2,3]`, "x", "not_object: body is a JSON array, want an object"},
	}
	for _, b := range bad {
		e.publishRaw(t, []byte(b.body), b.keys, "PAID")
	}
	var want []fsm.Key
	var first fsm.Event
	for n := 0; n < orders; n++ {
		for v, s := range []fsm.Status{fsm.Created, fsm.Paid} {
			ev := e.event(n, int64(v+1), s)
			e.publish(t, ev)
			want = append(want, ev.Key())
			if n == 0 && v == 1 {
				first = ev
			}
		}
	}
	// A duplicate (producer retry) and a valid event whose key and tag
	// disagree with the body: both are signalled, the body wins.
	e.publish(t, first)
	odd := e.event(orders-1, 3, fsm.Shipped)
	oddBody, _ := json.Marshal(odd)
	e.publishRaw(t, oddBody, "some-other-order", "CANCELLED")
	want = append(want, odd.Key())

	b := startBridge(t, e.config(), temporalDeliver(e.tc, e.taskQueue, testParams), storePark(store.New(e.db)))
	e.waitAccounted(t, want, len(bad), 90*time.Second)

	dead := e.deadLetters(t)
	for _, w := range bad {
		r, ok := dead[w.body]
		if !ok {
			t.Errorf("no dead letter holds the body %.40q", w.body)
			continue
		}
		if r.Reason != w.reason || r.Topic != e.topic || r.MessageID == "" || r.Keys != w.keys || r.Tags != "PAID" {
			t.Errorf("dead letter %.40q: %+v, want reason %q, topic %s, keys %q, tag PAID", w.body, r, w.reason, e.topic, w.keys)
		}
	}
	var status string
	var version int64
	if err := e.sqlDB.QueryRow(`SELECT status, version FROM orders WHERE order_id = $1`, odd.OrderID).Scan(&status, &version); err != nil {
		t.Fatal(err)
	}
	if status != string(fsm.Shipped) || version != 3 {
		t.Errorf("order %s is %s@%d, want SHIPPED@3 (the body is authoritative)", odd.OrderID, status, version)
	}

	// Every message is accounted for in the metrics, and the probes answer.
	signalled := float64(len(want) + 1)
	waitMetric(t, b.Addr(), `orderflow_bridge_messages_total{result="signalled"}`, signalled)
	// The last message's other series (its result, its latency, the
	// in-flight gauge, the lag) move just after the signalled count:
	// poll until each says what it must.
	final := map[string]float64{
		`orderflow_bridge_messages_total{result="parked"}`:              float64(len(bad)),
		`orderflow_bridge_messages_total{result="retry"}`:               0,
		`orderflow_bridge_rejections_total{reason="oversize"}`:          1,
		`orderflow_bridge_rejections_total{reason="not_object"}`:        1,
		`orderflow_bridge_envelope_mismatch_total{field="keys"}`:        1,
		`orderflow_bridge_envelope_mismatch_total{field="tag"}`:         1,
		`orderflow_bridge_event_latency_seconds_count`:                  signalled,
		`orderflow_bridge_store_latency_seconds_count`:                  signalled + float64(len(bad)),
		`orderflow_bridge_publish_to_store_seconds_count`:               signalled + float64(len(bad)),
		`orderflow_bridge_in_flight`:                                    0,
		fmt.Sprintf(`orderflow_bridge_consumer_lag{topic=%q}`, e.topic): 0, // everything is consumed
	}
	testenv.WaitFor(t, 10*time.Second, func() error {
		var off []string
		for series, v := range final {
			if got := metric(t, b.Addr(), series); got != v {
				off = append(off, fmt.Sprintf("%s = %v, want %v", series, got, v))
			}
		}
		if len(off) > 0 {
			return errors.New(strings.Join(off, "; "))
		}
		return nil
	})
	// A failed attempt is retried in-process, so on a busy machine a slow
	// Temporal may cost an attempt or two without changing the outcome.
	t.Logf("attempts to reach Temporal that failed and were retried: %v",
		metric(t, b.Addr(), `orderflow_bridge_attempt_errors_total{target="temporal"}`))
	if s := httpStatus(t, "http://"+b.Addr()+"/healthz"); s != 200 {
		t.Errorf("/healthz = %d", s)
	}
	if s := httpStatus(t, "http://"+b.Addr()+"/readyz"); s != 200 {
		t.Errorf("/readyz = %d", s)
	}
	if err := b.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if s := httpStatusErr("http://" + b.Addr() + "/healthz"); s == 200 {
		t.Errorf("/healthz still answers after Stop")
	}
}

func waitMetric(t *testing.T, addr, series string, want float64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := metric(t, addr, series)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s = %v, want %v", series, got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// httpStatusErr is the status of GET url, or 0 when nothing answers.
func httpStatusErr(url string) int {
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Temporal and PostgreSQL unreachable from the bridge: nothing is acked,
// nothing is parked wrongly, and once they are back every message arrives.
func TestBridgeOutageLosesNothing(t *testing.T) {
	e := newEnv(t, 2)
	e.startWorker(t)
	const orders = 6
	e.terminate(t, orders)

	temporalProxy := testenv.StartProxy(t, testenv.TemporalAddress())
	temporalProxy.Cut()
	pgAddr := pgHostPort(t, e.dsn)
	pgProxy := testenv.StartProxy(t, pgAddr)
	pgProxy.Cut()

	cfg := e.config()
	cfg.TemporalAddress = temporalProxy.Addr()
	tc, err := client.NewLazyClient(client.Options{HostPort: cfg.TemporalAddress, Namespace: cfg.TemporalNamespace,
		Logger: testenv.QuietTemporalLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	parkDB := store.New(openDB(t, strings.Replace(e.dsn, pgAddr, pgProxy.Addr(), 1)))
	b := startBridge(t, cfg, temporalDeliver(tc, e.taskQueue, testParams), storePark(parkDB),
		obs.TemporalCheck(tc), obs.Check{Name: "postgres", Check: parkDB.Ping})
	var want []fsm.Key
	for n := 0; n < orders; n++ {
		for v, s := range []fsm.Status{fsm.Created, fsm.Paid, fsm.Shipped} {
			ev := e.event(n, int64(v+1), s)
			e.publish(t, ev)
			want = append(want, ev.Key())
		}
	}
	badBodies := []string{`{"broken`, `{"order_id":"x"}`}
	for _, body := range badBodies {
		e.publishRaw(t, []byte(body), "x", "")
	}
	total := float64(len(want) + len(badBodies))

	// Every message is tried, fails and is handed back, some more than once.
	deadline := time.Now().Add(60 * time.Second)
	for metric(t, b.Addr(), `orderflow_bridge_messages_total{result="retry"}`) < 2*total {
		if time.Now().After(deadline) {
			t.Fatalf("messages were not retried during the outage: retry = %v",
				metric(t, b.Addr(), `orderflow_bridge_messages_total{result="retry"}`))
		}
		time.Sleep(200 * time.Millisecond)
	}
	for series, v := range map[string]float64{
		`orderflow_bridge_messages_total{result="signalled"}`: 0,
		`orderflow_bridge_messages_total{result="parked"}`:    0,
	} {
		if got := metric(t, b.Addr(), series); got != v {
			t.Fatalf("during the outage %s = %v, want %v", series, got, v)
		}
	}
	if n := len(e.recordedKeys(t)); n != 0 {
		t.Fatalf("%d order_events rows during the Temporal outage", n)
	}
	if n := len(e.deadLetters(t)); n != 0 {
		t.Fatalf("%d dead letters during the PostgreSQL outage", n)
	}
	// The checks run in the background: the answer may lag an interval.
	if s := waitStatus(t, "http://"+b.Addr()+"/readyz", http.StatusServiceUnavailable); s != http.StatusServiceUnavailable {
		t.Errorf("/readyz = %d while Temporal and PostgreSQL are unreachable, want 503", s)
	}

	temporalProxy.Restore()
	pgProxy.Restore()
	e.waitAccounted(t, want, len(badBodies), 90*time.Second)
	dead := e.deadLetters(t)
	for _, body := range badBodies {
		if _, ok := dead[body]; !ok {
			t.Errorf("bad message %q not parked", body)
		}
	}
	waitMetric(t, b.Addr(), `orderflow_bridge_messages_total{result="signalled"}`, float64(len(want)))
	waitMetric(t, b.Addr(), `orderflow_bridge_messages_total{result="parked"}`, float64(len(badBodies)))
	if s := waitStatus(t, "http://"+b.Addr()+"/readyz", http.StatusOK); s != http.StatusOK {
		t.Errorf("/readyz = %d after the outage, want 200", s)
	}
	t.Logf("outage: %v retries, %v failed attempts to Temporal, %v to PostgreSQL",
		metric(t, b.Addr(), `orderflow_bridge_messages_total{result="retry"}`),
		metric(t, b.Addr(), `orderflow_bridge_attempt_errors_total{target="temporal"}`),
		metric(t, b.Addr(), `orderflow_bridge_attempt_errors_total{target="postgres"}`))
}

// A conflicting copy of an event (same business key, other content) is
// parked as the message it came in: the bytes as published, the message ID
// the producer got back, its keys and tag. (Either copy may be the one
// recorded first; the other is parked.)
func TestConflictParksTheRawMessage(t *testing.T) {
	e := newEnv(t, 1)
	e.startWorker(t)
	e.terminate(t, 1)
	first := e.event(0, 1, fsm.Created)
	body := func(note string, amount int64) string {
		return fmt.Sprintf(`{ "note": %q,  "event_id": "e-%s", "order_id": %q, "user_id": %d, "status": "CREATED",
		"version": 1, "amount_cents": %d, "occurred_at": %q }`,
			note, note, first.OrderID, first.UserID, amount, first.OccurredAt.Format(time.RFC3339Nano))
	}
	sent := map[string]string{} // body -> message ID
	for _, b := range []string{body("one", first.AmountCents), body("two", first.AmountCents+1)} {
		receipt, err := e.producer.PublishRaw(context.Background(), e.topic, []byte(b), first.OrderID, "CREATED", first.OrderID)
		if err != nil {
			t.Fatal(err)
		}
		sent[b] = receipt.MessageID
	}
	startBridge(t, e.config(), temporalDeliver(e.tc, e.taskQueue, testParams), storePark(store.New(e.db)))
	e.waitAccounted(t, []fsm.Key{first.Key()}, 1, 90*time.Second)
	var parked []deadRow
	for b, d := range e.deadLetters(t) {
		if b == string(d.Body) {
			parked = append(parked, d)
		}
	}
	if len(parked) != 1 {
		t.Fatalf("%d dead letters, want 1: %+v", len(parked), parked)
	}
	d := parked[0]
	id, ok := sent[string(d.Body)]
	if !ok {
		t.Fatalf("the dead letter's body is not one of the published messages:\n%s", d.Body)
	}
	if d.MessageID != id || d.Topic != e.topic || d.Keys != first.OrderID || d.Tags != "CREATED" ||
		!strings.HasPrefix(d.Reason, "conflict: ") {
		t.Errorf("dead letter %+v, want message ID %s, topic %s, keys %s, tag CREATED and a conflict reason",
			d, id, e.topic, first.OrderID)
	}
}

// With the duplicate filter on (Redis and the ledger), copies of delivered
// events — producer retries, new message IDs — are acked without a signal:
// no order's workflow history gains a signal from them.
func TestBridgeDuplicatesNeverReachTemporal(t *testing.T) {
	e := newEnv(t, 2)
	e.startWorker(t)
	const orders = 4
	e.terminate(t, orders)
	cfg := e.config()
	cfg.RedisURL = testenv.RedisURL(t)
	cfg.Dedup = dedupConfig{On: true, BloomCapacity: 1000, BloomFPRate: 0.001, RedisTTL: time.Hour,
		RedisTimeout: 100 * time.Millisecond, LedgerTimeout: time.Second}
	log := obs.NewLogger(testWriter(t), slog.LevelWarn, "bridge")
	reg := prometheus.NewRegistry()
	filter, closeRedis, err := openDedup(context.Background(), cfg, cfg.TemporalNamespace, store.New(e.db), reg, log)
	if err != nil {
		t.Fatal(err)
	}
	defer closeRedis()
	b, err := newBridge(cfg, bridgeDeps{Log: log, Registry: reg, Deliver: temporalDeliver(e.tc, e.taskQueue, testParams),
		Park: storePark(store.New(e.db)), Dedup: filter})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Stop() })

	var events []fsm.Event
	var want []fsm.Key
	for n := 0; n < orders; n++ {
		for v, s := range []fsm.Status{fsm.Created, fsm.Paid} {
			ev := e.event(n, int64(v+1), s)
			events = append(events, ev)
			want = append(want, ev.Key())
			e.publish(t, ev)
		}
	}
	e.waitAccounted(t, want, 0, 90*time.Second)
	waitMetric(t, b.Addr(), `orderflow_bridge_messages_total{result="signalled"}`, float64(len(events)))
	// A signal whose SignalWithStart timed out after Temporal took it is
	// sent again (at least once): count what is in the histories now.
	before := map[string]int{}
	for n := 0; n < orders; n++ {
		id := api.WorkflowID(events[2*n].OrderID)
		if before[id] = signalsInHistory(t, e.tc, id); before[id] < 2 {
			t.Fatalf("%s: %d signals in its history, want at least 2", id, before[id])
		}
	}

	const copies = 2
	for c := 0; c < copies; c++ {
		for _, ev := range events {
			e.publish(t, ev)
		}
	}
	waitMetric(t, b.Addr(), `orderflow_bridge_messages_total{result="duplicate"}`, float64(copies*len(events)))
	if got := metric(t, b.Addr(), `orderflow_bridge_messages_total{result="signalled"}`); got != float64(len(events)) {
		t.Errorf("signalled = %v, want %d", got, len(events))
	}
	if got := metric(t, b.Addr(), `orderflow_bridge_dedup_lookups_total{result="hit",tier="redis"}`); got != float64(copies*len(events)) {
		t.Errorf("redis hits = %v, want %d", got, copies*len(events))
	}
	for id, n := range before {
		if got := signalsInHistory(t, e.tc, id); got != n {
			t.Errorf("%s: %d signals in its history after %d copies of each event, want %d as before", id, got, copies, n)
		}
	}
}

// signalsInHistory counts the signals in the history of the workflow's
// current run.
func signalsInHistory(t *testing.T, c client.Client, id string) int {
	t.Helper()
	n := 0
	it := c.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", id, err)
		}
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED {
			n++
		}
	}
	return n
}

// TestBridgeBatchesAnOrdersEvents: a backlog of 40 events of one order and
// one event of another, drained with 16 messages per consumer callback; the
// hot order's events reach its workflow mostly in order-events signals, far
// fewer signals than events, and every event is recorded with the order
// ending at the last version published.
func TestBridgeBatchesAnOrdersEvents(t *testing.T) {
	e := newEnv(t, 1)
	e.startWorker(t)
	e.terminate(t, 2)
	const n = 40
	var want []fsm.Key
	for v := int64(1); v <= n; v++ {
		s := fsm.Created
		if v == n {
			s = fsm.Paid
		}
		ev := e.event(0, v, s)
		want = append(want, ev.Key())
		e.publish(t, ev)
	}
	other := e.event(1, 1, fsm.Created)
	want = append(want, other.Key())
	e.publish(t, other)

	cfg := e.config()
	cfg.BatchSize, cfg.BatchSignals = 16, true
	log := obs.NewLogger(testWriter(t), slog.LevelWarn, "bridge")
	b, err := newBridge(cfg, bridgeDeps{Log: log, Registry: prometheus.NewRegistry(),
		Deliver:     temporalDeliver(e.tc, e.taskQueue, testParams),
		DeliverMany: temporalDeliverMany(e.tc, e.taskQueue, testParams),
		Park:        storePark(store.New(e.db))})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Stop() })
	e.waitAccounted(t, want, 0, 90*time.Second)
	waitMetric(t, b.Addr(), `orderflow_bridge_messages_total{result="signalled"}`, n+1)

	hot := api.WorkflowID(e.event(0, 1, fsm.Created).OrderID)
	byName := map[string]int{}
	it := e.tc.GetWorkflowHistory(context.Background(), hot, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", hot, err)
		}
		if a := ev.GetWorkflowExecutionSignaledEventAttributes(); a != nil {
			byName[a.GetSignalName()]++
		}
	}
	if total := byName[api.SignalEvent] + byName[api.SignalEvents]; byName[api.SignalEvents] == 0 || total > n/4 {
		t.Errorf("signals of the hot order: %v; want order-events batches and at most %d signals for %d events", byName, n/4, n)
	}
	v, err := e.tc.QueryWorkflow(context.Background(), hot, "", api.QueryState)
	if err != nil {
		t.Fatal(err)
	}
	var st workflows.State
	if err := v.Get(&st); err != nil {
		t.Fatal(err)
	}
	if st.Order.Version != n || st.Order.Status != fsm.Paid || st.Processed < n {
		t.Errorf("hot order at v%d %s after %d events handled; want v%d PAID after at least %d", st.Order.Version, st.Order.Status, st.Processed, n, n)
	}
}
