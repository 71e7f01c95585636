package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/orderflow/orderflow/dedup"
	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/store"
	"github.com/orderflow/orderflow/wire"
)

// The duplicate filter in front of the bridge's signal, against a real
// Redis and a real ledger. Deliveries are counted at DeliverFunc, the seam
// where the bridge calls SignalWithStart; a delivery also records the event
// in the ledger, as the workflow does once it handled the signal.

// ledgerWorld is a test database and a Redis key space shared by the
// bridges of one test, and the count of their signals.
type ledgerWorld struct {
	st       *store.Store
	redisURL string
	prefix   string // Redis key prefix
	orders   string // order ID prefix

	mu      sync.Mutex
	signals map[fsm.Key]int // events carried by signals, by business key
	batches [][]fsm.Key     // the events of each call of deliverMany
}

func newLedgerWorld(t *testing.T) *ledgerWorld {
	t.Helper()
	db, _ := testenv.NewDatabase(t)
	return &ledgerWorld{st: store.New(db), redisURL: testenv.RedisURL(t), prefix: uniq.Name("bridge-dedup") + ":",
		orders: uniq.Name("d"), signals: map[fsm.Key]int{}}
}

// deliver counts the signal and records the event in the ledger.
func (w *ledgerWorld) deliver(ctx context.Context, e fsm.Event, src wire.Envelope) error {
	w.mu.Lock()
	w.signals[e.Key()]++
	w.mu.Unlock()
	_, err := w.st.ApplyEvent(ctx, e, src)
	return err
}

// deliverMany counts the events of one signal and records them in the
// ledger, in order.
func (w *ledgerWorld) deliverMany(ctx context.Context, _ string, items []Item) error {
	keys := make([]fsm.Key, len(items))
	w.mu.Lock()
	for i, it := range items {
		keys[i] = it.Event.Key()
		w.signals[keys[i]]++
	}
	w.batches = append(w.batches, keys)
	w.mu.Unlock()
	for _, it := range items {
		if _, err := w.st.ApplyEvent(ctx, it.Event, it.Source); err != nil {
			return err
		}
	}
	return nil
}

// signalled is the number of times e's business key was carried by a
// signal.
func (w *ledgerWorld) signalled(e fsm.Event) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.signals[e.Key()]
}

func (w *ledgerWorld) signalCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, c := range w.signals {
		n += c
	}
	return n
}

// bridgeOpts shape one bridge of a test.
type bridgeOpts struct {
	bloom    *dedup.Bloom // nil: the default size
	redisURL string       // "": the world's; "off": no Redis
}

// testBridge is a Handler with the full filter and the registry of the
// filter's metrics.
type testBridge struct {
	h   *Handler
	reg *prometheus.Registry
}

func (w *ledgerWorld) bridge(t *testing.T, o bridgeOpts) testBridge {
	t.Helper()
	h := testHandler(t, w.deliver, noPark(t))
	// Deliveries write to the database: attempts get a bound no busy
	// machine reaches, so that each event is delivered once.
	h.retry = RetryPolicy{For: 30 * time.Second, Attempt: 10 * time.Second, Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}
	reg := prometheus.NewRegistry()
	m, err := dedup.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	fo := dedup.Options{Bloom: o.bloom, Ledger: w.st, Metrics: m, CacheTimeout: 2 * time.Second,
		LedgerTimeout: 10 * time.Second, CacheCooldown: 100 * time.Millisecond}
	if fo.Bloom == nil {
		fo.Bloom = dedup.NewBloom(dedup.DefaultBloomCapacity, dedup.DefaultBloomFPRate)
	}
	switch o.redisURL {
	case "off":
	default:
		url := o.redisURL
		if url == "" {
			url = w.redisURL
		}
		// A generous timeout: on a busy machine a slow answer must not
		// count as Redis failing (a cut connection fails at once anyway).
		r, err := dedup.OpenRedis(url, dedup.RedisOptions{KeyPrefix: w.prefix, Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Close() })
		fo.Cache = r
	}
	h.dedup = dedup.New(fo)
	return testBridge{h: h, reg: reg}
}

