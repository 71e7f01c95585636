package bridge

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/orderflow/orderflow/dedup"
	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/wire"
)

// Copies of an event that this bridge is delivering right now, against a
// real Redis and a real ledger (the harness of dedup_test.go). Signals are
// counted where the bridge calls SignalWithStart: the DeliverFunc and the
// DeliverManyFunc.

// deliveries records which messages a DeliverFunc was called with, and can
// hold the delivery of chosen messages until they are released.
type deliveries struct {
	w *ledgerWorld

	mu    sync.Mutex
	calls []string // the message ID of each call
	// held: message ID → closed once its delivery may go on; fail makes
	// a held delivery fail instead.
	held    map[string]chan struct{}
	fail    map[string]bool
	entered chan string // a held delivery began
}

// heldBridge is a bridge with the full filter on a world of its own whose
// deliveries go through d, so that a test can hold or fail them.
func heldBridge(t *testing.T) (*ledgerWorld, testBridge, *deliveries) {
	t.Helper()
	w := newLedgerWorld(t)
	b := w.bridge(t, bridgeOpts{})
	d := newDeliveries(w)
	b.h.deliver = d.deliver
	return w, b, d
}

func newDeliveries(w *ledgerWorld) *deliveries {
	return &deliveries{w: w, held: map[string]chan struct{}{}, fail: map[string]bool{}, entered: make(chan string, 16)}
}

// hold makes the delivery of message id wait for release; with fail, it
// then fails (every attempt) without reaching the workflow.
func (d *deliveries) hold(id string, fail bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.held[id] = make(chan struct{})
	d.fail[id] = fail
}

func (d *deliveries) release(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	close(d.held[id])
}

func (d *deliveries) deliver(ctx context.Context, e fsm.Event, src wire.Envelope) error {
	d.mu.Lock()
	d.calls = append(d.calls, src.MessageID)
	gate, fail := d.held[src.MessageID], d.fail[src.MessageID]
	d.mu.Unlock()
	if gate != nil {
		select {
		case d.entered <- src.MessageID:
		default:
		}
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
		if fail {
			return errors.New("temporal unavailable")
		}
	}
	return d.w.deliver(ctx, e, src)
}

// callsOf is the number of deliveries of message id.
func (d *deliveries) callsOf(id string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, c := range d.calls {
		if c == id {
			n++
		}
	}
	return n
}

// run handles msgs in a goroutine; the channel receives the result.
func (b testBridge) run(ctx context.Context, msgs ...*primitive.MessageExt) <-chan error {
	done := make(chan error, 1)
	go func() { done <- b.h.HandleBatch(ctx, msgs) }()
	return done
}

// await is the result of run, within limit.
func await(t *testing.T, done <-chan error, limit time.Duration, what string) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		t.Fatalf("%s did not return within %s", what, limit)
		return nil
	}
}

