package main

import (
	"context"
	"errors"
	"maps"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/orderflow/orderflow/api"
	"github.com/orderflow/orderflow/scenario"
	"github.com/orderflow/orderflow/workflows"
)

// signalRecorder is a Temporal client that records its SignalWithStart
// calls, each taking a millisecond, and fails those of order failOrder.
type signalRecorder struct {
	client.Client
	failOrder string
	mu        sync.Mutex
	inFlight  int
	most      int
	calls     []signalCall
}

// signalCall is one SignalWithStart the recorder received.
type signalCall struct {
	workflowID, signal string
	delivery           workflows.Delivery
	options            client.StartWorkflowOptions
	workflow           any
	args               []any
}

var errRefused = errors.New("refused")

func (r *signalRecorder) SignalWithStartWorkflow(_ context.Context, workflowID, signalName string, signalArg any,
	options client.StartWorkflowOptions, workflow any, workflowArgs ...any) (client.WorkflowRun, error) {
	r.mu.Lock()
	r.inFlight++
	r.most = max(r.most, r.inFlight)
	d, _ := signalArg.(workflows.Delivery)
	r.calls = append(r.calls, signalCall{workflowID, signalName, d, options, workflow, workflowArgs})
	r.mu.Unlock()
	time.Sleep(time.Millisecond)
	r.mu.Lock()
	r.inFlight--
	r.mu.Unlock()
	if d.OrderID == r.failOrder {
		return nil, errRefused
	}
	return nil, nil
}

// directScenario is a benchmark scenario of 40 orders, with duplicates,
// conflicts and bad messages.
func directScenario(t *testing.T) *scenario.Scenario {
	t.Helper()
	sc, err := cellScenario(cellConfig{Name: "t", Orders: 40, Seed: 3, DupRate: 0.2}, "b-t", "bench-direct-t")
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// sameContent reports whether a and b have the same content.
func sameContent(a, b scenario.Content) bool {
	return a.UserID == b.UserID && a.Status == b.Status && a.AmountCents == b.AmountCents && a.OccurredAt.Equal(b.OccurredAt)
}

// TestDirectSenderSignalsAsTheBridge: what the bridge's duplicate filter
// would let through is signalled, once: each business key's first
// message, and every message whose content differs from that first one
// (a conflict), but no copy of the first content and no bad message; each
// as the bridge signals an event alone (workflow ID, signal, start
// options, workflow type and defaults, the message as its source); an
// order's signals go in publish order; the signals in flight stay within
// the bound; every message has a send time.
func TestDirectSenderSignalsAsTheBridge(t *testing.T) {
	sc := directScenario(t)
	rec := &signalRecorder{}
	s := newDirectSender(rec, "tq", "bench-direct-t", sc.Messages, 4)
	if err := s.run(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	// The messages that must be signalled, by their number in the stream.
	want := map[int]bool{}
	first := map[scenario.Key]scenario.Content{}
	bad, copies, conflicts := 0, 0, 0
	for i, m := range sc.Messages {
		if m.Kind == scenario.KindBad {
			bad++
			continue
		}
		k, c := m.Event.Key(), m.Event.Content()
		f, seen := first[k]
		switch {
		case !seen:
			first[k] = c
			want[i+1] = true
		case sameContent(f, c):
			copies++
		default:
			conflicts++
			want[i+1] = true
		}
	}
	// A duplicate of a conflicting copy is a conflict too: the filter
	// holds a key's first content.
	if bad == 0 || copies == 0 || conflicts == 0 || copies+conflicts < sc.Expected.Counts.Duplicates {
		t.Fatalf("the scenario has %d bad messages, %d copies of a first content, %d conflicts (%d duplicates); want some of each",
			bad, copies, conflicts, sc.Expected.Counts.Duplicates)
	}
	got := map[int]bool{}
	for _, c := range rec.calls {
		i, _ := strconv.Atoi(c.delivery.Source.MessageID)
		if got[i] {
			t.Errorf("message %d signalled twice", i)
		}
		got[i] = true
	}
	if !maps.Equal(got, want) || int(s.signals.Load()) != len(want) || s.filtered != copies {
		t.Fatalf("%d signals (counted %d), %d left out; want the %d messages the bridge's filter lets through, %d copies left out",
			len(got), s.signals.Load(), s.filtered, len(want), copies)
	}
	if rec.most > 4 || rec.most < 2 {
		t.Errorf("at most %d signals in flight, want 2 to 4", rec.most)
	}
	lastOf := map[string]int{}
	for _, c := range rec.calls {
		order := c.delivery.OrderID
		i, err := strconv.Atoi(c.delivery.Source.MessageID)
		if err != nil || i < 1 || i > len(sc.Messages) || string(c.delivery.Source.Body) != string(sc.Messages[i-1].Msg.Body) {
			t.Fatalf("signal %s carries message %q, not the scenario's", c.delivery.Key(), c.delivery.Source.MessageID)
		}
		// The bridge's options; an order's first version names its own
		// status as the one a new run starts with.
		want := workflows.StartOptions("tq", order)
		if c.delivery.Version == 1 {
			want.TypedSearchAttributes = temporal.NewSearchAttributes(api.OrderStatusKey.ValueSet(string(c.delivery.Status)))
		}
		if c.workflowID != api.WorkflowID(order) || c.signal != api.SignalEvent || c.workflow != api.WorkflowType ||
			!reflect.DeepEqual(c.options, want) || len(c.args) != 1 ||
			!reflect.DeepEqual(c.args[0], workflows.Input{Params: workflows.DefaultParams()}) {
			t.Errorf("signal of message %d: %+v, not the bridge's", i, c)
		}
		if i <= lastOf[order] {
			t.Errorf("order %s: message %d signalled after message %d", order, i, lastOf[order])
		}
		lastOf[order] = i
	}
	for i, at := range s.sent {
		if at.IsZero() || (i > 0 && at.Before(s.sent[i-1])) {
			t.Fatalf("message %d sent at %s (the one before at %s)", i+1, at, s.sent[max(i-1, 0)])
		}
	}
}

// TestDirectSenderPacesAndStops: at a rate the messages take their time;
// a failed signal stops the sending and is the error.
func TestDirectSenderPacesAndStops(t *testing.T) {
	sc := directScenario(t)
	msgs := sc.Messages[:20]
	s := newDirectSender(&signalRecorder{}, "tq", "t", msgs, 64)
	if err := s.run(context.Background(), 500); err != nil {
		t.Fatal(err)
	}
	if want := 19 * 2 * time.Millisecond; s.took < want || s.sent[19].Sub(s.sent[0]) < want-time.Millisecond {
		t.Errorf("20 messages at 500/s took %s (first to last send %s), want at least %s", s.took, s.sent[19].Sub(s.sent[0]), want)
	}
	fail := &signalRecorder{failOrder: sc.Messages[len(sc.Messages)/2].Event.OrderID}
	s = newDirectSender(fail, "tq", "t", sc.Messages, 8)
	if err := s.run(context.Background(), 0); !errors.Is(err, errRefused) || !errors.Is(err, workflows.ErrDeliver) {
		t.Errorf("a refused signal: %v", err)
	}
}

// TestDirectCell: a direct cell has the floor, its bound and no bridge
// settings.
func TestDirectCell(t *testing.T) {
	cc := directCell(cellConfig{Name: "dev-direct", Orders: 9, Concurrency: 32, BatchSize: 16}, 64)
	if !cc.Floor || !cc.Direct || cc.InFlight != 64 || cc.Concurrency != 0 || cc.BatchSize != 0 || cc.Orders != 9 {
		t.Errorf("direct cell %+v", cc)
	}
}
