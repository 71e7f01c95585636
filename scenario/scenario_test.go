package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/mq"
)

func testOptions(seed int64) Options {
	return Options{
		Orders: 300, Seed: seed, Prefix: "t-scn",
		Start:   time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC),
		DupRate: 0.15, Reorder: 0.4, CancelRate: 0.25, OpenRate: 0.15,
		UpdateRate: 0.3, GapRate: 0.1, Conflicts: 12, Bad: 18,
	}
}

func TestGenerateIsDeterministic(t *testing.T) {
	a, err := Generate(testOptions(42))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Generate(testOptions(42))
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Messages) != len(b.Messages) {
		t.Fatalf("same seed, different message counts: %d vs %d", len(a.Messages), len(b.Messages))
	}
	for i := range a.Messages {
		if !bytes.Equal(a.Messages[i].Msg.Body, b.Messages[i].Msg.Body) || a.Messages[i].Kind != b.Messages[i].Kind {
			t.Fatalf("same seed, message %d differs:\n%s\n%s", i, a.Messages[i].Msg.Body, b.Messages[i].Msg.Body)
		}
	}
	if !reflect.DeepEqual(a.Expected, b.Expected) {
		t.Fatal("same seed, different expected state")
	}
	c, err := Generate(testOptions(43))
	if err != nil {
		t.Fatal(err)
	}
	if reflect.DeepEqual(a.Expected.Orders, c.Expected.Orders) {
		t.Fatal("different seeds gave the same orders")
	}
}

func TestGenerateDistortionsPresent(t *testing.T) {
	s, err := Generate(testOptions(7))
	if err != nil {
		t.Fatal(err)
	}
	exp := s.Expected
	c := exp.Counts
	t.Logf("counts: %+v", c)
	if c.Orders != 300 || len(exp.Orders) != 300 {
		t.Fatalf("orders: %d / %d, want 300", c.Orders, len(exp.Orders))
	}
	if c.Duplicates == 0 || c.Reordered == 0 || c.Lost == 0 || c.Conflicts != 12 || c.Bad != 18 {
		t.Fatalf("a distortion is missing: %+v", c)
	}
	if c.Messages != c.Events+c.Duplicates+c.Conflicts+c.Bad {
		t.Fatalf("messages %d != events %d + duplicates %d + conflicts %d + bad %d", c.Messages, c.Events, c.Duplicates, c.Conflicts, c.Bad)
	}
	if len(exp.Keys) != c.Events || len(exp.Lost) != c.Lost {
		t.Fatalf("keys %d (events %d), lost %d (%d)", len(exp.Keys), c.Events, len(exp.Lost), c.Lost)
	}

	kinds := map[Kind]int{}
	badKindsSeen := map[string]bool{}
	statuses := map[fsm.Status]int{}
	for _, o := range exp.Orders {
		statuses[o.Status]++
	}
	for _, st := range fsm.Statuses {
		if statuses[st] == 0 {
			t.Errorf("no order ends at %s: %v", st, statuses)
		}
	}
	for _, b := range exp.Bad {
		badKindsSeen[b.Kind] = true
	}
	for _, k := range badKinds {
		if !badKindsSeen[k] {
			t.Errorf("no bad message of kind %s", k)
		}
	}

	// Every message: valid events decode and validate; bad ones do not.
	seenBody := map[string]bool{}
	lastVersion := map[string]int64{}
	outOfOrder := 0
	for i, m := range s.Messages {
		kinds[m.Kind]++
		switch m.Kind {
		case KindBad:
			var e fsm.Event
			if len(m.Msg.Body) <= MaxBodyBytes {
				if err := json.Unmarshal(m.Msg.Body, &e); err == nil {
					if err := e.Validate(); err == nil {
						t.Errorf("bad message %d is a valid event: %s", i, m.Msg.Body)
					}
				}
			} else if !strings.Contains(m.Msg.Keys, "-bad-") {
				t.Errorf("oversize message %d has key %q", i, m.Msg.Keys)
			}
		default:
			var e fsm.Event
			if err := json.Unmarshal(m.Msg.Body, &e); err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
			if err := e.Validate(); err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
			if e.ProducerID == "" || e.Seq == 0 {
				t.Errorf("message %d has no producer_id/seq", i)
			}
			if m.Msg.Keys != e.OrderID || m.Msg.ShardingKey != e.OrderID || m.Msg.Tag != string(e.Status) {
				t.Errorf("message %d: keys %q sharding %q tag %q for %s", i, m.Msg.Keys, m.Msg.ShardingKey, m.Msg.Tag, e.Key())
			}
			if m.Kind == KindDuplicate && !seenBody[string(m.Msg.Body)] {
				t.Errorf("duplicate message %d precedes its original", i)
			}
			if m.Kind == KindEvent {
				if e.Version < lastVersion[e.OrderID] {
					outOfOrder++
				}
				lastVersion[e.OrderID] = e.Version
			}
		}
		seenBody[string(m.Msg.Body)] = true
	}
	if kinds[KindDuplicate] != c.Duplicates || kinds[KindConflict] != c.Conflicts || kinds[KindBad] != c.Bad {
		t.Fatalf("message kinds %v disagree with counts %+v", kinds, c)
	}
	if outOfOrder == 0 {
		t.Fatal("no event is published after a higher version of its order")
	}
	var oversize int
	for _, m := range s.Messages {
		if len(m.Msg.Body) > MaxBodyBytes {
			oversize++
		}
	}
	if oversize == 0 {
		t.Fatal("no oversize body")
	}
}