// waitFor polls cond for up to 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A batch carrying the same event twice signals it once: with batch
// signals, the order's signal carries it once; with one signal per event,
// it is signalled once. Both messages are acked, the copy as a duplicate,
// and both sequence numbers are recorded.
func TestCopyInABatchSharesItsDelivery(t *testing.T) {
	for _, batched := range []bool{true, false} {
		t.Run(map[bool]string{true: "batch signals", false: "one signal per event"}[batched], func(t *testing.T) {
			w := newLedgerWorld(t)
			b := w.bridge(t, bridgeOpts{})
			if batched {
				b.h.WithDeliverMany(w.deliverMany)
			}
			var mu sync.Mutex
			var recorded []int64
			b.h.WithRecorder(func(_ context.Context, _ string, seq int64) error {
				mu.Lock()
				defer mu.Unlock()
				recorded = append(recorded, seq)
				return nil
			})
			x1, x2, y := w.event(0, 1, 100), w.event(0, 2, 100), w.event(1, 1, 100)
			for i, e := range []*fsm.Event{&x1, &x2, &y} {
				e.ProducerID, e.Seq = "p", int64(i+1)
			}
			copyOfX1 := x1
			copyOfX1.Seq = 9 // a producer's retry numbers its copy anew
			batch := []*primitive.MessageExt{eventMsg(t, x1), eventMsg(t, y), eventMsg(t, copyOfX1), eventMsg(t, x2)}
			if err := b.h.HandleBatch(context.Background(), batch); err != nil {
				t.Fatalf("handle batch: %v", err)
			}
			for _, e := range []fsm.Event{x1, x2, y} {
				if got := w.signalled(e); got != 1 {
					t.Errorf("%s carried by %d signals, want 1", e.Key(), got)
				}
			}
			if batched {
				want := [][]fsm.Key{{x1.Key(), x2.Key()}}
				if !slices.EqualFunc(w.batches, want, slices.Equal) {
					t.Errorf("batch signals %v, want %v (order %s's events, the copy left out)", w.batches, want, x1.OrderID)
				}
			}
			if got, want := b.messages(t, ResultSignalled), 3.0; got != want {
				t.Errorf("signalled = %v, want %v", got, want)
			}
			if got := b.messages(t, ResultDuplicate); got != 1 {
				t.Errorf("duplicate = %v, want 1", got)
			}
			if got := b.lookups(t, dedup.TierInFlight, dedup.ResultHit); got != 1 {
				t.Errorf("inflight hits = %v, want 1", got)
			}
			mu.Lock()
			defer mu.Unlock()
			slices.Sort(recorded)
			if !slices.Equal(recorded, []int64{1, 2, 3, 9}) {
				t.Errorf("recorded sequence numbers %v, want [1 2 3 9]", recorded)
			}
		})
	}
}

// A copy in the batch of an event whose delivery fails fails with it: the
// batch goes back to the broker, neither message is acked, and the copy was
// never delivered on its own.
func TestCopyInABatchFailsWithItsOriginal(t *testing.T) {
	w, b, d := heldBridge(t)
	b.h.retry = RetryPolicy{For: 300 * time.Millisecond, Attempt: 100 * time.Millisecond, Initial: 20 * time.Millisecond, Max: 50 * time.Millisecond}
	x := w.event(0, 1, 100)
	orig, cp := eventMsg(t, x), eventMsg(t, x)
	d.hold(orig.MsgId, true)
	d.release(orig.MsgId)
	if err := b.h.HandleBatch(context.Background(), []*primitive.MessageExt{orig, cp}); err == nil {
		t.Fatal("the batch was acked though its event was never delivered")
	}
	if n := d.callsOf(cp.MsgId); n != 0 {
		t.Errorf("the copy was delivered %d times, want 0 (it shares the original's delivery)", n)
	}
	if d.callsOf(orig.MsgId) < 2 {
		t.Errorf("the original was delivered %d times, want retries", d.callsOf(orig.MsgId))
	}
	if got := b.messages(t, ResultRetry); got != 2 {
		t.Errorf("retry = %v, want 2", got)
	}
	if got := b.messages(t, ResultDuplicate); got != 0 {
		t.Errorf("duplicate = %v, want 0", got)
	}
}