// event is version v of order n; amount changes the content.
func (w *ledgerWorld) event(n int, v int64, amount int64) fsm.Event {
	id := fmt.Sprintf("%s-%d", w.orders, n)
	status := []fsm.Status{fsm.Created, fsm.Paid, fsm.Shipped}[(v-1)%3]
	return fsm.Event{EventID: fmt.Sprintf("%s@%d", id, v), OrderID: id, UserID: 5, Status: status, Version: v,
		AmountCents: amount, OccurredAt: time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)}
}

// eventMsg is a message carrying e, with a new broker message ID each
// time (a producer retry or a redelivery).
func eventMsg(t *testing.T, e fsm.Event) *primitive.MessageExt {
	t.Helper()
	body, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	m := &primitive.MessageExt{MsgId: uniq.Name("msg"), StoreTimestamp: time.Now().UnixMilli()}
	m.Topic = "T"
	m.Body = body
	m.WithKeys([]string{e.OrderID})
	m.WithTag(string(e.Status))
	return m
}

// handle hands the bridge a message carrying e and fails on an error.
func (b testBridge) handle(t *testing.T, e fsm.Event) {
	t.Helper()
	if err := b.h.Handle(context.Background(), eventMsg(t, e)); err != nil {
		t.Fatalf("handle %s: %v", e.Key(), err)
	}
}

func (b testBridge) messages(t *testing.T, result string) float64 {
	t.Helper()
	return counterValue(t, b.h.metrics.messages.WithLabelValues(result))
}

func (b testBridge) lookups(t *testing.T, tier, result string) float64 {
	t.Helper()
	return b.counter(t, "orderflow_bridge_dedup_lookups_total", map[string]string{"tier": tier, "result": result})
}

// counter sums the series of the filter's counter name whose labels
// include labels.
func (b testBridge) counter(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := b.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum, seen := 0.0, false
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue series
				}
			}
			sum += m.GetCounter().GetValue()
			seen = true
		}
	}
	if !seen {
		t.Fatalf("no series of %s with %v", name, labels)
	}
	return sum
}

// Redelivered copies of events this bridge signalled (same business key,
// same content) never reach Temporal: Redis confirms each.
func TestDuplicatesAreAckedWithoutASignal(t *testing.T) {
	w := newLedgerWorld(t)
	b := w.bridge(t, bridgeOpts{})
	var events []fsm.Event
	for n := 0; n < 5; n++ {
		for v := int64(1); v <= 2; v++ {
			events = append(events, w.event(n, v, 1000))
		}
	}
	for _, e := range events {
		b.handle(t, e)
	}
	if got := w.signalCount(); got != len(events) {
		t.Fatalf("%d signals for %d new events", got, len(events))
	}
	for copy := 0; copy < 3; copy++ {
		for _, e := range events {
			b.handle(t, e)
		}
	}
	if got := w.signalCount(); got != len(events) {
		t.Fatalf("%d signals after %d duplicate deliveries, want %d: duplicates reached Temporal", got, 3*len(events), len(events))
	}
	dups := float64(3 * len(events))
	for name, c := range map[string][2]float64{
		"messages signalled":   {b.messages(t, ResultSignalled), float64(len(events))},
		"messages duplicate":   {b.messages(t, ResultDuplicate), dups},
		"redis hits":           {b.lookups(t, dedup.TierRedis, dedup.ResultHit), dups},
		"redis misses":         {b.lookups(t, dedup.TierRedis, dedup.ResultMiss), float64(len(events))},
		"bloom hits":           {b.lookups(t, dedup.TierBloom, dedup.ResultHit), dups},
		"ledger lookups (hit)": {b.lookups(t, dedup.TierLedger, dedup.ResultHit), 0},
	} {
		if c[0] != c[1] {
			t.Errorf("%s = %v, want %v", name, c[0], c[1])
		}
	}
}

