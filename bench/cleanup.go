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
	"golang.org/x/sync/errgroup"

	"github.com/orderflow/orderflow/api"
	"github.com/orderflow/orderflow/internal/obs"
)

// cleanupStats counts what closeWorkflows did over a run.
type cleanupStats struct {
	mu                    sync.Mutex
	Workflows, Terminated int
	Took                  time.Duration
}

func (c *cleanupStats) add(workflows, terminated int, took time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.Workflows, c.Terminated, c.Took = c.Workflows+workflows, c.Terminated+terminated, c.Took+took
}

// closeWorkflows terminates the order workflows of a measured cell that
// still run: every order with a row in the cell's order_events (the only
// orders that reached Temporal), or the floor's. Left running, their timers
// (the grace period after a terminal status, the idle timeout) would fire
// during later cells, with no worker left to run the tasks they schedule.
// It returns how many workflows it asked about and how many it terminated;
// a workflow that already completed is not an error.
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
	var terminated atomic.Int64
	var g errgroup.Group
	g.SetLimit(16)
	for _, id := range ids {
		g.Go(func() error {
			err := tc.TerminateWorkflow(ctx, api.WorkflowID(id), "", "benchmark cell measured")
			var nf *serviceerror.NotFound
			switch {
			case err == nil:
				terminated.Add(1)
			case !errors.As(err, &nf): // NotFound: completed already, or never started
				return fmt.Errorf("terminate %s: %w", api.WorkflowID(id), err)
			}
			return nil
		})
	}
	err = g.Wait()
	return len(ids), int(terminated.Load()), err
}
