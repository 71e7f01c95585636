package bridge

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/jackc/pgx/v5/pgconn"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/converter"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/wire"
)

// The handler's error classes: what Temporal refuses for good is parked as
// undeliverable at the first refusal, the rest of its batch delivered; what
// fails transiently goes back to the broker until its message has been
// failing past the bound, and is parked then; nothing that could not be
// parked is acked.

// parkLog records the dead letters a ParkFunc was given.
type parkLog struct {
	mu   sync.Mutex
	dead []wire.DeadLetter
	fail error // returned instead of parking while set
}

func (l *parkLog) park(_ context.Context, dl wire.DeadLetter) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail != nil {
		return l.fail
	}
	l.dead = append(l.dead, dl)
	return nil
}

func (l *parkLog) setFail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fail = err
}

func (l *parkLog) reasons() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, d := range l.dead {
		out = append(out, d.Reason)
	}
	return out
}

// signals records the versions each delivery carried, in call order.
type signals struct {
	mu    sync.Mutex
	calls [][]int64
}

func (s *signals) add(vs ...int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, vs)
}

func (s *signals) got() [][]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// delivered is every version signalled, in order.
func (s *signals) delivered() []int64 {
	var out []int64
	for _, c := range s.got() {
		out = append(out, c...)
	}
	return out
}

// blobRefusal is what the Temporal server answers a signal over its blob
// size limit.
var blobRefusal = serviceerror.NewInvalidArgument("Blob data size exceeds limit.")

// unencodable is the error the SDK's default data converter returns for an
// event whose time is at +24:00, as Parse once let through.
func unencodable(t *testing.T) error {
	t.Helper()
	_, err := converter.GetDefaultDataConverter().ToPayloads(time.Date(2026, 11, 25, 12, 0, 0, 0, time.FixedZone("", 24*3600)))
	if err == nil {
		t.Fatal("the data converter encoded a time at +24:00")
	}
	return err
}

// An event Temporal refuses for good (its payload cannot be encoded, or the
// server answers InvalidArgument) is tried once, parked with the refusal
// as its reason, and acked.
func TestHandlerParksWhatTemporalRefuses(t *testing.T) {
	for name, refusal := range map[string]error{"converter": unencodable(t), "server": blobRefusal} {
		t.Run(name, func(t *testing.T) {
			var parked parkLog
			var calls atomic.Int32
			h := testHandler(t, func(_ context.Context, e fsm.Event, _ wire.Envelope) error {
				calls.Add(1)
				return fmt.Errorf("deliver order event %s: %w", e.Key(), refusal)
			}, parked.park)
			m := msg(goodBody)
			m.ReconsumeTimes = 0
			if err := h.Handle(context.Background(), m); err != nil {
				t.Fatalf("handle: %v, want the message parked and acked", err)
			}
			if n := calls.Load(); n != 1 {
				t.Errorf("%d delivery attempts, want 1 (a refusal is not retried)", n)
			}
			want := "undeliverable: deliver order event o-1@2: " + refusal.Error()
			if r := parked.reasons(); len(r) != 1 || r[0] != want {
				t.Fatalf("dead letters %q, want [%q]", r, want)
			}
			if d := parked.dead[0]; string(d.Body) != goodBody || d.MessageID != "MSG1" || d.Keys != "o-1" || d.Tags != "PAID" || d.Topic != "T" {
				t.Errorf("dead letter %+v, want the message as received", d)
			}
			for result, want := range map[string]float64{ResultParked: 1, ResultRetry: 0, ResultSignalled: 0} {
				if v := counterValue(t, h.metrics.messages.WithLabelValues(result)); v != want {
					t.Errorf("%s = %v, want %v", result, v, want)
				}
			}
			if v := counterValue(t, h.metrics.rejections.WithLabelValues(wire.KindUndeliverable)); v != 1 {
				t.Errorf("undeliverable rejections = %v, want 1", v)
			}
		})
	}
}