// model replays messages in a delivery order with the rules of DESIGN.md:
// per order a serializer that knows every recorded business key.
type model struct {
	cur       map[string]*fsm.Order
	seen      map[fsm.Key]string
	points    map[string]int64
	ledger    map[string]map[fsm.PointsKind]int64
	conflicts map[fsm.Key]string // parked content hash
}

func replay(t *testing.T, msgs []Message) *model {
	t.Helper()
	m := &model{
		cur: map[string]*fsm.Order{}, seen: map[fsm.Key]string{}, points: map[string]int64{},
		ledger: map[string]map[fsm.PointsKind]int64{}, conflicts: map[fsm.Key]string{},
	}
	for _, msg := range msgs {
		if msg.Kind == KindBad {
			continue
		}
		var e fsm.Event
		if err := json.Unmarshal(msg.Msg.Body, &e); err != nil {
			t.Fatal(err)
		}
		h := e.ContentHash()
		if prev, ok := m.seen[e.Key()]; ok {
			if prev != h {
				m.conflicts[e.Key()] = h
			}
			continue
		}
		m.seen[e.Key()] = h
		d := fsm.Decide(m.cur[e.OrderID], e)
		if d.Outcome != fsm.Applied {
			continue
		}
		next := d.Next
		m.cur[e.OrderID] = &next
		m.points[e.OrderID] += d.PointsDelta
		if d.Points != fsm.PointsNone {
			if m.ledger[e.OrderID] == nil {
				m.ledger[e.OrderID] = map[fsm.PointsKind]int64{}
			}
			m.ledger[e.OrderID][d.Points] = d.PointsDelta
		}
	}
	return m
}

