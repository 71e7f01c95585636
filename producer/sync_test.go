package producer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/message"
)

// TestSendConformsAndNumbers sends the events of three orders, restarts the
// producer half-way, and reads them back: contract keys, tag and sharding
// key, one queue per order in send order, and producer_id with seq 1 … n
// without holes, continued across the restart.
func TestSendConformsAndNumbers(t *testing.T) {
	b := newBroker(t, 4)
	r := newReader(t, b)
	ctx := context.Background()
	pid := uniq.Name("sync")

	var sent []Sent
	send := func(p *Producer, orders []string, versions []int64) {
		for _, v := range versions {
			for _, id := range orders {
				s, err := p.Send(ctx, event(id, v))
				if err != nil {
					t.Fatalf("Send: %v", err)
				}
				sent = append(sent, s)
			}
		}
	}
	orders := []string{uniq.Name("o-a"), uniq.Name("o-b"), uniq.Name("o-c")}
	p, err := New(b.db, b.config(pid))
	if err != nil {
		t.Fatal(err)
	}
	send(p, orders, []int64{1, 2})
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	p, err = New(b.db, b.config(pid)) // a restarted producer continues
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	send(p, orders, []int64{3, 4, 5})

	for i, s := range sent {
		if s.Event.ProducerID != pid || s.Event.Seq != int64(i+1) || s.MessageID == "" {
			t.Fatalf("send %d returned producer %q seq %d message ID %q", i, s.Event.ProducerID, s.Event.Seq, s.MessageID)
		}
		if e, err := message.Decode(s.Body); err != nil || e != s.Event {
			t.Fatalf("send %d: body %s decodes to %+v, %v; want %+v", i, s.Body, e, err, s.Event)
		}
	}
	if n, err := NextSeq(ctx, b.db, pid); err != nil || n != int64(len(sent)+1) {
		t.Fatalf("NextSeq = %d, %v; want %d", n, err, len(sent)+1)
	}

	got := r.waitFor(t, 60*time.Second, "every message", func(got []received) bool { return len(got) >= len(sent) })
	if len(got) != len(sent) {
		t.Fatalf("consumed %d messages, sent %d", len(got), len(sent))
	}
	queue := map[string]int{}
	last := map[string]int64{}
	for i, m := range got {
		e := m.event
		if e.ProducerID != pid || e.Seq != int64(i+1) {
			t.Fatalf("message %d: producer %q seq %d; want %q seq %d", i, e.ProducerID, e.Seq, pid, i+1)
		}
		if e != sent[i].Event {
			t.Fatalf("message seq %d is %+v, sent %+v", e.Seq, e, sent[i].Event)
		}
		if m.keys != e.OrderID || m.tag != string(e.Status) || m.sharding != e.OrderID {
			t.Fatalf("message seq %d: keys %q tag %q sharding key %q", e.Seq, m.keys, m.tag, m.sharding)
		}
		if q, ok := queue[e.OrderID]; ok && q != m.queue {
			t.Fatalf("order %s spans queues %d and %d", e.OrderID, q, m.queue)
		}
		queue[e.OrderID] = m.queue
		if m.offset <= last[e.OrderID] && last[e.OrderID] != 0 {
			t.Fatalf("order %s: version %d stored before an earlier one", e.OrderID, e.Version)
		}
		last[e.OrderID] = m.offset
	}
}

// TestSendFailureLeavesNoHole: a send the broker never stores returns an
// error after MaxAttempts and gives its number back; an invalid event is
// refused before it gets one. The next message takes the number.
func TestSendFailureLeavesNoHole(t *testing.T) {
	b := newBroker(t, 1)
	r := newReader(t, b)
	ctx := context.Background()
	pid := uniq.Name("nohole")

	// A producer whose name server nothing listens on.
	down := b.config(pid)
	down.NameServer = "127.0.0.1:1"
	down.MaxAttempts = 2
	down.SendTimeout = time.Second
	dead, err := New(b.db, down)
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	start := time.Now()
	if _, err := dead.Send(ctx, event("lost", 1)); err == nil || !strings.Contains(err.Error(), "gave up after 2 attempt(s)") {
		t.Fatalf("Send without a broker = %v; want an error after 2 attempts", err)
	}
	t.Logf("failed send returned after %s", time.Since(start).Round(time.Millisecond))

	p, err := New(b.db, b.config(pid))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	bad := event("bad", 1)
	bad.UserID = 0
	if _, err := p.Send(ctx, bad); !errors.Is(err, fsm.ErrInvalidEvent) {
		t.Fatalf("Send of an invalid event = %v; want fsm.ErrInvalidEvent", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := p.Send(cancelled, event("cancelled", 1)); err == nil {
		t.Fatal("Send with a cancelled context succeeded")
	}
	if n, _ := NextSeq(ctx, b.db, pid); n != 1 {
		t.Fatalf("failed sends used numbers: next %d, want 1", n)
	}
	for v := int64(1); v <= 3; v++ {
		s, err := p.Send(ctx, event("kept", v))
		if err != nil {
			t.Fatal(err)
		}
		if s.Event.Seq != v {
			t.Fatalf("send %d got seq %d", v, s.Event.Seq)
		}
	}
	got := r.waitFor(t, 60*time.Second, "3 messages", func(got []received) bool { return len(got) >= 3 })
	for i, m := range got {
		if m.event.Seq != int64(i+1) || m.event.OrderID != "kept" {
			t.Fatalf("consumed %s", describe(got))
		}
	}
}

// TestConcurrentSendsShareOneSequence: goroutines sending through two
// producers of one producer ID (two processes, say) get distinct numbers
// 1 … n.
func TestConcurrentSendsShareOneSequence(t *testing.T) {
	b := newBroker(t, 2)
	ctx := context.Background()
	pid := uniq.Name("shared")
	var ps []*Producer
	for i := 0; i < 2; i++ {
		p, err := New(b.db, b.config(pid))
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		ps = append(ps, p)
	}
	const n = 40
	seqs := make(chan int64, n)
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			s, err := ps[i%2].Send(ctx, event(fmt.Sprintf("c-%d", i), 1))
			errs <- err
			seqs <- s.Event.Seq
		}()
	}
	seen := map[int64]bool{}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		seen[<-seqs] = true
	}
	for s := int64(1); s <= n; s++ {
		if !seen[s] {
			t.Fatalf("no send got seq %d (got %v)", s, seen)
		}
	}
}