// A copy that arrives in another callback while its original's signal is
// in flight waits for that signal instead of sending its own; the rest of
// its batch is delivered meanwhile; once the original's delivery
// succeeded, the copy is acked as a duplicate.
func TestCopyWaitsForTheDeliveryInFlight(t *testing.T) {
	w, b, d := heldBridge(t)
	x, y := w.event(0, 1, 100), w.event(1, 1, 100)
	orig, cp, other := eventMsg(t, x), eventMsg(t, x), eventMsg(t, y)
	d.hold(orig.MsgId, false)
	first := b.run(context.Background(), orig)
	<-d.entered
	second := b.run(context.Background(), cp, other)
	waitFor(t, "the other event of the second batch to be signalled", func() bool { return w.signalled(y) == 1 })
	select {
	case err := <-second:
		t.Fatalf("the second batch returned (%v) before its copy's original was delivered", err)
	case <-time.After(100 * time.Millisecond):
	}
	d.release(orig.MsgId)
	if err := await(t, first, 20*time.Second, "the first batch"); err != nil {
		t.Fatalf("first batch: %v", err)
	}
	if err := await(t, second, 20*time.Second, "the second batch"); err != nil {
		t.Fatalf("second batch: %v", err)
	}
	if n := d.callsOf(cp.MsgId); n != 0 {
		t.Errorf("the copy was delivered %d times, want 0", n)
	}
	if got := w.signalled(x); got != 1 {
		t.Errorf("%s signalled %d times, want 1", x.Key(), got)
	}
	if got := b.messages(t, ResultDuplicate); got != 1 {
		t.Errorf("duplicate = %v, want 1", got)
	}
	if got := b.messages(t, ResultSignalled); got != 2 {
		t.Errorf("signalled = %v, want 2", got)
	}
	if got := b.lookups(t, dedup.TierInFlight, dedup.ResultHit); got != 1 {
		t.Errorf("inflight hits = %v, want 1", got)
	}
}

// When the original's delivery fails, the copy that waited for it is not
// acked as a duplicate: it is delivered itself, at once (not after its
// wait ran out).
func TestCopyOfAFailedDeliveryIsDeliveredItself(t *testing.T) {
	w, b, d := heldBridge(t)
	x := w.event(0, 1, 100)
	orig, cp := eventMsg(t, x), eventMsg(t, x)
	d.hold(orig.MsgId, true)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	first := b.run(ctx, orig)
	<-d.entered
	second := b.run(context.Background(), cp)
	waitFor(t, "the copy to follow the original's delivery", func() bool {
		return b.lookups(t, dedup.TierInFlight, dedup.ResultHit) == 1
	})
	// The original's delivery fails and its bridge gives up (it is
	// stopping): the batch goes back to the broker.
	released := time.Now()
	d.release(orig.MsgId)
	stop()
	if err := await(t, first, 20*time.Second, "the first batch"); err == nil {
		t.Fatal("the first batch was acked though its delivery failed")
	}
	if err := await(t, second, 20*time.Second, "the second batch"); err != nil {
		t.Fatalf("second batch: %v", err)
	}
	if waited := time.Since(released); waited >= b.h.retry.For {
		t.Errorf("the copy was settled %s after the failure, not before its wait ran out (%s)", waited, b.h.retry.For)
	}
	if n := d.callsOf(cp.MsgId); n != 1 {
		t.Errorf("the copy was delivered %d times, want 1", n)
	}
	if got := w.signalled(x); got != 1 {
		t.Errorf("%s reached the workflow %d times, want 1 (the copy's signal)", x.Key(), got)
	}
	if got := b.messages(t, ResultDuplicate); got != 0 {
		t.Errorf("duplicate = %v, want 0", got)
	}
	if got := b.messages(t, ResultSignalled); got != 1 {
		t.Errorf("signalled = %v, want 1", got)
	}
}

