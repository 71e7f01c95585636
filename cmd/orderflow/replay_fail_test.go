package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orderflow/orderflow/api"
	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/wire"
)

// parkValid parks n valid events of new orders, as a bridge of an earlier
// release might have, and returns their orders, oldest dead letter first.
func (p *pipeline) parkValid(prefix string, n int) []string {
	p.t.Helper()
	var orders []string
	for i := range n {
		o := fmt.Sprintf("%s-%d", uniq.Name(prefix), i)
		if _, err := p.s.ParkDeadLetter(context.Background(), wire.DeadLetter{Envelope: envelope(event(o, 1, fsm.Created, 100)),
			Reason: "invalid_field: amount_cents: must be below 50 (a rule since dropped)"}); err != nil {
			p.t.Fatal(err)
		}
		orders = append(orders, o)
		p.ids = append(p.ids, o) // terminated when the test ends
	}
	return orders
}

// replayMarks returns the replay outcome of each order's dead letter ("" when
// it is not marked replayed).
func (p *pipeline) replayMarks(orders []string) map[string]string {
	p.t.Helper()
	marks := map[string]string{}
	for _, o := range orders {
		h, err := p.s.OrderHistory(context.Background(), o)
		if err != nil {
			p.t.Fatal(err)
		}
		if len(h.DeadLetters) != 1 {
			p.t.Fatalf("order %s has %d dead letters, want 1", o, len(h.DeadLetters))
		}
		dl, _, err := p.s.DeadLetter(context.Background(), h.DeadLetters[0].ID)
		if err != nil {
			p.t.Fatal(err)
		}
		if dl.ReplayedAt != nil {
			marks[o] = dl.ReplayOutcome
		} else {
			marks[o] = ""
		}
	}
	return marks
}

// TestDLQReplayWaitExpires: no worker polls the task queue, so no workflow
// records its event within -wait. The replay still succeeds: the events
// were delivered, the dead letters are marked replayed with the outcome
// "delivered" (§6.2), and a second replay delivers nothing again.
func TestDLQReplayWaitExpires(t *testing.T) {
	p := newPipeline(t)
	orders := p.parkValid("rp-wait", 2)
	args := append(append([]string{"dlq", "replay"}, p.env()...), "-task-queue", uniq.Name("no-worker"), "-wait", "1s", "-json")
	start := time.Now()
	code, out, errOut := runCmd(args...)
	if code != 0 {
		t.Fatalf("replay with -wait 1s and no worker: exit %d\n%s%s", code, out, errOut)
	}
	if took := time.Since(start); took < time.Second {
		t.Errorf("the replay returned after %v, before -wait expired", took)
	}
	var r replayOutput
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(r.Items) != 2 || r.Summary.Actions[actionDelivered] != 2 || r.Summary.Outcomes["delivered"] != 2 {
		t.Errorf("replay summary %+v, want 2 delivered with the outcome delivered\n%s", r.Summary, out)
	}
	for o, mark := range p.replayMarks(orders) {
		if mark != "delivered" {
			t.Errorf("dead letter of %s marked %q, want delivered", o, mark)
		}
		// Delivered: its workflow holds the signal, waiting for a worker.
		if _, err := p.c.DescribeWorkflowExecution(context.Background(), api.WorkflowID(o), ""); err != nil {
			t.Errorf("the workflow of %s: %v", o, err)
		}
	}
	code, out, errOut = runCmd(args...)
	if err := json.Unmarshal([]byte(out), &r); code != 0 || err != nil || r.Summary.Actions[actionAlready] != 2 {
		t.Errorf("second replay: exit %d, want 2 already replayed\n%s%s", code, out, errOut)
	}
}

