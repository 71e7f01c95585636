package scenario

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/message"
)

func testOptions(seed int64) Options {
	return Options{
		Orders: 300, Seed: seed, Prefix: "t-scn",
		Start:   time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC),
		DupRate: 0.15, Reorder: 0.4, CancelRate: 0.25, OpenRate: 0.15,
		UpdateRate: 0.3, GapRate: 0.1, UserChangeRate: 0.5, Conflicts: 12, Bad: 18,
		Illegal: 15, LateConflicts: 10, LateRate: 0.2,
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
	am, bm := append(a.Messages, a.Late...), append(b.Messages, b.Late...)
	if len(a.Late) == 0 || len(am) != len(bm) {
		t.Fatalf("late phase: %d and %d messages in all", len(am), len(bm))
	}
	for i := range am {
		if !bytes.Equal(am[i].Msg.Body, bm[i].Msg.Body) || am[i].Kind != bm[i].Kind || !reflect.DeepEqual(am[i].LostAfter, bm[i].LostAfter) {
			t.Fatalf("same seed, message %d differs:\n%s\n%s", i, am[i].Msg.Body, bm[i].Msg.Body)
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
	if c.Duplicates == 0 || c.Reordered == 0 || c.Lost == 0 || c.Conflicts != 12+10 || c.Bad != 18 ||
		c.Illegal != 15 || c.UserChanges == 0 || c.Late != len(s.Late) || exp.Phases != 2 {
		t.Fatalf("a distortion is missing: %+v, phases %d", c, exp.Phases)
	}
	if c.Messages != len(s.Messages)+len(s.Late) || c.Messages != c.Events+c.Duplicates+c.Conflicts+c.Bad {
		t.Fatalf("messages %d (%d + %d late) != events %d + duplicates %d + conflicts %d + bad %d",
			c.Messages, len(s.Messages), len(s.Late), c.Events, c.Duplicates, c.Conflicts, c.Bad)
	}
	if len(exp.Keys) != c.Events || len(exp.Lost) != c.Lost {
		t.Fatalf("keys %d (events %d), lost %d (%d)", len(exp.Keys), c.Events, len(exp.Lost), c.Lost)
	}

	kinds := map[Kind]int{}
	badKindsSeen := map[string]bool{}
	statuses := map[Status]int{}
	for _, o := range exp.Orders {
		statuses[o.Status]++
	}
	for _, st := range Statuses {
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
	outcomes := map[string]int{}
	for _, k := range exp.Keys {
		outcomes[fmt.Sprint(k.Phase, k.Outcome)]++
	}
	if outcomes["1applied"] != 300 || outcomes["2illegal"] != 15 || outcomes["2stale"] == 0 || outcomes["1"] == 0 {
		t.Fatalf("expected outcomes by phase: %v", outcomes)
	}

	// Every message: valid events decode and validate (with the pipeline's
	// decoder) and carry what the generator says; bad ones do not.
	seenBody := map[string]bool{}
	lastVersion := map[string]int64{}
	outOfOrder := 0
	for i, m := range append(append([]Message(nil), s.Messages...), s.Late...) {
		kinds[m.Kind]++
		switch m.Kind {
		case KindBad:
			if _, err := message.Decode(m.Msg.Body); err == nil {
				t.Errorf("bad message %d is a valid event: %.200s", i, m.Msg.Body)
			}
			if len(m.Msg.Body) > MaxBodyBytes && !strings.Contains(m.Msg.Keys, "-bad-") {
				t.Errorf("oversize message %d has key %q", i, m.Msg.Keys)
			}
		default:
			e, err := message.Decode(m.Msg.Body)
			if err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
			if e.OrderID != m.Event.OrderID || e.Version != m.Event.Version || e.UserID != m.Event.UserID ||
				string(e.Status) != string(m.Event.Status) || e.AmountCents != m.Event.AmountCents || !e.OccurredAt.Equal(m.Event.OccurredAt) {
				t.Fatalf("message %d decodes to %+v, generated %+v", i, e, m.Event)
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
			if m.Kind == KindEvent && i < len(s.Messages) {
				if e.Version < lastVersion[e.OrderID] {
					outOfOrder++
				}
				lastVersion[e.OrderID] = e.Version
			}
		}
		seenBody[string(m.Msg.Body)] = true
	}
	if kinds[KindDuplicate] != c.Duplicates || kinds[KindConflict] != c.Conflicts || kinds[KindBad] != c.Bad || kinds[KindIllegal] != c.Illegal {
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

	// Late conflicts differ from their original in every content field;
	// first-phase ones only in occurred_at.
	original := map[Key]Content{}
	for _, k := range exp.Keys {
		original[k.Key()] = k.Content
	}
	for _, cf := range exp.Conflicts {
		o, c := original[cf.Key()], cf.Copy
		switch cf.Phase {
		case 1:
			if o.UserID != c.UserID || o.Status != c.Status || o.AmountCents != c.AmountCents || o.OccurredAt.Equal(c.OccurredAt) {
				t.Errorf("first-phase conflict %s: %+v vs %+v", cf.Key(), o, c)
			}
		case 2:
			if o.UserID == c.UserID || o.Status == c.Status || o.AmountCents == c.AmountCents || o.OccurredAt.Equal(c.OccurredAt) {
				t.Errorf("late conflict %s does not differ in every field: %+v vs %+v", cf.Key(), o, c)
			}
		default:
			t.Errorf("conflict %s of phase %d", cf.Key(), cf.Phase)
		}
	}
	// Illegal events state a status their order's final one cannot reach.
	final := map[string]ExpectedOrder{}
	for _, o := range exp.Orders {
		final[o.OrderID] = o
	}
	for _, k := range exp.Keys {
		if k.Outcome == OutcomeIllegal {
			o := final[k.OrderID]
			if k.Version <= o.Version || Reachable(o.Status, k.Status) {
				t.Errorf("illegal event %s (%s) for an order at %s v%d", k.Key(), k.Status, o.Status, o.Version)
			}
		}
	}
}

func TestLifecycleTable(t *testing.T) {
	want := map[Status][]Status{
		Created:   nil,
		Paid:      {Created},
		Shipped:   {Created, Paid, Cancelled},
		Delivered: {Created, Paid, Shipped, Cancelled},
		Completed: {Created, Paid, Shipped, Delivered, Cancelled},
		Cancelled: {Created, Paid, Shipped, Delivered, Completed},
	}
	for from, w := range want {
		if got := Unreachable(from); !reflect.DeepEqual(got, w) {
			t.Errorf("Unreachable(%s) = %v, want %v", from, got, w)
		}
		if !Reachable(from, from) {
			t.Errorf("%s does not reach itself (a data update)", from)
		}
	}
}

func TestFirstPhase(t *testing.T) {
	s, err := Generate(testOptions(4))
	if err != nil {
		t.Fatal(err)
	}
	first := s.Expected.FirstPhase()
	if first.Phases != 1 || s.Expected.Phases != 2 || first.Published(2) || !first.Published(1) || !s.Expected.Published(2) {
		t.Fatalf("phases: %d / %d", first.Phases, s.Expected.Phases)
	}
	o := testOptions(4)
	o.Illegal, o.LateConflicts, o.LateRate = 0, 0, 0
	if s, err = Generate(o); err != nil || len(s.Late) != 0 || s.Expected.Phases != 1 {
		t.Fatalf("no late options, yet a late phase of %d messages (phases %d): %v", len(s.Late), s.Expected.Phases, err)
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
		"illegal must be >= 0":     func(o *Options) { o.Illegal = -1 },
		"late-conflicts must be":   func(o *Options) { o.LateConflicts = -1 },
		"late-rate must be within": func(o *Options) { o.LateRate = 2 },
		"user-change-rate must be": func(o *Options) { o.UserChangeRate = -1 },
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