// Two batches hold each other's copies: A carries x and a copy of y, B
// carries y and a copy of x, each original admitted before the other's
// copy. Both complete, each event signalled once, each copy acked as a
// duplicate: neither batch waits for the other before delivering its own.
func TestCrossedCopiesDoNotDeadlock(t *testing.T) {
	w := newLedgerWorld(t)
	b := w.bridge(t, bridgeOpts{})
	// An invalid message between an original and a copy: its parking waits
	// until both batches park, so both originals are in flight before
	// either copy is looked at.
	var parks sync.WaitGroup
	parks.Add(2)
	b.h.park = func(ctx context.Context, _ wire.DeadLetter) error {
		parks.Done()
		done := make(chan struct{})
		go func() { parks.Wait(); close(done) }()
		select {
		case <-done:
			return nil
		case <-time.After(10 * time.Second):
			t.Error("the other batch never parked")
			return nil
		}
	}
	x, y := w.event(0, 1, 100), w.event(1, 1, 100)
	bad := func() *primitive.MessageExt {
		m := msg(`{"order_id":`)
		m.MsgId = uniq.Name("bad")
		return m
	}
	a := b.run(context.Background(), eventMsg(t, x), bad(), eventMsg(t, y))
	c := b.run(context.Background(), eventMsg(t, y), bad(), eventMsg(t, x))
	// Well within the copies' wait (30 s), after which they would deliver
	// themselves.
	for name, done := range map[string]<-chan error{"A": a, "B": c} {
		if err := await(t, done, 25*time.Second, "batch "+name); err != nil {
			t.Fatalf("batch %s: %v", name, err)
		}
	}
	for _, e := range []fsm.Event{x, y} {
		if got := w.signalled(e); got != 1 {
			t.Errorf("%s signalled %d times, want 1", e.Key(), got)
		}
	}
	if got := b.messages(t, ResultDuplicate); got != 2 {
		t.Errorf("duplicate = %v, want 2", got)
	}
	if got := b.lookups(t, dedup.TierInFlight, dedup.ResultHit); got != 2 {
		t.Errorf("inflight hits = %v, want 2", got)
	}
}

// A copy with other content than the event in flight is a conflict: it
// neither waits nor is dropped, but reaches the workflow (which parks it),
// in another callback as in the same batch.
func TestConflictingCopyInFlightIsDelivered(t *testing.T) {
	w, b, d := heldBridge(t)
	x, conflict := w.event(0, 1, 100), w.event(0, 1, 101)
	orig, other := eventMsg(t, x), eventMsg(t, conflict)
	d.hold(orig.MsgId, false)
	first := b.run(context.Background(), orig)
	<-d.entered
	if err := await(t, b.run(context.Background(), other), 20*time.Second,
		"the batch of the conflicting copy, while the original is in flight,"); err != nil {
		t.Fatalf("conflicting copy: %v", err)
	}
	if n := d.callsOf(other.MsgId); n != 1 {
		t.Errorf("the conflicting copy was delivered %d times, want 1", n)
	}
	d.release(orig.MsgId)
	if err := await(t, first, 20*time.Second, "the first batch"); err != nil {
		t.Fatalf("first batch: %v", err)
	}
	if got := b.lookups(t, dedup.TierInFlight, dedup.ResultConflict); got != 1 {
		t.Errorf("inflight conflicts = %v, want 1", got)
	}

	// The same in one batch: both contents are signalled.
	z, zConflict := w.event(1, 1, 100), w.event(1, 1, 101)
	zm, zc := eventMsg(t, z), eventMsg(t, zConflict)
	if err := b.h.HandleBatch(context.Background(), []*primitive.MessageExt{zm, zc}); err != nil {
		t.Fatalf("batch: %v", err)
	}
	if d.callsOf(zm.MsgId) != 1 || d.callsOf(zc.MsgId) != 1 {
		t.Errorf("deliveries in one batch: %d of the event, %d of its conflicting copy; want 1 and 1",
			d.callsOf(zm.MsgId), d.callsOf(zc.MsgId))
	}
	if got := b.messages(t, ResultSignalled); got != 4 {
		t.Errorf("signalled = %v, want 4", got)
	}
	if got := b.messages(t, ResultDuplicate); got != 0 {
		t.Errorf("duplicate = %v, want 0", got)
	}
	// The ledger parked one conflicting content per key: the workflow's
	// job, done here by the counting delivery through store.ApplyEvent.
	var n int64
	if err := w.st.DB().Raw(`SELECT count(*) FROM dead_letters WHERE reason LIKE 'conflict:%'`).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("%d conflict dead letters, want 2", n)
	}
}
