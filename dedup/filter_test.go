package dedup

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/store"
)

// fakeCache is a Cache in memory that can be made to fail.
type fakeCache struct {
	mu         sync.Mutex
	m          map[fsm.Key]string
	err        error
	gets, sets int
}

func newFakeCache() *fakeCache { return &fakeCache{m: map[fsm.Key]string{}} }

func (c *fakeCache) Get(_ context.Context, k fsm.Key) (string, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gets++
	if c.err != nil {
		return "", false, c.err
	}
	h, ok := c.m[k]
	return h, ok, nil
}

func (c *fakeCache) Remember(_ context.Context, k fsm.Key, hash string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sets++
	if c.err != nil {
		return c.err
	}
	if _, ok := c.m[k]; !ok {
		c.m[k] = hash
	}
	return nil
}

func (c *fakeCache) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.err = err
}

func (c *fakeCache) counts() (gets, sets int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gets, c.sets
}

// fakeLedger is a Ledger in memory that can be made to fail.
type fakeLedger struct {
	mu    sync.Mutex
	m     map[fsm.Key]string
	err   error
	calls int
}

func (l *fakeLedger) RecordedEvent(_ context.Context, k fsm.Key) (store.Recorded, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	if l.err != nil {
		return store.Recorded{}, false, l.err
	}
	h, ok := l.m[k]
	return store.Recorded{ContentHash: h, Outcome: fsm.Applied}, ok, nil
}

func event(order string, v int64, amount int64) fsm.Event {
	return fsm.Event{EventID: fmt.Sprintf("%s@%d", order, v), OrderID: order, UserID: 7, Status: fsm.Paid, Version: v,
		AmountCents: amount, OccurredAt: time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)}
}

// The duplicate filter's decisions (docs/design.md §3.7): only Redis or
// the ledger confirms; the ledger is asked only after a Bloom hit that
// Redis did not confirm; a different content hash is a conflict.
func TestDecisionTable(t *testing.T) {
	e := event("o-1", 2, 500)
	other := event("o-1", 2, 501).ContentHash()
	same := e.ContentHash()
	down := errors.New("down")
	const (
		off = iota
		absent
		sameHash
		otherHash
		failing
	)
	for _, c := range []struct {
		name          string
		bloom         bool // the pair is in the Bloom filter
		redis, ledger int
		want          Verdict
		askLedger     bool
	}{
		{"bloom miss, redis miss: signal", false, absent, sameHash, Verdict{}, false},
		{"bloom miss, redis hit: drop", false, sameHash, absent, Verdict{Duplicate: true, Tier: TierRedis}, false},
		{"bloom miss, redis other hash: conflict, signal", false, otherHash, sameHash, Verdict{Conflict: true, Tier: TierRedis}, false},
		{"bloom miss, redis down: signal", false, failing, sameHash, Verdict{}, false},
		{"bloom miss, redis off: signal", false, off, sameHash, Verdict{}, false},
		{"bloom hit, redis hit: drop", true, sameHash, absent, Verdict{Duplicate: true, Tier: TierRedis}, false},
		{"bloom hit, redis miss, ledger hit: drop", true, absent, sameHash, Verdict{Duplicate: true, Tier: TierLedger}, true},
		{"bloom hit, redis miss, ledger miss: signal", true, absent, absent, Verdict{}, true},
		{"bloom hit, redis miss, ledger other hash: conflict, signal", true, absent, otherHash, Verdict{Conflict: true, Tier: TierLedger}, true},
		{"bloom hit, redis miss, ledger down: signal", true, absent, failing, Verdict{}, true},
		{"bloom hit, redis down, ledger hit: drop", true, failing, sameHash, Verdict{Duplicate: true, Tier: TierLedger}, true},
		{"bloom hit, redis down, ledger miss: signal", true, failing, absent, Verdict{}, true},
		{"bloom hit, redis off, ledger hit: drop", true, off, sameHash, Verdict{Duplicate: true, Tier: TierLedger}, true},
		{"bloom hit, redis off, ledger miss: signal", true, off, absent, Verdict{}, true},
		{"bloom hit, redis other hash, ledger hit: drop", true, otherHash, sameHash, Verdict{Duplicate: true, Tier: TierLedger}, true},
		{"bloom hit, redis other hash, ledger miss: conflict, signal", true, otherHash, absent, Verdict{Conflict: true, Tier: TierRedis}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := Options{Bloom: NewBloom(100, 0.001), Ledger: &fakeLedger{m: map[fsm.Key]string{}}}
			if c.bloom {
				o.Bloom.Add(e.Key(), same)
			}
			cache := newFakeCache()
			switch c.redis {
			case sameHash:
				cache.m[e.Key()] = same
			case otherHash:
				cache.m[e.Key()] = other
			case failing:
				cache.err = down
			}
			if c.redis != off {
				o.Cache = cache
			}
			ledger := o.Ledger.(*fakeLedger)
			switch c.ledger {
			case sameHash:
				ledger.m[e.Key()] = same
			case otherHash:
				ledger.m[e.Key()] = other
			case failing:
				ledger.err = down
			}
			f := New(o)
			if got := f.Check(context.Background(), e); got != c.want {
				t.Errorf("Check = %+v, want %+v", got, c.want)
			}
			if asked := ledger.calls > 0; asked != c.askLedger {
				t.Errorf("ledger asked: %v, want %v", asked, c.askLedger)
			}
			if c.redis != off {
				if gets, _ := cache.counts(); gets != 1 {
					t.Errorf("%d Redis lookups, want 1 (Redis is asked for every message)", gets)
				}
			}
			fp := counterValue(t, f.m.bloomFalsePositives)
			if wantFP := c.bloom && !c.want.Duplicate; (fp == 1) != wantFP {
				t.Errorf("false positives %v, want %v", fp, wantFP)
			}
		})
	}
}