// A Bloom false positive never drops a message: with a one-bit filter that
// claims every pair, an event never delivered is looked up in Redis and in
// the ledger, found in neither, and signalled.
func TestBloomFalsePositiveIsSignalled(t *testing.T) {
	w := newLedgerWorld(t)
	b := w.bridge(t, bridgeOpts{bloom: dedup.NewBloom(1, 0.99)})
	b.handle(t, w.event(0, 1, 100))
	fresh := []fsm.Event{w.event(1, 1, 100), w.event(0, 2, 100), w.event(2, 1, 100)}
	for _, e := range fresh {
		b.handle(t, e)
	}
	if got := w.signalCount(); got != 1+len(fresh) {
		t.Fatalf("%d signals, want %d: a false positive dropped a new event", got, 1+len(fresh))
	}
	fp := b.counter(t, "orderflow_bridge_dedup_bloom_false_positives_total", nil)
	if fp != float64(len(fresh)) {
		t.Errorf("false positives = %v, want %d", fp, len(fresh))
	}
	if got := b.lookups(t, dedup.TierLedger, dedup.ResultMiss); got != float64(len(fresh)) {
		t.Errorf("ledger misses = %v, want %d (each false positive asked the authority)", got, len(fresh))
	}
}

// The same business key with another content hash is a conflict: it goes
// on to the workflow (which parks it); a copy of the first content is still
// recognised.
func TestConflictIsSignalled(t *testing.T) {
	w := newLedgerWorld(t)
	b := w.bridge(t, bridgeOpts{})
	first, conflict := w.event(0, 1, 100), w.event(0, 1, 101)
	b.handle(t, first)
	b.handle(t, conflict)
	b.handle(t, conflict)
	if got := w.signals[first.Key()]; got != 3 {
		t.Fatalf("%d signals of %s, want 3 (first, and the conflicting copy twice)", got, first.Key())
	}
	if got := b.lookups(t, dedup.TierRedis, dedup.ResultConflict); got != 2 {
		t.Errorf("redis conflicts = %v, want 2", got)
	}
	b.handle(t, first)
	if got := w.signals[first.Key()]; got != 3 {
		t.Fatalf("a copy of the first content was signalled again (%d signals)", got)
	}
	// The ledger parked the conflicting copy: the workflow's job, done here
	// by the counting delivery through store.ApplyEvent.
	var n int64
	if err := w.st.DB().Raw(`SELECT count(*) FROM dead_letters WHERE reason LIKE 'conflict:%'`).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("%d conflict dead letters, want 1", n)
	}
}

// With Redis cut off, the bridge stays correct and fast: a Bloom hit is
// confirmed by the ledger (no signal), a Bloom miss is signalled, nothing
// fails; once Redis is back it is used again.
func TestRedisDownFallsThroughToTheLedger(t *testing.T) {
	w := newLedgerWorld(t)
	proxy := testenv.StartProxy(t, testenv.RedisHostPort(t, w.redisURL))
	b := w.bridge(t, bridgeOpts{redisURL: testenv.RedisURLVia(t, w.redisURL, proxy.Addr())})
	a, c := w.event(0, 1, 100), w.event(1, 1, 100)
	b.handle(t, a)
	proxy.Cut()

	start := time.Now()
	b.handle(t, a) // Bloom hit, Redis fails, the ledger confirms
	b.handle(t, c) // Bloom miss, Redis skipped: signalled
	b.handle(t, c) // Bloom hit, Redis skipped, the ledger confirms
	b.handle(t, a)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("four messages took %s with Redis down", d)
	}
	if got := w.signalCount(); got != 2 {
		t.Fatalf("%d signals, want 2 (one per event)", got)
	}
	if got := b.lookups(t, dedup.TierLedger, dedup.ResultHit); got != 3 {
		t.Errorf("ledger hits = %v, want 3", got)
	}
	if got := b.lookups(t, dedup.TierRedis, dedup.ResultError) + b.lookups(t, dedup.TierRedis, dedup.ResultSkipped); got != 4 {
		t.Errorf("redis errors + skipped = %v, want 4", got)
	}
	if got := b.counter(t, "orderflow_bridge_dedup_redis_errors_total", nil); got < 1 {
		t.Errorf("redis errors = %v, want at least 1", got)
	}

	// Once Redis is back (and its cool-down over) it answers again: a new
	// event is a Redis miss, and a copy of it a Redis hit.
	proxy.Restore()
	misses := b.lookups(t, dedup.TierRedis, dedup.ResultMiss)
	deadline := time.Now().Add(5 * time.Second)
	var d fsm.Event
	for i := 0; b.lookups(t, dedup.TierRedis, dedup.ResultMiss) == misses; i++ {
		if time.Now().After(deadline) {
			t.Fatal("Redis not asked again within 5s of Restore")
		}
		time.Sleep(150 * time.Millisecond)
		d = w.event(10+i, 1, 100)
		b.handle(t, d)
	}
	hits := b.lookups(t, dedup.TierRedis, dedup.ResultHit)
	b.handle(t, d)
	if got := b.lookups(t, dedup.TierRedis, dedup.ResultHit); got != hits+1 {
		t.Errorf("a copy of an event signalled after Redis came back: redis hits %v, want %v", got, hits+1)
	}
	if got := w.signals[d.Key()]; got != 1 {
		t.Errorf("%d signals of %s, want 1", got, d.Key())
	}
}