// A refused event that cannot be parked (PostgreSQL down) goes back to the
// broker: never acked.
func TestHandlerHandsBackARefusedEventItCannotPark(t *testing.T) {
	parked := parkLog{fail: errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")}
	h := testHandler(t, func(context.Context, fsm.Event, wire.Envelope) error { return blobRefusal }, parked.park)
	err := h.Handle(context.Background(), msg(goodBody))
	if err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("handle = %v, want the parking's failure (not acked)", err)
	}
	if v := counterValue(t, h.metrics.messages.WithLabelValues(ResultRetry)); v != 1 {
		t.Errorf("retry = %v, want 1", v)
	}
	parked.setFail(nil)
	if err := h.Handle(context.Background(), msg(goodBody)); err != nil {
		t.Fatalf("handle once PostgreSQL is back: %v", err)
	}
	if r := parked.reasons(); len(r) != 1 || !strings.HasPrefix(r[0], "undeliverable: ") {
		t.Errorf("dead letters %q, want one undeliverable", r)
	}
}

// redelivered is a message carrying goodBody that the broker has
// redelivered times times, born age ago.
func redelivered(times int32, age time.Duration) *primitive.MessageExt {
	m := msg(goodBody)
	m.ReconsumeTimes = times
	m.BornTimestamp = time.Now().Add(-age).UnixMilli()
	return m
}

