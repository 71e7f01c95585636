package producer

import (
	"context"
	"errors"
	"testing"

	"github.com/orderflow/orderflow/internal/uniq"
)

// TestSkipMakesAHoleThatSendSkippedCloses: a skipped number is spent (the
// next send gets the one after it) and reaches the broker only when
// SendSkipped sends it, after the higher number; numbers not handed out
// are refused.
func TestSkipMakesAHoleThatSendSkippedCloses(t *testing.T) {
	b := newBroker(t, 4)
	r := newReader(t, b)
	ctx := context.Background()
	pid := uniq.Name("skip")
	p, err := New(b.db, b.config(pid))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	id := uniq.Name("o-skip")

	s1, err := p.Send(ctx, event(id, 1))
	if err != nil {
		t.Fatal(err)
	}
	lost, err := p.Skip(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s3, err := p.Send(ctx, event(id, 3))
	if err != nil {
		t.Fatal(err)
	}
	if s1.Event.Seq != 1 || lost != 2 || s3.Event.Seq != 3 {
		t.Fatalf("numbers: send %d, skip %d, send %d; want 1, 2, 3", s1.Event.Seq, lost, s3.Event.Seq)
	}
	if n, err := NextSeq(ctx, b.db, pid); err != nil || n != 4 {
		t.Fatalf("NextSeq = %d, %v; want 4", n, err)
	}

	if got := b.consumedThrough(t, r, id); len(got) != 2 || got[0].event.Seq != 1 || got[1].event.Seq != 3 {
		t.Fatalf("before SendSkipped, consumed %s; want seq 1 and 3", describe(got))
	}

	for _, bad := range []int64{0, 4, 9} {
		if _, err := p.SendSkipped(ctx, event(id, 2), bad); !errors.Is(err, errNotSkipped) {
			t.Fatalf("SendSkipped as seq %d: %v, want a refusal", bad, err)
		}
	}
	v2 := event(id, 2)
	s2, err := p.SendSkipped(ctx, v2, lost)
	if err != nil {
		t.Fatal(err)
	}
	if s2.Event.ProducerID != pid || s2.Event.Seq != 2 || s2.Event.EventID != v2.EventID || s2.MessageID == "" {
		t.Fatalf("SendSkipped returned %+v", s2)
	}
	got := b.consumedThrough(t, r, id)
	if len(got) != 3 || got[1].event != s2.Event {
		t.Fatalf("consumed %s; want seq 1, 2 (%s), 3", describe(got), v2.EventID)
	}
	if n, err := NextSeq(ctx, b.db, pid); err != nil || n != 4 {
		t.Fatalf("after SendSkipped, NextSeq = %d, %v; want 4", n, err)
	}
}