// A confirmation by the ledger is written to Redis for the other bridges,
// and to the Bloom filter; a confirmation by Redis to the Bloom filter.
func TestConfirmationsAreRemembered(t *testing.T) {
	e := event("o-2", 1, 100)
	cache := newFakeCache()
	ledger := &fakeLedger{m: map[fsm.Key]string{e.Key(): e.ContentHash()}}
	bl := NewBloom(100, 0.001)
	bl.Add(e.Key(), e.ContentHash())
	f := New(Options{Bloom: bl, Cache: cache, Ledger: ledger})
	if v := f.Check(context.Background(), e); !v.Duplicate || v.Tier != TierLedger {
		t.Fatalf("Check = %+v, want confirmed by the ledger", v)
	}
	if cache.m[e.Key()] != e.ContentHash() {
		t.Fatalf("Redis holds %q after the ledger confirmed, want the content hash", cache.m[e.Key()])
	}
	if v := f.Check(context.Background(), e); !v.Duplicate || v.Tier != TierRedis || ledger.calls != 1 {
		t.Fatalf("second Check = %+v after %d ledger calls, want confirmed by Redis without the ledger", v, ledger.calls)
	}

	// Confirmed by Redis (another bridge signalled it): this bridge's Bloom
	// filter learns the pair.
	e2 := event("o-2", 2, 100)
	cache.m[e2.Key()] = e2.ContentHash()
	if v := f.Check(context.Background(), e2); !v.Duplicate {
		t.Fatalf("Check = %+v, want confirmed by Redis", v)
	}
	if !bl.Test(e2.Key(), e2.ContentHash()) {
		t.Fatal("the Bloom filter did not learn a pair Redis confirmed")
	}
}

// Delivered adds the pair to the Bloom filter and to Redis, where the first
// content under a key stays.
func TestDelivered(t *testing.T) {
	e := event("o-3", 1, 100)
	conflict := event("o-3", 1, 999)
	cache := newFakeCache()
	bl := NewBloom(100, 0.001)
	f := New(Options{Bloom: bl, Cache: cache})
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the signal is in: the record is kept even when the handler stops
	f.Delivered(ctx, e)
	f.Delivered(context.Background(), conflict)
	if !bl.Test(e.Key(), e.ContentHash()) || !bl.Test(conflict.Key(), conflict.ContentHash()) {
		t.Fatal("Bloom filter lacks a delivered pair")
	}
	if cache.m[e.Key()] != e.ContentHash() {
		t.Fatalf("Redis holds %q, want the first content's hash", cache.m[e.Key()])
	}
}