// A transient failure goes back to the broker until the message has been
// failing for the bound (mq.Failing: the delays the broker held it back,
// no longer than its age); then it is parked as undeliverable with how
// long and the last error, and acked.
func TestHandlerParksWhatFailedPastTheBound(t *testing.T) {
	down := errors.New("rpc error: code = Unavailable desc = connection refused")
	var parked parkLog
	h := testHandler(t, func(context.Context, fsm.Event, wire.Envelope) error { return down }, parked.park)
	h.WithDeliveryBound(time.Hour, 5)
	for _, c := range []struct {
		name string
		m    *primitive.MessageExt
	}{
		// At level 5, 61 redeliveries held it back 10 s + 30 s + 59 m.
		{"held back less than the bound", redelivered(61, 3*time.Hour)},
		{"failing for longer than it exists", redelivered(70, 50*time.Minute)},
		{"first delivery of an old message", redelivered(0, 5*time.Hour)},
	} {
		if err := h.Handle(context.Background(), c.m); err == nil || !errors.Is(err, down) {
			t.Errorf("%s: handle = %v, want the failure (handed back)", c.name, err)
		}
	}
	if r := parked.reasons(); len(r) != 0 {
		t.Fatalf("parked %q within the bound", r)
	}

	// 62 redeliveries: 10 s + 30 s + 60 m.
	if err := h.Handle(context.Background(), redelivered(62, 3*time.Hour)); err != nil {
		t.Fatalf("handle: %v, want the message parked and acked", err)
	}
	r := parked.reasons()
	const prefix = "undeliverable: not delivered for 1h0m40s: temporal: gave up after "
	if len(r) != 1 || !strings.HasPrefix(r[0], prefix) || !strings.HasSuffix(r[0], down.Error()) {
		t.Fatalf("dead letters %q, want one %q ... %q", r, prefix, down)
	}
	if v := counterValue(t, h.metrics.messages.WithLabelValues(ResultParked)); v != 1 {
		t.Errorf("parked = %v, want 1", v)
	}

	// Past the bound but PostgreSQL is down too: handed back, not acked.
	parked.setFail(errors.New("connection refused"))
	if err := h.Handle(context.Background(), redelivered(80, 3*time.Hour)); err == nil {
		t.Fatal("a message past the bound that could not be parked was acked")
	}
	// While the bridge stops, a message past the bound goes back as it is.
	parked.setFail(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := h.Handle(ctx, redelivered(80, 3*time.Hour)); err == nil {
		t.Fatal("a message past the bound was acked while the bridge stopped")
	}
	if r := parked.reasons(); len(r) != 1 {
		t.Errorf("dead letters %q, want still the one", r)
	}
}

// orderBatch is a batch of messages carrying order A's events at versions
// 1..n.
func orderBatch(n int) []*primitive.MessageExt {
	var out []*primitive.MessageExt
	for v := 1; v <= n; v++ {
		out = append(out, batchMsg(fmt.Sprintf("a%d", v), "A", int64(v), "PAID"))
	}
	return out
}

// refusing delivers everything but the versions in bad, which it refuses
// for good, alone or in a batch, as the server refuses a signal that
// carries them.
func refusing(sig *signals, bad ...int64) (DeliverFunc, DeliverManyFunc) {
	one := func(_ context.Context, e fsm.Event, _ wire.Envelope) error {
		if slices.Contains(bad, e.Version) {
			return fmt.Errorf("deliver order event %s: %w", e.Key(), blobRefusal)
		}
		sig.add(e.Version)
		return nil
	}
	many := func(_ context.Context, orderID string, items []Item) error {
		var vs []int64
		for _, it := range items {
			if slices.Contains(bad, it.Event.Version) {
				return fmt.Errorf("deliver %d events of order %s: %w", len(items), orderID, blobRefusal)
			}
			vs = append(vs, it.Event.Version)
		}
		sig.add(vs...)
		return nil
	}
	return one, many
}

// When the signal of an order's events is refused for good, the bridge
// finds the culprits by halves: only they are parked, every other event is
// delivered, in order, and the batch is acked.
func TestHandleBatchParksOnlyTheCulprit(t *testing.T) {
	for _, bad := range [][]int64{{3}, {1}, {7}, {2, 6}, {1, 2, 3, 4, 5, 6, 7}} {
		t.Run(fmt.Sprint(bad), func(t *testing.T) {
			var sig signals
			var parked parkLog
			one, many := refusing(&sig, bad...)
			h := testHandler(t, one, parked.park).WithDeliverMany(many)
			if err := h.HandleBatch(context.Background(), orderBatch(7)); err != nil {
				t.Fatalf("handle batch: %v", err)
			}
			var want []int64
			for v := int64(1); v <= 7; v++ {
				if !slices.Contains(bad, v) {
					want = append(want, v)
				}
			}
			if got := sig.delivered(); !slices.Equal(got, want) {
				t.Errorf("delivered %v (signals %v), want %v in order", got, sig.got(), want)
			}
			var parkedVersions []string
			for _, d := range parked.dead {
				if !strings.HasPrefix(d.Reason, "undeliverable: deliver order event A@") {
					t.Errorf("dead letter reason %q, want the single event's refusal", d.Reason)
				}
				parkedVersions = append(parkedVersions, d.MessageID)
			}
			var wantParked []string
			for _, v := range bad {
				wantParked = append(wantParked, fmt.Sprintf("a%d", v))
			}
			if !slices.Equal(parkedVersions, wantParked) {
				t.Errorf("parked %v, want %v", parkedVersions, wantParked)
			}
			if v := counterValue(t, h.metrics.messages.WithLabelValues(ResultSignalled)); v != float64(len(want)) {
				t.Errorf("signalled = %v, want %d", v, len(want))
			}
		})
	}
}

// A transient failure while looking for the culprit stops the order there:
// what was delivered stays delivered, nothing after it overtakes, and the
// batch goes back to the broker.
func TestHandleBatchCulpritSearchStopsAtATransientFailure(t *testing.T) {
	var sig signals
	one, many := refusing(&sig, 2)
	var halves atomic.Int32
	h := testHandler(t, one, noPark(t)).WithDeliverMany(func(ctx context.Context, orderID string, items []Item) error {
		if len(items) < 6 && halves.Add(1) > 1 {
			return errors.New("temporal unavailable")
		}
		return many(ctx, orderID, items)
	})
	// 6 events: refused whole; the first half (1-3) is refused and split
	// into 1 and 2-3; then Temporal is down.
	err := h.HandleBatch(context.Background(), orderBatch(6))
	if err == nil || !strings.Contains(err.Error(), "temporal unavailable") {
		t.Fatalf("handle batch: %v, want the transient failure", err)
	}
	if got := sig.delivered(); !slices.Equal(got, []int64{1}) {
		t.Errorf("delivered %v, want [1]", got)
	}
	if v := counterValue(t, h.metrics.messages.WithLabelValues(ResultRetry)); v != 5 {
		t.Errorf("retry = %v, want 5", v)
	}
}

// The events of one order go in signals of at most the budget, in order;
// an event that cannot be measured goes alone (and is refused alone).
func TestHandleBatchSplitsAtTheSignalBudget(t *testing.T) {
	var sig signals
	var parked parkLog
	one, many := refusing(&sig, 5)
	h := testHandler(t, one, parked.park).WithDeliverMany(many)
	sizes := map[int64]int{1: 100, 2: 100, 3: 150, 4: 300, 5: -1, 6: 100, 7: 100, 8: 100}
	h.WithSignalBudget(func(it Item) (int, error) {
		if n := sizes[it.Event.Version]; n >= 0 {
			return n, nil
		}
		return 0, errors.New("unable to encode")
	}, 300)
	if err := h.HandleBatch(context.Background(), orderBatch(8)); err != nil {
		t.Fatalf("handle batch: %v", err)
	}
	// 1+2 (200, 3 would make 350), 3 (4 would make 450), 4 (300), 5
	// alone, 6+7+8 (300).
	want := [][]int64{{1, 2}, {3}, {4}, {6, 7, 8}}
	if got := sig.got(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("signals %v, want %v", got, want)
	}
	if r := parked.reasons(); len(r) != 1 || !strings.Contains(r[0], "A@5") {
		t.Errorf("dead letters %q, want A@5's", r)
	}
}

// A lone event of an order in a batch goes in a signal of its own whatever
// its size: it is not measured (an encoding per event for nothing), and one
// that could not be measured is delivered all the same. An order with
// several events has each measured once.
func TestHandleBatchMeasuresOnlyOrdersOfSeveralEvents(t *testing.T) {
	var sig signals
	var parked parkLog
	one, many := refusing(&sig)
	h := testHandler(t, one, parked.park).WithDeliverMany(many)
	var (
		mu       sync.Mutex
		measured []string
	)
	h.WithSignalBudget(func(it Item) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		measured = append(measured, it.Event.Key().String())
		return 0, errors.New("unable to encode")
	}, 300)
	batch := []*primitive.MessageExt{
		batchMsg("b1", "B", 1, "PAID"),
		batchMsg("c1", "C", 1, "PAID"),
		batchMsg("a1", "A", 1, "PAID"),
		batchMsg("a2", "A", 2, "SHIPPED"),
	}
	if err := h.HandleBatch(context.Background(), batch); err != nil {
		t.Fatalf("handle batch: %v", err)
	}
	slices.Sort(measured)
	if want := []string{"A@1", "A@2"}; !slices.Equal(measured, want) {
		t.Errorf("measured %v, want %v (B's and C's lone events unmeasured)", measured, want)
	}
	got := sig.delivered()
	slices.Sort(got)
	if want := []int64{1, 1, 1, 2}; !slices.Equal(got, want) {
		t.Errorf("delivered versions %v, want %v", got, want)
	}
	if r := parked.reasons(); len(r) != 0 {
		t.Errorf("dead letters %q, want none", r)
	}
}

