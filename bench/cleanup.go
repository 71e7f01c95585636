package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/orderflow/orderflow/api"
	"github.com/orderflow/orderflow/internal/obs"
)

// closeConcurrency is how many terminations closeWorkflows has in flight.
const closeConcurrency = 16

// cleanupStats counts what closeWorkflows did over a run.
type cleanupStats struct {
	mu         sync.Mutex
	Workflows  int
	Terminated int
	Took       time.Duration
}

func (c *cleanupStats) add(workflows, terminated int, took time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.Workflows += workflows
	c.Terminated += terminated
	c.Took += took
}

// closeWorkflows terminates the order workflows of a measured cell that
// still run: every order with a row in the cell's order_events (the only
// orders that reached Temporal), the warm-up order included, or the floor's
// (every order its workflows received). Left running,
// their timers (the grace period after a terminal status, the idle timeout)
// would fire during later cells and take the engine's time from them, with
// no worker left to run the tasks they schedule. It returns how many
// workflows it asked about and how many it terminated; a workflow that
// already completed is not an error.
func (b *bench) closeWorkflows(ctx context.Context, cc cellConfig, db *database) (int, int, error) {
	var ids []string
	if cc.Floor {
		ids = b.floor.orders()
	} else if err := db.DB.WithContext(ctx).Raw(`SELECT DISTINCT order_id FROM order_events`).Scan(&ids).Error; err != nil {
		return 0, 0, fmt.Errorf("list the cell's orders: %w", err)
	}
	if len(ids) == 0 {
		return 0, 0, nil
	}
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	tc, err := obs.NewTemporalClient(dctx, b.cfg, slog.Default(), nil)
	cancel()
	if err != nil {
		return 0, 0, err
	}
	defer tc.Close()
	var (
		terminated atomic.Int64
		next       atomic.Int64
		firstErr   error
		errOnce    sync.Once
		wg         sync.WaitGroup
	)
	for range min(closeConcurrency, len(ids)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(ids) || ctx.Err() != nil {
					return
				}
				err := tc.TerminateWorkflow(ctx, api.WorkflowID(ids[i]), "", "benchmark cell measured")
				var nf *serviceerror.NotFound
				switch {
				case err == nil:
					terminated.Add(1)
				case errors.As(err, &nf):
					// Completed already (or never started).
				default:
					errOnce.Do(func() { firstErr = fmt.Errorf("terminate %s: %w", api.WorkflowID(ids[i]), err) })
				}
			}
		})
	}
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return len(ids), int(terminated.Load()), firstErr
}