// TestExpectedIndependentOfDeliveryOrder replays the scenario in many
// delivery orders and checks every one against the expected state, with the
// same rules the checker applies to the database.
func TestExpectedIndependentOfDeliveryOrder(t *testing.T) {
	s, err := Generate(testOptions(11))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 30; round++ {
		msgs := append([]Message(nil), s.Messages...)
		if round > 0 {
			rng.Shuffle(len(msgs), func(a, b int) { msgs[a], msgs[b] = msgs[b], msgs[a] })
		}
		m := replay(t, msgs)
		for _, o := range s.Expected.Orders {
			got := m.cur[o.OrderID]
			if got == nil {
				t.Fatalf("round %d: order %s never applied", round, o.OrderID)
			}
			if got.Status != o.Status || got.Version != o.Version || got.AmountCents != o.AmountCents || got.UserID != o.UserID {
				t.Fatalf("round %d: order %s ended at %s v%d %d¢, expected %s v%d %d¢",
					round, o.OrderID, got.Status, got.Version, got.AmountCents, o.Status, o.Version, o.AmountCents)
			}
			if m.points[o.OrderID] != o.Points {
				t.Fatalf("round %d: order %s points %d, expected %d", round, o.OrderID, m.points[o.OrderID], o.Points)
			}
			l := m.ledger[o.OrderID]
			if p, ok := l[fsm.Purchase]; ok && p != o.PurchasePoints {
				t.Fatalf("round %d: order %s purchase %d, expected %d", round, o.OrderID, p, o.PurchasePoints)
			}
			if _, ok := l[fsm.Refund]; ok && !o.RefundPossible {
				t.Fatalf("round %d: order %s refunded but no refund is possible", round, o.OrderID)
			}
		}
		if len(m.conflicts) != len(s.Expected.Conflicts) {
			t.Fatalf("round %d: %d conflicts parked, expected %d", round, len(m.conflicts), len(s.Expected.Conflicts))
		}
		for _, c := range s.Expected.Conflicts {
			k := fsm.Key{OrderID: c.OrderID, Version: c.Version}
			rec, parked := m.seen[k], m.conflicts[k]
			if !(rec == c.Hashes[0] && parked == c.Hashes[1]) && !(rec == c.Hashes[1] && parked == c.Hashes[0]) {
				t.Fatalf("round %d: conflict %s recorded %s parked %s, expected the pair %v", round, k, rec, parked, c.Hashes)
			}
		}
		if len(m.seen) != len(s.Expected.Keys) {
			t.Fatalf("round %d: %d business keys recorded, expected %d", round, len(m.seen), len(s.Expected.Keys))
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	cases := map[string]func(*Options){
		"orders must be >= 1":      func(o *Options) { o.Orders = 0 },
		"prefix is required":       func(o *Options) { o.Prefix = "" },
		"prefix \"a b\" must be":   func(o *Options) { o.Prefix = "a b" },
		"dup-rate must be within":  func(o *Options) { o.DupRate = 1.5 },
		"gap-rate must be within":  func(o *Options) { o.GapRate = -0.1 },
		"cancel-rate + open-rate":  func(o *Options) { o.CancelRate, o.OpenRate = 0.7, 0.7 },
		"conflicts must be >= 0":   func(o *Options) { o.Conflicts = -1 },
		"bad must be >= 0":         func(o *Options) { o.Bad = -2 },
		"prefix \"xxxxxxxxxxxxxxx": func(o *Options) { o.Prefix = strings.Repeat("x", 60) },
	}
	for want, mutate := range cases {
		o := testOptions(1)
		mutate(&o)
		_, err := Generate(o)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want error containing %q, got %v", want, err)
		}
	}
}

func TestExpectedFileRoundTrip(t *testing.T) {
	s, err := Generate(testOptions(3))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "expected.json")
	if err := s.Expected.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*got, s.Expected) {
		t.Fatal("expected state changed through the file")
	}
	if _, err := ReadFile(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Fatal("reading a missing file succeeded")
	}
}

type fakePublisher struct {
	mu      sync.Mutex
	sent    []mq.Message
	failFor int // fail this many calls first
	calls   int
}

func (f *fakePublisher) Publish(_ context.Context, m mq.Message) (mq.Receipt, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.calls <= f.failFor {
		return mq.Receipt{}, errors.New("broker busy")
	}
	f.sent = append(f.sent, m)
	return mq.Receipt{MessageID: "x"}, nil
}

func TestPublishOrderRateAndRetry(t *testing.T) {
	o := testOptions(5)
	o.Orders, o.Bad, o.Conflicts = 10, 2, 1
	s, err := Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakePublisher{failFor: 2}
	n := len(s.Messages)
	began := time.Now()
	if err := Publish(context.Background(), f, s.Messages, PublishOptions{Topic: "T1", Rate: 200}); err != nil {
		t.Fatal(err)
	}
	took := time.Since(began)
	if min := time.Duration(n-1) * time.Second / 200; took < min {
		t.Fatalf("%d messages at 200/s took %s, less than %s", n, took, min)
	}
	if len(f.sent) != n || f.calls != n+2 {
		t.Fatalf("sent %d (calls %d), want %d (calls %d)", len(f.sent), f.calls, n, n+2)
	}
	for i, m := range f.sent {
		if m.Topic != "T1" || !bytes.Equal(m.Body, s.Messages[i].Msg.Body) {
			t.Fatalf("message %d out of order or wrong topic %q", i, m.Topic)
		}
	}

	f = &fakePublisher{failFor: 1 << 30}
	err = Publish(context.Background(), f, s.Messages, PublishOptions{Topic: "T1", Attempts: 2})
	if err == nil || !strings.Contains(err.Error(), "broker busy") || !strings.Contains(err.Error(), "message 1 of") {
		t.Fatalf("want a clear publish error, got %v", err)
	}
	if err := Publish(context.Background(), f, s.Messages, PublishOptions{}); err == nil {
		t.Fatal("publish without a topic succeeded")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Publish(ctx, &fakePublisher{}, s.Messages, PublishOptions{Topic: "T", Rate: 1}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled publish: %v", err)
	}
}
