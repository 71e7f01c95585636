package dedup

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orderflow/orderflow/fsm"
)

// The in-flight table: the first Admit of an event leads, a copy follows
// the lead's delivery and learns its outcome, a different content under
// the key in flight is a conflict that neither leads nor follows, and the
// entry is gone once the delivery is done.
func TestAdmitFollowsADeliveryInFlight(t *testing.T) {
	e, conflict := event("o-f1", 1, 100), event("o-f1", 1, 101)
	f := New(Options{Bloom: NewBloom(100, 0.001), Cache: newFakeCache()})
	ctx := context.Background()

	first := f.Admit(ctx, e)
	if first.Lead == nil || first.Follow != nil || first.Duplicate || first.Conflict {
		t.Fatalf("first Admit = %+v, want a lead", first)
	}
	copy1 := f.Admit(ctx, e)
	if copy1.Follow != first.Lead || copy1.Lead != nil || copy1.Tier != TierInFlight || copy1.Duplicate {
		t.Fatalf("copy's Admit = %+v, want to follow the first's delivery", copy1)
	}
	other := f.Admit(ctx, conflict)
	if other.Lead != nil || other.Follow != nil || !other.Conflict || other.Tier != TierInFlight {
		t.Fatalf("other content's Admit = %+v, want a conflict of tier inflight, neither leading nor following", other)
	}
	for result, want := range map[string]float64{ResultMiss: 1, ResultHit: 1, ResultConflict: 1} {
		if got := counterValue(t, f.m.lookups.WithLabelValues(TierInFlight, result)); got != want {
			t.Errorf("inflight %s = %v, want %v", result, got, want)
		}
	}

	f.Delivered(ctx, e)
	first.Lead.Done(true)
	if !copy1.Follow.Wait(ctx) {
		t.Fatal("the copy's wait = false after the delivery succeeded")
	}
	if n := f.flights.size(); n != 0 {
		t.Fatalf("%d entries in flight after the delivery was done", n)
	}
	// The event is now confirmed by Redis: no entry, no follower.
	if a := f.Admit(ctx, e); !a.Duplicate || a.Tier != TierRedis || a.Lead != nil || a.Follow != nil {
		t.Fatalf("Admit after the delivery = %+v, want Redis's confirmation", a)
	}
	if n := f.flights.size(); n != 0 {
		t.Fatalf("a confirmed duplicate left %d entries in flight", n)
	}
}

// A delivery that failed tells its followers so, and a new Admit of the
// event leads again. Done counts once.
func TestFailedDeliveryIsNotADuplicate(t *testing.T) {
	e := event("o-f2", 1, 100)
	f := New(Options{})
	ctx := context.Background()
	lead := f.Admit(ctx, e).Lead
	follow := f.Admit(ctx, e).Follow
	if lead == nil || follow != lead {
		t.Fatalf("lead %p, follow %p: want the copy to follow the lead", lead, follow)
	}
	lead.Done(false)
	lead.Done(true) // too late: the outcome is recorded
	if follow.Wait(ctx) {
		t.Fatal("wait = true after the delivery failed")
	}
	again := f.Admit(ctx, e)
	if again.Lead == nil || again.Lead == lead {
		t.Fatalf("Admit after a failed delivery = %+v, want a new lead", again)
	}
	again.Lead.Done(false)
}

// A wait ends with its context, false, while the delivery goes on.
func TestWaitIsBounded(t *testing.T) {
	e := event("o-f3", 1, 100)
	f := New(Options{})
	lead := f.Admit(context.Background(), e).Lead
	defer lead.Done(false)
	// start before the context, whose deadline counts from its creation.
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if f.Admit(context.Background(), e).Follow.Wait(ctx) {
		t.Fatal("wait = true for a delivery still under way")
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Fatalf("wait returned after %s, before its context ended", d)
	}
}

// A duplicate a durable tier confirms, or a conflict it sees, is not
// entered in the table; a copy that followed the entry meanwhile learns the
// duplicate is durably signalled.
func TestConfirmedEventsAreNotInFlight(t *testing.T) {
	dup, conflict := event("o-f4", 1, 100), event("o-f4", 2, 100)
	cache := newFakeCache()
	cache.m[dup.Key()] = dup.ContentHash()
	cache.m[conflict.Key()] = event("o-f4", 2, 999).ContentHash()
	f := New(Options{Cache: cache})
	ctx := context.Background()
	if a := f.Admit(ctx, dup); !a.Duplicate || a.Lead != nil {
		t.Fatalf("Admit of a confirmed duplicate = %+v", a)
	}
	if a := f.Admit(ctx, conflict); !a.Conflict || a.Tier != TierRedis || a.Lead != nil {
		t.Fatalf("Admit of a conflict = %+v", a)
	}
	if n := f.flights.size(); n != 0 {
		t.Fatalf("%d entries in flight, want none", n)
	}

	// The table holds deliveries, not lookups: a copy admitted while the
	// first one asks Redis asks Redis too, and both are confirmed there.
	gate := &gatedCache{fakeCache: cache, entered: make(chan struct{}), release: make(chan struct{})}
	f = New(Options{Cache: gate})
	done := make(chan Admission)
	go func() { done <- f.Admit(ctx, dup) }()
	<-gate.entered
	if a := f.Admit(ctx, dup); !a.Duplicate || a.Tier != TierRedis || a.Follow != nil || a.Lead != nil {
		t.Fatalf("Admit while the first one asks Redis = %+v, want Redis's confirmation", a)
	}
	close(gate.release)
	if first := <-done; !first.Duplicate || first.Lead != nil {
		t.Fatalf("first Admit = %+v, want Redis's confirmation", first)
	}
	if n := f.flights.size(); n != 0 {
		t.Fatalf("%d entries in flight, want none", n)
	}
}