// An unreachable Redis costs one failed call per cool-down: meanwhile it is
// skipped (Bloom hits go to the ledger) and not written; after the
// cool-down it is asked again.
func TestRedisCooldown(t *testing.T) {
	e := event("o-4", 1, 100)
	cache := newFakeCache()
	ledger := &fakeLedger{m: map[fsm.Key]string{e.Key(): e.ContentHash()}}
	bl := NewBloom(100, 0.001)
	bl.Add(e.Key(), e.ContentHash())
	// Long enough that the calls below, meant to fall within one
	// cool-down, do on a loaded machine too.
	const cooldown = time.Second
	f := New(Options{Bloom: bl, Cache: cache, Ledger: ledger, CacheCooldown: cooldown})
	cache.fail(errors.New("connection refused"))
	for i := 0; i < 5; i++ {
		if v := f.Check(context.Background(), e); !v.Duplicate || v.Tier != TierLedger {
			t.Fatalf("check %d while Redis is down = %+v, want the ledger's confirmation", i, v)
		}
	}
	f.Delivered(context.Background(), event("o-4", 2, 100))
	if gets, sets := cache.counts(); gets != 1 || sets != 0 {
		t.Fatalf("Redis got %d lookups and %d writes during its cool-down, want 1 and 0", gets, sets)
	}
	if got := counterValue(t, f.m.lookups.WithLabelValues(TierRedis, ResultSkipped)); got != 4 {
		t.Errorf("skipped = %v, want 4", got)
	}
	if got := counterValue(t, f.m.redisErrors.WithLabelValues(opGet)); got != 1 {
		t.Errorf("redis get errors = %v, want 1", got)
	}
	cache.fail(nil)
	time.Sleep(cooldown + 50*time.Millisecond)
	if v := f.Check(context.Background(), e); !v.Duplicate {
		t.Fatalf("after the cool-down: %+v", v)
	}
	if gets, _ := cache.counts(); gets != 2 {
		t.Fatalf("Redis not asked again after its cool-down (%d lookups)", gets)
	}
}

// Many goroutines check and deliver at once (run with -race).
func TestFilterConcurrentUse(t *testing.T) {
	cache := newFakeCache()
	ledger := &fakeLedger{m: map[fsm.Key]string{}}
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	f := New(Options{Bloom: NewBloom(50, 0.01), Cache: cache, Ledger: ledger, Metrics: m})
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				e := event(fmt.Sprintf("o-c%d", i%40), int64(1+i%3), 100)
				if !f.Check(context.Background(), e).Duplicate {
					f.Delivered(context.Background(), e)
				}
			}
		}()
	}
	wg.Wait()
	if got := counterValue(t, m.lookups.WithLabelValues(TierRedis, ResultHit)); got < 640 {
		t.Errorf("redis hits = %v of 1600 checks of 120 pairs", got)
	}
}

// counterValue reads a counter.
func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// A check with a done context (the bridge stopping) asks no tier and
// leaves Redis's standing alone.
func TestCheckWithADoneContext(t *testing.T) {
	e := event("o-5", 1, 100)
	cache := newFakeCache()
	cache.m[e.Key()] = e.ContentHash()
	f := New(Options{Bloom: NewBloom(10, 0.01), Cache: cache})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if v := f.Check(ctx, e); v != (Verdict{}) {
		t.Fatalf("Check with a done context = %+v, want no verdict", v)
	}
	if gets, _ := cache.counts(); gets != 0 {
		t.Fatalf("%d Redis lookups with a done context", gets)
	}
	if v := f.Check(context.Background(), e); !v.Duplicate {
		t.Fatalf("Check afterwards = %+v, want Redis's confirmation (no cool-down)", v)
	}
}
