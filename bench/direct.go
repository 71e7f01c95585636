package main

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/obs"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/message"
	"github.com/orderflow/orderflow/scenario"
	"github.com/orderflow/orderflow/wire"
	"github.com/orderflow/orderflow/workflows"
)

// The engine's direct floor: a Temporal client of the benchmark's own
// signals a cell's scenario straight to the floor's no-op workflows
// (floorWorkflow), no broker and no bridge between them. Each message goes
// as the bridge would send it alone: message.Parse judges it, a valid
// event becomes a workflows.Deliver (SignalWithStart of the order's
// workflow ID, the order-event signal, the bridge's start options and
// workflow defaults) and a bad message no signal (the bridge parks it).
// A copy of the content its business key was first signalled with gets no
// signal either, as the bridge's duplicate filter would ack it (Redis and
// the ledger hold a key's first content, and the in-flight table a copy
// of one under way): so the floor does the work the bridge would ask of
// it, no more. A conflicting copy (same key, other content) is signalled,
// as the filter passes it on to the workflow. At most -direct-in-flight
// signals are in flight, an order's in publish order.

// directSender signals a cell's messages to the workflows of its task
// queue and logs when each was sent.
type directSender struct {
	sendLog
	tc        client.Client
	taskQueue string
	// topic is the envelopes' topic; no broker holds it.
	topic    string
	inFlight int
	// signals counts the SignalWithStart requests sent.
	signals atomic.Int64
	// firstContent is the content hash each business key was first
	// signalled with, and filtered how many messages were left out as
	// copies of it.
	firstContent map[fsm.Key]string
	filtered     int
}

// newDirectSender is the sender of msgs to the workflows of taskQueue,
// with at most inFlight signals in flight.
func newDirectSender(tc client.Client, taskQueue, topic string, msgs []scenario.Message, inFlight int) *directSender {
	return &directSender{sendLog: newSendLog(msgs), tc: tc, taskQueue: taskQueue, topic: topic, inFlight: max(inFlight, 1),
		firstContent: map[fsm.Key]string{}}
}

// duplicate reports whether e is a copy of the content its business key
// was first signalled with (the bridge's filter would ack it without a
// signal), and notes e's content when its key is new.
func (s *directSender) duplicate(e fsm.Event) bool {
	k, hash := e.Key(), e.ContentHash()
	first, ok := s.firstContent[k]
	if !ok {
		s.firstContent[k] = hash
		return false
	}
	if first == hash {
		s.filtered++
		return true
	}
	return false
}

// deliver signals e, which src carried (nil: none), to its order's
// workflow as the bridge does.
func (s *directSender) deliver(ctx context.Context, e fsm.Event, src *wire.Envelope) error {
	s.signals.Add(1)
	return workflows.Deliver(ctx, s.tc, s.taskQueue, workflows.DefaultParams(), e, src)
}

// envelope is message i as the bridge would receive it: its index in the
// stream stands for the broker's message ID, and sentAt for when the
// broker stored it.
func (s *directSender) envelope(i int, sentAt time.Time) wire.Envelope {
	m := s.msgs[i].Msg
	return wire.NewEnvelope(s.topic, strconv.Itoa(i+1), m.Keys, m.Tag, m.Body, sentAt.UTC(), false)
}

// run signals the messages in order at rate messages/s (0: as fast as the
// signals in flight allow) and waits until every signal returned. A
// message is sent when a signal slot is free (at its time or later): a
// bad one or a duplicate (duplicate) then gets no signal; an order's
// signal waits for the order's previous one. The first signal that fails
// stops the sending, and its error is returned.
func (s *directSender) run(ctx context.Context, rate float64) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var interval time.Duration
	if rate > 0 {
		interval = time.Duration(float64(time.Second) / rate)
	}
	slots := make(chan struct{}, s.inFlight)
	last := map[string]chan struct{}{} // each order's latest signal, closed when it returned
	var wg sync.WaitGroup
	begin := time.Now()
	for i := range s.msgs {
		if takeSlot(ctx, begin.Add(time.Duration(i)*interval), slots) != nil {
			break
		}
		s.sent[i] = time.Now()
		env := s.envelope(i, s.sent[i])
		r := message.Parse(env)
		if r.Rejection != nil || s.duplicate(r.Event) {
			<-slots
			continue
		}
		prev, done := last[r.Event.OrderID], make(chan struct{})
		last[r.Event.OrderID] = done
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			defer close(done)
			if prev != nil {
				select {
				case <-prev:
				case <-ctx.Done():
					return
				}
			}
			if err := s.deliver(ctx, r.Event, &env); err != nil {
				cancel(fmt.Errorf("message %d of %d: %w", i+1, len(s.msgs), err))
			}
		}()
	}
	wg.Wait()
	s.took = time.Since(begin)
	return context.Cause(ctx)
}

