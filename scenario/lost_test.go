package scenario

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/orderflow/orderflow/message"
)

// lostKeys returns the events the first phase loses: those never published
// (Expected.Lost) and those the late phase publishes (stale late keys).
func lostKeys(t *testing.T, exp Expected) (never, late map[Key]bool) {
	t.Helper()
	never, late = map[Key]bool{}, map[Key]bool{}
	for _, k := range exp.Lost {
		never[k.Key()] = true
	}
	for _, k := range exp.Keys {
		if k.Phase == 2 && k.Outcome == OutcomeStale {
			late[k.Key()] = true
		}
	}
	if len(never) == 0 || len(late) == 0 {
		t.Fatalf("the scenario loses %d events for good and %d until the late phase; want some of both", len(never), len(late))
	}
	return never, late
}

// TestLostEventsFollowTheirPreviousVersion: every event the first phase
// loses is listed once, after the first copy of its order's previous
// version, and nowhere else.
func TestLostEventsFollowTheirPreviousVersion(t *testing.T) {
	s, err := Generate(testOptions(7))
	if err != nil {
		t.Fatal(err)
	}
	never, late := lostKeys(t, s.Expected)
	published := map[Key]bool{}
	for _, k := range s.Expected.Keys {
		if k.Phase <= 1 {
			published[k.Key()] = true
		}
	}
	seen := map[Key]int{}
	for i, m := range s.Messages {
		for _, e := range m.LostAfter {
			if m.Kind != KindEvent || e.OrderID != m.Event.OrderID || e.Version != m.Event.Version+1 {
				t.Fatalf("message %d (%s %s) lists lost event %s", i, m.Kind, m.Event.Key(), e.Key())
			}
			if (!never[e.Key()] && !late[e.Key()]) || published[e.Key()] {
				t.Fatalf("message %d lists %s, which the first phase publishes or the generator did not lose", i, e.Key())
			}
			seen[e.Key()]++
		}
	}
	for _, m := range s.Late {
		if len(m.LostAfter) > 0 {
			t.Fatalf("late message %s lists lost events", m.Event.Key())
		}
	}
	if len(seen) != len(never)+len(late) {
		t.Fatalf("%d lost events listed, the generator lost %d + %d", len(seen), len(never), len(late))
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("lost event %s listed %d times", k, n)
		}
	}
}

// fakeSender numbers events as package producer does, 1, 2, 3 … in call
// order, and records what it sent by number.
type fakeSender struct {
	next  int64
	bySeq map[int64][]Key
	calls []string
}

func (f *fakeSender) number(body []byte, seq int64) ([]byte, error) {
	e, err := message.Decode(body)
	if err != nil {
		return nil, err
	}
	e.ProducerID, e.Seq = "fake", seq
	f.bySeq[seq] = append(f.bySeq[seq], Key{OrderID: e.OrderID, Version: e.Version})
	return message.Encode(e)
}

func (f *fakeSender) SendEvent(_ context.Context, body []byte) ([]byte, error) {
	f.next++
	f.calls = append(f.calls, fmt.Sprint("send ", f.next))
	return f.number(body, f.next)
}

func (f *fakeSender) SkipSeq(context.Context) (string, int64, error) {
	f.next++
	f.calls = append(f.calls, fmt.Sprint("skip ", f.next))
	return "fake", f.next, nil
}

func (f *fakeSender) SendSkipped(_ context.Context, body []byte, seq int64) ([]byte, error) {
	if seq < 1 || seq > f.next {
		return nil, errors.New("not a skipped number")
	}
	f.calls = append(f.calls, fmt.Sprint("late ", seq))
	return f.number(body, seq)
}