// Two bridges share Redis: an event one of them signalled is confirmed for
// the other, whose own Bloom filter never saw it, without asking the
// ledger. Without Redis, the second bridge signals it (its Bloom filter
// misses, and the workflow absorbs the duplicate).
func TestTwoBridgesShareRedis(t *testing.T) {
	w := newLedgerWorld(t)
	b1, b2 := w.bridge(t, bridgeOpts{}), w.bridge(t, bridgeOpts{})
	var events []fsm.Event
	for n := 0; n < 4; n++ {
		events = append(events, w.event(n, 1, 100))
	}
	for _, e := range events {
		b1.handle(t, e)
	}
	for _, e := range events {
		b2.handle(t, e)
		b1.handle(t, e)
	}
	if got := w.signalCount(); got != len(events) {
		t.Fatalf("%d signals for %d events across two bridges", got, len(events))
	}
	if got := b2.lookups(t, dedup.TierRedis, dedup.ResultHit); got != float64(len(events)) {
		t.Errorf("second bridge's redis hits = %v, want %d", got, len(events))
	}
	if got := b2.lookups(t, dedup.TierBloom, dedup.ResultMiss); got != float64(len(events)) {
		t.Errorf("second bridge's bloom misses = %v, want %d", got, len(events))
	}
	for _, r := range []string{dedup.ResultHit, dedup.ResultMiss} {
		if got := b2.lookups(t, dedup.TierLedger, r); got != 0 {
			t.Errorf("second bridge asked the ledger (%s = %v)", r, got)
		}
	}

	b3 := w.bridge(t, bridgeOpts{redisURL: "off"})
	b3.handle(t, events[0])
	if got := w.signalCount(); got != len(events)+1 {
		t.Errorf("without Redis, a bridge that never saw the event: %d signals, want %d", got, len(events)+1)
	}
	b3.handle(t, events[0])
	if got := w.signalCount(); got != len(events)+1 {
		t.Errorf("without Redis, its own redelivery: %d signals, want %d (the ledger confirms)", got, len(events)+1)
	}
}

// A copy acked without a signal still has its sequence number recorded:
// loss detection counts what the bridge received, not what it signalled.
func TestDuplicateRecordsItsSequenceNumber(t *testing.T) {
	w := newLedgerWorld(t)
	b := w.bridge(t, bridgeOpts{})
	var mu sync.Mutex
	var recorded []string
	b.h.WithRecorder(func(_ context.Context, producer string, seq int64) error {
		mu.Lock()
		defer mu.Unlock()
		recorded = append(recorded, fmt.Sprintf("%s/%d", producer, seq))
		return nil
	})
	e := w.event(0, 1, 100)
	e.ProducerID, e.Seq = "p-1", 7
	b.handle(t, e)
	b.handle(t, e)
	if got := w.signalCount(); got != 1 {
		t.Fatalf("%d signals, want 1", got)
	}
	if got := b.messages(t, ResultDuplicate); got != 1 {
		t.Fatalf("duplicates = %v, want 1", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(recorded) != 2 || recorded[0] != "p-1/7" || recorded[1] != "p-1/7" {
		t.Fatalf("recorded %v, want p-1/7 for the signalled message and for its copy", recorded)
	}
}
