package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.temporal.io/api/serviceerror"
	"golang.org/x/sync/errgroup"

	"github.com/orderflow/orderflow/api"
	"github.com/orderflow/orderflow/internal/obs"
)

// closeWorkflows terminates the order workflows of a measured cell that
// still run: every order with a row in the cell's order_events (the only
// orders that reached Temporal), or the floor's. Left running, their timers
// (the grace period after a terminal status, the idle timeout) would fire
// during later cells, with no worker left to run the tasks they schedule.
// A workflow that already completed is not an error.
func (b *bench) closeWorkflows(ctx context.Context, cc cellConfig, db *database) error {
	var ids []string
	if cc.Floor {
		ids = b.floor.orders()
	} else if err := db.DB.WithContext(ctx).Raw(`SELECT DISTINCT order_id FROM order_events`).Scan(&ids).Error; err != nil {
		return fmt.Errorf("list the cell's orders: %w", err)
	}
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	tc, err := obs.NewTemporalClient(dctx, b.cfg, slog.Default(), nil)
	cancel()
	if err != nil {
		return err
	}
	defer tc.Close()
	var g errgroup.Group
	g.SetLimit(16)
	for _, id := range ids {
		g.Go(func() error {
			err := tc.TerminateWorkflow(ctx, api.WorkflowID(id), "", "benchmark cell measured")
			var nf *serviceerror.NotFound // completed already, or never started
			if err != nil && !errors.As(err, &nf) {
				return fmt.Errorf("terminate %s: %w", api.WorkflowID(id), err)
			}
			return nil
		})
	}
	return g.Wait()
}