// TestPublishSpendsTheNumbersOfLostEvents publishes both phases through a
// numbering sender: each lost event spends the number after its previous
// version's and nothing carries it; the late phase sends the lost events it
// publishes with their numbers, so only the never-published ones stay
// holes.
func TestPublishSpendsTheNumbersOfLostEvents(t *testing.T) {
	s, err := Generate(testOptions(7))
	if err != nil {
		t.Fatal(err)
	}
	never, late := lostKeys(t, s.Expected)
	f := &fakeSender{bySeq: map[int64][]Key{}}
	var holes []Hole
	err = Publish(context.Background(), &fakePublisher{}, s.Messages, PublishOptions{Topic: "T", Events: f,
		OnHole: func(h Hole) { holes = append(holes, h) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(holes) != len(never)+len(late) {
		t.Fatalf("%d holes, the generator lost %d + %d events", len(holes), len(never), len(late))
	}
	holeAt := map[int64]Key{}
	for _, h := range holes {
		if h.ProducerID != "fake" || (!never[h.Key()] && !late[h.Key()]) {
			t.Fatalf("hole %+v is not a lost event of the sender's producer", h)
		}
		if len(f.bySeq[h.Seq]) > 0 {
			t.Fatalf("seq %d of lost event %s was sent with %v", h.Seq, h.Key(), f.bySeq[h.Seq])
		}
		// The number right before it is its previous version's.
		if prev := f.bySeq[h.Seq-1]; len(prev) != 1 || prev[0] != (Key{OrderID: h.OrderID, Version: h.Version - 1}) {
			t.Fatalf("lost event %s has seq %d; seq %d went to %v, not its previous version", h.Key(), h.Seq, h.Seq-1, prev)
		}
		holeAt[h.Seq] = h.Key()
	}
	for seq := int64(1); seq <= f.next; seq++ {
		if (len(f.bySeq[seq]) == 0) != (holeAt[seq] != Key{}) {
			t.Fatalf("seq %d: sent %v, hole %v", seq, f.bySeq[seq], holeAt[seq])
		}
	}

	exp := s.Expected.FirstPhase()
	exp.Holes = holes
	if got := exp.OpenHoles(); !reflect.DeepEqual(got, holes) {
		t.Fatalf("after the first phase, open holes %v, want every hole %v", got, holes)
	}
	first := f.next
	if err := Publish(context.Background(), &fakePublisher{}, s.Late, PublishOptions{Topic: "T", Events: f, Holes: holes,
		OnHole: func(h Hole) { t.Errorf("the late phase made hole %+v", h) }}); err != nil {
		t.Fatal(err)
	}
	for seq, k := range holeAt {
		switch sent := f.bySeq[seq]; {
		case late[k] && !reflect.DeepEqual(sent, []Key{k}):
			t.Errorf("late lost event %s: seq %d sent with %v", k, seq, sent)
		case never[k] && len(sent) > 0:
			t.Errorf("never-published %s: seq %d sent with %v", k, seq, sent)
		}
	}
	for seq := first + 1; seq <= f.next; seq++ {
		if len(f.bySeq[seq]) != 1 || late[f.bySeq[seq][0]] {
			t.Fatalf("late phase seq %d: %v", seq, f.bySeq[seq])
		}
	}
	exp.Phases = 2
	open := map[Key]bool{}
	for _, h := range exp.OpenHoles() {
		open[h.Key()] = true
	}
	if !reflect.DeepEqual(open, never) {
		t.Fatalf("after the late phase, open holes %v, want the never-published events %v", open, never)
	}
}

// TestPublishRawLeavesGeneratedHoles: without an EventSender, the holes are
// the generated numbers of the lost events, which no message carries.
func TestPublishRawLeavesGeneratedHoles(t *testing.T) {
	s, err := Generate(testOptions(7))
	if err != nil {
		t.Fatal(err)
	}
	never, late := lostKeys(t, s.Expected)
	p := &fakePublisher{}
	var holes []Hole
	if err := Publish(context.Background(), p, s.Messages, PublishOptions{Topic: "T", OnHole: func(h Hole) { holes = append(holes, h) }}); err != nil {
		t.Fatal(err)
	}
	if len(holes) != len(never)+len(late) {
		t.Fatalf("%d holes, the generator lost %d + %d events", len(holes), len(never), len(late))
	}
	carried := map[int64]bool{}
	for _, m := range p.sent {
		if e, err := message.Decode(m.Body); err == nil {
			carried[e.Seq] = true
		}
	}
	for _, h := range holes {
		if h.ProducerID != s.Expected.Options.ProducerID || h.Seq < 1 || carried[h.Seq] {
			t.Fatalf("hole %+v: producer %s, or its number is carried by a message", h, s.Expected.Options.ProducerID)
		}
	}
}
