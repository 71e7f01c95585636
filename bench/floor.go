package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/orderflow/orderflow/api"
	"github.com/orderflow/orderflow/scenario"
	"github.com/orderflow/orderflow/workflows"
)

// The engine's floor: the same bridge signal-starts the same workflows on
// a task queue that the benchmark's floor worker serves with
// floorWorkflow, which only receives its signals.

// floorTracker notes when the floor's workflows first received each key of
// the cell's orders (prefix), its "effects", and every order it heard of;
// with watch, it also tells when the first and the last of them came.
type floorTracker struct {
	mu       sync.Mutex
	prefix   string
	seen     map[scenario.Key]time.Time
	orderIDs map[string]bool
	// want is how many keys make the last; first and last run when the
	// first key and the want-th arrive (watch).
	want        int
	first, last func()
}

func newFloorTracker(prefix string) *floorTracker {
	return &floorTracker{prefix: prefix + "-", seen: map[scenario.Key]time.Time{}, orderIDs: map[string]bool{}}
}

// watch has first run when the first of the cell's keys arrives and last
// when the want-th does (nil: nothing), in a goroutine of their own so
// that the workflow noting the key does not wait for them (both in one,
// first first, when one key is all it wants).
func (t *floorTracker) watch(want int, first, last func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.want, t.first, t.last = want, first, last
}

// note records k as received now, unless it was before.
func (t *floorTracker) note(k scenario.Key) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.orderIDs[k.OrderID] = true
	if _, ok := t.seen[k]; ok || !strings.HasPrefix(k.OrderID, t.prefix) {
		return
	}
	t.seen[k] = time.Now()
	var run []func()
	if len(t.seen) == 1 && t.first != nil {
		run = append(run, t.first)
	}
	if len(t.seen) == t.want && t.last != nil {
		run = append(run, t.last)
	}
	if len(run) > 0 {
		go func() {
			for _, f := range run {
				f()
			}
		}()
	}
}

// received is how many of the cell's distinct keys were received, and
// when the first and the last of them were.
func (t *floorTracker) received() (n int, first, last time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, at := range t.seen {
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	return len(t.seen), first, last
}

// applied is when each of the cell's keys was received.
func (t *floorTracker) applied() map[scenario.Key]time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.seen)
}

// orders are the orders of the keys received.
func (t *floorTracker) orders() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Collect(maps.Keys(t.orderIDs))
}

// floorWorkflow is the no-op order workflow: it receives the signals and
// continues as new as OrderWorkflow does (after Params.MaxEventsPerRun
// events or when Temporal suggests, no signal pending), telling t outside
// replay. It never completes: the cell terminates it.
func floorWorkflow(t *floorTracker) func(workflow.Context, workflows.Input) error {
	return func(ctx workflow.Context, in workflows.Input) error {
		handled := 0
		note := func(ds ...workflows.Delivery) {
			handled += len(ds)
			if !workflow.IsReplaying(ctx) {
				for _, d := range ds {
					t.note(scenario.Key{OrderID: d.OrderID, Version: d.Version})
				}
			}
		}
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(workflow.GetSignalChannel(ctx, api.SignalEvent), func(c workflow.ReceiveChannel, _ bool) {
			var d workflows.Delivery
			c.Receive(ctx, &d)
			note(d)
		})
		sel.AddReceive(workflow.GetSignalChannel(ctx, api.SignalEvents), func(c workflow.ReceiveChannel, _ bool) {
			var b workflows.Batch
			c.Receive(ctx, &b)
			note(b.Deliveries...)
		})
		for {
			sel.Select(ctx)
			for sel.HasPending() {
				sel.Select(ctx)
			}
			bound := in.Params.MaxEventsPerRun
			if (bound > 0 && handled >= bound) || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
				return workflow.NewContinueAsNewError(ctx, api.WorkflowType, workflows.Input{Params: in.Params})
			}
		}
	}
}

// startFloorWorker starts, in the benchmark's process, a worker of
// floorWorkflow telling t, on taskQueue, with the pollers and task slots
// of orderflow's worker defaults; it returns how to stop it.
func startFloorWorker(tc client.Client, taskQueue string, t *floorTracker) (func(), error) {
	w := worker.New(tc, taskQueue, worker.Options{MaxConcurrentWorkflowTaskExecutionSize: 100, MaxConcurrentWorkflowTaskPollers: 4})
	w.RegisterWorkflowWithOptions(floorWorkflow(t), workflow.RegisterOptions{Name: api.WorkflowType})
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("floor worker: %w", err)
	}
	return w.Stop, nil
}

// waitFloor waits until the floor's workflows received want distinct keys,
// for at most wait.
func waitFloor(ctx context.Context, t *floorTracker, want int, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		n, _, _ := t.received()
		if n >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the floor's workflows received %d of %d events in %s", n, want, wait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