// A batch in which an invalid message cannot be parked goes back to the
// broker whole: no later message is delivered or acked behind it, and
// once PostgreSQL is back every message has its effect. A permanent
// refusal of the dead letter is not retried in-process, but neither is the
// message acked.
func TestHandleBatchInvalidMessageThatCannotBeParked(t *testing.T) {
	for name, failure := range map[string]error{
		"transient": errors.New("dial tcp: connection refused"),
		"permanent": &pgconn.PgError{Severity: "ERROR", Code: "42P01", Message: `relation "dead_letters" does not exist`},
	} {
		t.Run(name, func(t *testing.T) {
			parked := parkLog{fail: failure}
			var sig signals
			var parkCalls atomic.Int32
			h := testHandler(t, func(_ context.Context, e fsm.Event, _ wire.Envelope) error {
				sig.add(e.Version)
				return nil
			}, func(ctx context.Context, dl wire.DeadLetter) error {
				parkCalls.Add(1)
				return parked.park(ctx, dl)
			})
			bad := msg(`{"order_id":`)
			bad.MsgId = "BAD"
			batch := []*primitive.MessageExt{batchMsg("a1", "A", 1, "CREATED"), bad, batchMsg("b1", "B", 1, "CREATED")}
			if err := h.HandleBatch(context.Background(), batch); err == nil || !errors.Is(err, failure) {
				t.Fatalf("handle batch = %v, want the parking's failure", err)
			}
			if got := sig.delivered(); len(got) != 0 {
				t.Errorf("delivered %v behind a message that could not be parked, want nothing", got)
			}
			if v := counterValue(t, h.metrics.messages.WithLabelValues(ResultRetry)); v != 3 {
				t.Errorf("retry = %v, want 3 (the whole batch)", v)
			}
			if name == "permanent" && parkCalls.Load() != 1 {
				t.Errorf("%d attempts to park, want 1 (a refusal is not retried)", parkCalls.Load())
			}
			parked.setFail(nil)
			if err := h.HandleBatch(context.Background(), batch); err != nil {
				t.Fatalf("handle batch once PostgreSQL is back: %v", err)
			}
			if got := sig.delivered(); len(got) != 2 || len(parked.reasons()) != 1 {
				t.Errorf("delivered %v, parked %q; want both events and the invalid message", got, parked.reasons())
			}
		})
	}
}