// Two copies of a new event admitted at once, both asking the tiers before
// either is in the table: one leads, the other follows it.
func TestAdmitEntersOnceAfterTheTiers(t *testing.T) {
	e := event("o-f6", 1, 100)
	gate := &gatedCache{fakeCache: newFakeCache(), entered: make(chan struct{}), release: make(chan struct{})}
	f := New(Options{Cache: gate})
	ctx := context.Background()
	done := make(chan Admission)
	go func() { done <- f.Admit(ctx, e) }()
	<-gate.entered // the first asks Redis, not yet in the table
	second := f.Admit(ctx, e)
	if second.Lead == nil {
		t.Fatalf("second Admit = %+v, want the lead (the first is still asking Redis)", second)
	}
	close(gate.release)
	first := <-done
	if first.Follow != second.Lead || first.Lead != nil || first.Tier != TierInFlight {
		t.Fatalf("first Admit = %+v, want to follow the delivery the second entered meanwhile", first)
	}
	second.Lead.Done(true)
	if !first.Follow.Wait(ctx) {
		t.Fatal("the follower saw a failure")
	}
	for result, want := range map[string]float64{ResultMiss: 1, ResultHit: 1} {
		if got := counterValue(t, f.m.lookups.WithLabelValues(TierInFlight, result)); got != want {
			t.Errorf("inflight %s = %v, want %v", result, got, want)
		}
	}
}

// gatedCache is a fakeCache whose first Get waits for release; the others
// answer at once.
type gatedCache struct {
	*fakeCache
	first            atomic.Bool
	entered, release chan struct{}
}

func (c *gatedCache) Get(ctx context.Context, k fsm.Key) (string, bool, error) {
	if c.first.CompareAndSwap(false, true) {
		close(c.entered)
		<-c.release
	}
	return c.fakeCache.Get(ctx, k)
}

// With its context done, Admit enters nothing and follows nothing.
func TestAdmitWithADoneContext(t *testing.T) {
	e := event("o-f5", 1, 100)
	f := New(Options{})
	lead := f.Admit(context.Background(), e).Lead
	defer lead.Done(false)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if a := f.Admit(ctx, e); a.Lead != nil || a.Follow != nil || a.Duplicate || a.Conflict {
		t.Fatalf("Admit with a done context = %+v, want nothing", a)
	}
}

// Many goroutines admit the same events at once (run with -race): one of
// them leads each event, the others follow that very delivery and all see
// its outcome.
func TestAdmitConcurrently(t *testing.T) {
	const goroutines, events = 8, 20
	f := New(Options{Bloom: NewBloom(1000, 0.001)})
	ctx := context.Background()
	type got struct {
		lead, follow *Delivery
	}
	results := make([][]got, goroutines)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range goroutines {
		wg.Go(func() {
			<-start
			for i := range events {
				a := f.Admit(ctx, event("o-cc", int64(i+1), 100))
				results[g] = append(results[g], got{a.Lead, a.Follow})
			}
		})
	}
	close(start)
	wg.Wait()
	for i := range events {
		var lead *Delivery
		for g := range goroutines {
			if r := results[g][i]; r.lead != nil {
				if lead != nil {
					t.Fatalf("event %d has two leads", i)
				}
				lead = r.lead
			}
		}
		if lead == nil {
			t.Fatalf("event %d has no lead", i)
		}
		for g := range goroutines {
			if r := results[g][i]; r.lead == nil && r.follow != lead {
				t.Fatalf("event %d: goroutine %d follows %p, not the lead %p", i, g, r.follow, lead)
			}
		}
		ok := i%2 == 0
		var waits sync.WaitGroup
		for g := range goroutines {
			if r := results[g][i]; r.follow != nil {
				waits.Go(func() {
					if got := r.follow.Wait(ctx); got != ok {
						t.Errorf("event %d: a follower saw %v, the lead did %v", i, got, ok)
					}
				})
			}
		}
		lead.Done(ok)
		waits.Wait()
	}
	if n := f.flights.size(); n != 0 {
		t.Fatalf("%d entries left in flight", n)
	}
	if got := counterValue(t, f.m.lookups.WithLabelValues(TierInFlight, ResultHit)); got != (goroutines-1)*events {
		t.Errorf("inflight hits = %v, want %d", got, (goroutines-1)*events)
	}
}