// TestDLQReplayTemporalFailsAfterConnecting: the connection to Temporal is
// cut once the replay has delivered its first dead letter. The replay
// stops with exit 1 naming the server and the dead letter it could not
// deliver; what was delivered is marked, the rest is not; once Temporal is
// back a new replay delivers the rest and nothing twice.
func TestDLQReplayTemporalFailsAfterConnecting(t *testing.T) {
	p := newPipeline(t)
	orders := p.parkValid("rp-cut", 8)
	// Every request to Temporal takes 200 ms more: the cut comes between
	// two deliveries.
	proxy := startSlowProxy(t, testenv.TemporalAddress(), 200*time.Millisecond)
	args := append(append([]string{"dlq", "replay"}, p.env()...), "-temporal-address", proxy.Addr(), "-temporal-timeout", "3s", "-wait", "1s")
	// Cut as soon as a dead letter is marked replayed.
	cut := make(chan bool)
	go func() {
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			var marked int64
			if err := p.db.Raw(`SELECT count(*) FROM dead_letters WHERE replayed_at IS NOT NULL`).Scan(&marked).Error; err == nil && marked > 0 {
				proxy.Cut()
				cut <- true
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		cut <- false
	}()
	code, out, errOut := runCmd(args...)
	if !<-cut {
		t.Fatalf("no dead letter was marked replayed within a minute: exit %d\n%s%s", code, out, errOut)
	}
	if code != 1 || !strings.Contains(errOut, "the Temporal server at "+proxy.Addr()+": dead letter ") {
		t.Fatalf("replay cut from Temporal: exit %d, want 1 naming the server and the dead letter\n%s%s", code, out, errOut)
	}
	marks := p.replayMarks(orders)
	delivered := 0
	for _, o := range orders {
		if marks[o] != "" {
			delivered++
		}
	}
	if delivered == 0 || delivered == len(orders) {
		t.Fatalf("%d of %d dead letters marked after the cut, want some but not all: %v", delivered, len(orders), marks)
	}
	// Oldest first: the marked ones are a prefix.
	for i, o := range orders[1:] {
		if marks[o] != "" && marks[orders[i]] == "" {
			t.Errorf("dead letter of %s marked, but not the older one of %s: %v", o, orders[i], marks)
		}
	}

	proxy.Restore()
	code, out, errOut = runCmd(append(args, "-json")...)
	var r replayOutput
	if err := json.Unmarshal([]byte(out), &r); code != 0 || err != nil || r.Summary.Actions[actionAlready] != delivered ||
		r.Summary.Actions[actionDelivered] != len(orders)-delivered {
		t.Fatalf("replay after Temporal came back: exit %d, want %d already replayed and %d delivered\n%s%s",
			code, delivered, len(orders)-delivered, out, errOut)
	}
	testenv.WaitFor(t, 30*time.Second, func() error {
		for _, o := range orders {
			h, err := p.s.OrderHistory(context.Background(), o)
			if err != nil {
				return err
			}
			if len(h.Events) != 1 {
				return errorf("order %s: %d events recorded", o, len(h.Events))
			}
		}
		return nil
	})
}

// slowProxy is a TCP proxy that holds every chunk a client sends for a
// delay before forwarding it, and that a test cuts: it closes every
// connection and, until Restore, every new one.
type slowProxy struct {
	ln     net.Listener
	target string
	delay  time.Duration
	mu     sync.Mutex
	cut    bool
	conns  map[net.Conn]bool
}

func startSlowProxy(t *testing.T, target string, delay time.Duration) *slowProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &slowProxy{ln: ln, target: target, delay: delay, conns: map[net.Conn]bool{}}
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.Cut()
	})
	return p
}

func (p *slowProxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every connection and refuses new ones until Restore.
func (p *slowProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// Restore lets connections through again.
func (p *slowProxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

// track registers c, or closes it when the proxy is cut.
func (p *slowProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		c.Close()
		return false
	}
	p.conns[c] = true
	return true
}

func (p *slowProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.serve(c)
	}
}

func (p *slowProxy) serve(c net.Conn) {
	if !p.track(c) {
		return
	}
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	if !p.track(s) {
		c.Close()
		return
	}
	go func() {
		_, _ = io.Copy(c, s)
		c.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			time.Sleep(p.delay)
			if _, werr := s.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	s.Close()
}