// takeSlot waits until t, then until slots has room and takes a slot; it
// returns ctx's error when ctx ends first.
func takeSlot(ctx context.Context, t time.Time, slots chan<- struct{}) error {
	if err := sleepUntil(ctx, t); err != nil {
		return err
	}
	select {
	case slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// sleepUntil waits until t, or returns ctx's error when it ends first.
func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// directCell is cc sent straight to the engine's floor with at most
// inFlight signals in flight: it has no bridge settings.
func directCell(cc cellConfig, inFlight int) cellConfig {
	cc.Floor, cc.Direct, cc.InFlight = true, true, inFlight
	cc.Concurrency, cc.BatchSize = 0, 0
	return cc
}

// runDirectCell runs one cell of the engine's direct floor: the floor's
// worker on a fresh task queue, and a client of the cell's own signalling
// its scenario, a backlog as fast as the signals in flight allow or, with
// Offered > 0, at a steady rate after a warm-up event, until the floor's
// workflows received every event.
func (b *bench) runDirectCell(ctx context.Context, cc cellConfig) (cellResult, error) {
	res := cellResult{Config: cc, Prefix: uniq.Name("b")}
	w, err := procWindow(b.cpu)
	if err != nil {
		return res, err
	}
	defer w.Drop()
	b.floor = newFloorTracker(res.Prefix)
	sc, err := cellScenario(cc, res.Prefix, uniq.Name("bench-direct"))
	if err != nil {
		return res, err
	}
	c := sc.Expected.Counts
	res.Messages, res.Events, res.Duplicates = c.Messages, c.Events, c.Duplicates
	// The CPU window: a backlog's from its first key received, an open
	// loop's from its first signal; to the last key received.
	if cc.Offered > 0 {
		b.floor.watch(res.Events, nil, w.End)
	} else {
		b.floor.watch(res.Events, w.Start, w.End)
	}
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	tc, err := obs.NewTemporalClient(dctx, b.cfg, slog.Default(), nil)
	cancel()
	if err != nil {
		return res, fmt.Errorf("%s: the direct client: %w", cc.Name, err)
	}
	defer tc.Close()
	tq := uniq.Name("bench-tq")
	s := newDirectSender(tc, tq, sc.Expected.Topic, sc.Messages, cc.InFlight)
	var before costCounters
	if !cc.noCost {
		if before, err = readCounters(ctx, b.e.Metrics, b.cfg.TemporalNamespace, "", nil); err != nil {
			return res, err
		}
	}
	defer b.closeCell(ctx, cc, nil)
	stopWorker, err := startFloorWorker(b.tc, tq, b.floor)
	if err != nil {
		return res, err
	}
	defer stopWorker()
	if cc.Offered > 0 {
		signal := func(ctx context.Context, e fsm.Event) error { return s.deliver(ctx, e, nil) }
		if err := b.warmUp(ctx, signal, true, nil); err != nil {
			return res, fmt.Errorf("%s: %w", cc.Name, err)
		}
		w.Start()
	}
	started := time.Now()
	if err := s.run(ctx, cc.Offered*float64(res.Messages)/float64(res.Events)); err != nil {
		return res, fmt.Errorf("%s: %w", cc.Name, err)
	}
	res.Publish = s.took
	if err := waitFloor(ctx, b.floor, res.Events, settleWait); err != nil {
		return res, fmt.Errorf("%s: %w", cc.Name, err)
	}
	res.Signals, res.Filtered = int(s.signals.Load()), s.filtered
	if !cc.noCost {
		if err := b.measureCost(ctx, nil, before, costSample(sc.Messages, costSampleOrders), &res); err != nil {
			return res, fmt.Errorf("%s: engine work: %w", cc.Name, err)
		}
	}
	return res, b.measure(ctx, nil, &s.sendLog, started, w, &res)
}