// A panic while delivering several orders at once fails the panicking
// order's messages (the batch goes back), never the process; the other
// orders are delivered, and the next batch is handled as usual.
func TestHandleBatchPanicWhileDeliveringSeveralOrders(t *testing.T) {
	var sig signals
	var panics atomic.Int32
	h := testHandler(t, func(_ context.Context, e fsm.Event, _ wire.Envelope) error {
		sig.add(e.Version)
		return nil
	}, noPark(t))
	h.WithDeliverMany(func(_ context.Context, orderID string, items []Item) error {
		if orderID == "B" && panics.Add(1) == 1 {
			panic("a bug in the delivery")
		}
		for _, it := range items {
			sig.add(it.Event.Version)
		}
		return nil
	})
	batch := []*primitive.MessageExt{batchMsg("a1", "A", 1, "CREATED"), batchMsg("b1", "B", 1, "CREATED"),
		batchMsg("a2", "A", 2, "PAID"), batchMsg("b2", "B", 2, "PAID")}
	err := h.HandleBatch(context.Background(), batch)
	if err == nil || !strings.Contains(err.Error(), "panicked") {
		t.Fatalf("handle batch = %v, want the panic as an error", err)
	}
	if v := counterValue(t, h.metrics.messages.WithLabelValues(ResultRetry)); v != 2 {
		t.Errorf("retry = %v, want 2 (order B's messages)", v)
	}
	if v := counterValue(t, h.metrics.messages.WithLabelValues(ResultSignalled)); v != 2 {
		t.Errorf("signalled = %v, want 2 (order A's messages)", v)
	}
	if err := h.HandleBatch(context.Background(), batch); err != nil {
		t.Fatalf("the next batch: %v", err)
	}
}

// A parked message records no sequence number, whether it is invalid or an
// event Temporal refuses: the recorder is never called, so a database that
// cannot record numbers does not hold the message back; it is parked once
// and acked.
func TestParkedMessageRecordsNoSequence(t *testing.T) {
	bodies := map[string]string{
		"invalid":       `{"order_id":"o-1","producer_id":"p","seq":7}`,
		"undeliverable": strings.Replace(goodBody, `}`, `,"producer_id":"p","seq":7}`, 1),
	}
	for name, body := range bodies {
		t.Run(name, func(t *testing.T) {
			var parked parkLog
			h := testHandler(t, func(context.Context, fsm.Event, wire.Envelope) error { return blobRefusal }, parked.park)
			var calls int
			h.WithRecorder(func(context.Context, string, int64) error {
				calls++
				return errors.New("connection reset by peer")
			})
			if err := h.Handle(context.Background(), msg(body)); err != nil {
				t.Fatalf("handle: %v, want parked and acked", err)
			}
			if len(parked.dead) != 1 || calls != 0 {
				t.Errorf("parked %d times, recorder called %d times; want 1 and 0", len(parked.dead), calls)
			}
			if v := counterValue(t, h.metrics.messages.WithLabelValues(ResultParked)); v != 1 {
				t.Errorf("parked = %v, want 1", v)
			}
		})
	}
}

// refusingWorld makes b deliver through w but refuse event x for good, the
// first delivery of it held until gate closes; b parks in w's database.
func refusingWorld(t *testing.T, w *ledgerWorld, b testBridge, x fsm.Event, gate <-chan struct{}) (calls func(id string) int, entered <-chan struct{}) {
	t.Helper()
	var mu sync.Mutex
	byID := map[string]int{}
	in := make(chan struct{}, 1)
	b.h.park = func(ctx context.Context, dl wire.DeadLetter) error {
		_, err := w.st.ParkDeadLetter(ctx, dl)
		return err
	}
	b.h.deliver = func(ctx context.Context, e fsm.Event, src wire.Envelope) error {
		mu.Lock()
		byID[src.MessageID]++
		first := e.Key() == x.Key() && byID[src.MessageID] == 1 && len(byID) == 1
		mu.Unlock()
		if e.Key() != x.Key() {
			return w.deliver(ctx, e, src)
		}
		if first && gate != nil {
			in <- struct{}{}
			<-gate
		}
		return fmt.Errorf("deliver order event %s: %w", e.Key(), blobRefusal)
	}
	return func(id string) int {
		mu.Lock()
		defer mu.Unlock()
		return byID[id]
	}, in
}

