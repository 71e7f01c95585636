package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/workflows/api"
)

// tuning holds the worker settings shared by the ceiling's in-process worker
// and the orderflow worker processes, so both run with the same slots and
// pollers.
type tuning struct {
	MaxActivities    int
	MaxWorkflowTasks int
	ActivityPollers  int
	WorkflowPollers  int
}

// workerFlags are the worker command's flags for t.
func (t tuning) workerFlags() []string {
	return []string{
		"-max-concurrent-activities", strconv.Itoa(t.MaxActivities),
		"-max-concurrent-workflow-tasks", strconv.Itoa(t.MaxWorkflowTasks),
		"-activity-pollers", strconv.Itoa(t.ActivityPollers),
		"-workflow-pollers", strconv.Itoa(t.WorkflowPollers),
	}
}

// options are the SDK worker options for t.
func (t tuning) options() worker.Options {
	return worker.Options{
		MaxConcurrentActivityExecutionSize:     t.MaxActivities,
		MaxConcurrentWorkflowTaskExecutionSize: t.MaxWorkflowTasks,
		MaxConcurrentActivityTaskPollers:       t.ActivityPollers,
		MaxConcurrentWorkflowTaskPollers:       t.WorkflowPollers,
	}
}

// trivialWorkflowType is the ceiling's workflow type.
const trivialWorkflowType = "BenchTrivialWorkflow"

// trivialWorkflow receives one order event and completes: the least a
// signal-started workflow can do. It returns the workflow time of the task
// that completed it.
func trivialWorkflow(ctx workflow.Context) (time.Time, error) {
	var e fsm.Event
	workflow.GetSignalChannel(ctx, api.SignalEvent).Receive(ctx, &e)
	return workflow.Now(ctx), nil
}

// ceilingResult is the measured rate of trivial workflows.
type ceilingResult struct {
	Workflows int
	Elapsed   time.Duration
	Rate      float64 // workflows per second
}

// runCeiling signal-starts n trivial workflows, as fast as concurrency
// goroutines can, against an in-process worker with tuning t on a fresh task
// queue, then waits for every result. The rate is n over the time from the
// first start to the last completion (each workflow reports the time of its
// completing task), the same open-loop measure as the e2e run's.
func runCeiling(ctx context.Context, c client.Client, t tuning, n, concurrency int) (ceilingResult, error) {
	tq := uniq.Name("bench-ceiling")
	w := worker.New(c, tq, t.options())
	w.RegisterWorkflowWithOptions(trivialWorkflow, workflow.RegisterOptions{Name: trivialWorkflowType})
	if err := w.Start(); err != nil {
		return ceilingResult{}, fmt.Errorf("start ceiling worker: %w", err)
	}
	defer w.Stop()

	prefix := uniq.Name("ceil")
	start := func(ctx context.Context, i int) (client.WorkflowRun, error) {
		id := fmt.Sprintf("bench:%s-%d", prefix, i)
		e := fsm.Event{EventID: id + "-1", OrderID: fmt.Sprintf("%s-%d", prefix, i), UserID: 1, Status: fsm.Created,
			Version: 1, AmountCents: 1000, OccurredAt: time.Now().UTC()}
		run, err := c.SignalWithStartWorkflow(ctx, id, api.SignalEvent, e, client.StartWorkflowOptions{
			ID:                       id,
			TaskQueue:                tq,
			WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		}, trivialWorkflowType)
		if err != nil {
			return nil, fmt.Errorf("signal-start %s: %w", id, err)
		}
		return run, nil
	}
	// Warm up the worker's pollers and caches.
	for i := 0; i < 5; i++ {
		run, err := start(ctx, -1-i)
		if err == nil {
			err = run.Get(ctx, nil)
		}
		if err != nil {
			return ceilingResult{}, err
		}
	}

	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
		runs     = make([]client.WorkflowRun, n)
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fail := func(err error) { errOnce.Do(func() { firstErr = err; cancel() }) }
	begin := time.Now()
	for g := 0; g < concurrency; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				run, err := start(ctx, i)
				if err != nil {
					fail(err)
					return
				}
				runs[i] = run
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return ceilingResult{}, firstErr
	}
	var last time.Time
	for i, run := range runs {
		var done time.Time
		if err := run.Get(ctx, &done); err != nil {
			return ceilingResult{}, fmt.Errorf("result of trivial workflow %d: %w", i, err)
		}
		if done.After(last) {
			last = done
		}
	}
	elapsed := last.Sub(begin)
	if elapsed <= 0 {
		return ceilingResult{}, fmt.Errorf("last completion %s precedes the first start %s", last, begin)
	}
	return ceilingResult{Workflows: n, Elapsed: elapsed, Rate: float64(n) / elapsed.Seconds()}, nil
}