// deadLetterOf is the reason and times seen of the dead letter holding
// body.
func deadLetterOf(t *testing.T, w *ledgerWorld, body []byte) (string, int) {
	t.Helper()
	var row struct {
		Reason    string
		TimesSeen int
	}
	if err := w.st.DB().Raw(`SELECT reason, times_seen FROM dead_letters WHERE body = ?`, body).Scan(&row).Error; err != nil {
		t.Fatal(err)
	}
	return row.Reason, row.TimesSeen
}

// A copy that waited for a delivery Temporal then refused for good is not
// acked as a duplicate: it is delivered itself, refused too, and parked;
// both messages are acked, one dead letter seen twice.
func TestCopyWaitingOnARefusedDeliveryIsParkedToo(t *testing.T) {
	w := newLedgerWorld(t)
	b := w.bridge(t, bridgeOpts{})
	x := w.event(0, 1, 100)
	gate := make(chan struct{})
	calls, entered := refusingWorld(t, w, b, x, gate)
	orig, cp := eventMsg(t, x), eventMsg(t, x)
	first := b.run(context.Background(), orig)
	<-entered
	second := b.run(context.Background(), cp)
	waitFor(t, "the copy to follow the original's delivery", func() bool {
		return b.lookups(t, "inflight", "hit") == 1
	})
	close(gate)
	for name, done := range map[string]<-chan error{"first": first, "second": second} {
		if err := await(t, done, 20*time.Second, "the "+name+" batch"); err != nil {
			t.Fatalf("%s batch: %v, want parked and acked", name, err)
		}
	}
	if calls(orig.MsgId) != 1 || calls(cp.MsgId) != 1 {
		t.Errorf("deliveries: original %d, copy %d; want 1 each (refusals are not retried)", calls(orig.MsgId), calls(cp.MsgId))
	}
	reason, seen := deadLetterOf(t, w, orig.Body)
	if !strings.HasPrefix(reason, "undeliverable: deliver order event "+x.Key().String()) || seen != 2 {
		t.Errorf("dead letter %q seen %d times, want the refusal, seen 2", reason, seen)
	}
	if got := b.messages(t, ResultParked); got != 2 {
		t.Errorf("parked = %v, want 2", got)
	}
	if got := b.messages(t, ResultDuplicate); got != 0 {
		t.Errorf("duplicate = %v, want 0", got)
	}
}

// A copy in the batch of an event Temporal refuses for good shares its
// fate: parked with it, never delivered on its own; the batch is acked.
func TestCopyInABatchIsParkedWithItsOriginal(t *testing.T) {
	w := newLedgerWorld(t)
	b := w.bridge(t, bridgeOpts{})
	x, y := w.event(0, 1, 100), w.event(1, 1, 100)
	calls, _ := refusingWorld(t, w, b, x, nil)
	orig, cp, other := eventMsg(t, x), eventMsg(t, x), eventMsg(t, y)
	if err := b.h.HandleBatch(context.Background(), []*primitive.MessageExt{orig, other, cp}); err != nil {
		t.Fatalf("handle batch: %v", err)
	}
	if calls(cp.MsgId) != 0 || calls(orig.MsgId) != 1 || w.signalled(y) != 1 {
		t.Errorf("deliveries: original %d, copy %d, other event %d; want 1, 0, 1", calls(orig.MsgId), calls(cp.MsgId), w.signalled(y))
	}
	reason, seen := deadLetterOf(t, w, orig.Body)
	if !strings.HasPrefix(reason, "undeliverable: ") || seen != 2 {
		t.Errorf("dead letter %q seen %d times, want undeliverable, seen 2", reason, seen)
	}
	if got := b.messages(t, ResultParked); got != 2 {
		t.Errorf("parked = %v, want 2", got)
	}
}
