// Package workflowtest helps integration tests drive OrderWorkflow on a real
// Temporal server and PostgreSQL: it generates a scenario, delivers its
// events with workflows.Deliver, waits until the database satisfies the
// invariants of docs/design.md and compares each workflow's state query with the
// tables.
package workflowtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/orderflow/orderflow/activities"
	"github.com/orderflow/orderflow/check"
	"github.com/orderflow/orderflow/message"
	"github.com/orderflow/orderflow/scenario"
	"github.com/orderflow/orderflow/workflows"

	"github.com/orderflow/orderflow/api"
	"github.com/orderflow/orderflow/store"
	"gorm.io/gorm"
)

// Scenario generates orders orders whose events are shuffled and duplicated,
// with cancellations (some naming another user), open orders, data updates,
// gaps and a few conflicting copies, but no malformed messages (those never
// reach Temporal); and a late phase (Late: illegal events, conflicting
// copies differing in every field, late arrivals) to deliver once the first
// phase has settled (WaitSettled on Expected.FirstPhase()).
func Scenario(t testing.TB, prefix string, orders int, seed int64) *scenario.Scenario {
	t.Helper()
	s, err := scenario.Generate(scenario.Options{
		Orders: orders, Seed: seed, Prefix: prefix,
		DupRate: 0.5, Reorder: 1, CancelRate: 0.3, OpenRate: 0.15, UpdateRate: 0.2, GapRate: 0.1,
		UserChangeRate: 0.5, Conflicts: orders / 30,
		Illegal: orders / 10, LateConflicts: orders / 30, LateRate: 0.1,
	})
	if err != nil {
		t.Fatalf("generate scenario: %v", err)
	}
	return s
}

// StartWorker runs an in-process worker for OrderWorkflow and the
// activities on db, polling taskQueue, until the test ends; opts may change
// its options.
func StartWorker(t testing.TB, c client.Client, taskQueue string, db *gorm.DB, opts ...func(*worker.Options)) worker.Worker {
	t.Helper()
	o := worker.Options{
		MaxConcurrentActivityExecutionSize:     32,
		MaxConcurrentWorkflowTaskExecutionSize: 32,
		DeadlockDetectionTimeout:               deadlockDetection,
	}
	for _, f := range opts {
		f(&o)
	}
	w := worker.New(c, taskQueue, o)
	workflows.Register(w)
	w.RegisterActivity(&activities.Activities{Store: store.New(db)})
	if err := w.Start(); err != nil {
		t.Fatalf("start worker on %s: %v", taskQueue, err)
	}
	t.Cleanup(w.Stop)
	return w
}

// DeliverAll delivers the events of msgs (every kind but bad) with
// workflows.Deliver, parallel at a time, in roughly the given order. after,
// when not nil, is called once with the number delivered so far after each
// delivery (from several goroutines).
func DeliverAll(ctx context.Context, c client.Client, taskQueue string, p workflows.Params,
	msgs []scenario.Message, parallel int, after func(delivered int64)) error {
	if parallel < 1 {
		parallel = 1
	}
	work := make(chan scenario.Message)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		errs  []error
		count atomic.Int64
	)
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for m := range work {
				if err := deliverRetrying(ctx, c, taskQueue, p, m); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					continue
				}
				n := count.Add(1)
				if after != nil {
					after(n)
				}
			}
		}()
	}
	for _, m := range msgs {
		if m.Kind == scenario.KindBad {
			continue
		}
		select {
		case work <- m:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// deliverRetrying decodes one event's body as the bridge does and delivers
// it, retrying a few times on transient errors as the bridge does (it would
// not ack the message).
func deliverRetrying(ctx context.Context, c client.Client, tq string, p workflows.Params, m scenario.Message) error {
	e, err := message.Decode(m.Msg.Body)
	if err != nil {
		return fmt.Errorf("decode %s message %s: %w", m.Kind, m.Event.Key(), err)
	}
	for attempt := range 5 {
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = workflows.Deliver(dctx, c, tq, p, e, nil)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt+1) * 200 * time.Millisecond):
		}
	}
	return err
}

// WaitSettled waits up to wait for the database to satisfy every invariant
// for the scenario, and fails the test with the report if it does not.
func WaitSettled(t testing.TB, db *gorm.DB, exp *scenario.Expected, wait time.Duration) *check.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait+30*time.Second)
	defer cancel()
	rep, err := check.WaitSettled(ctx, db, exp, check.WaitOptions{Wait: wait, Interval: 500 * time.Millisecond, Settle: time.Second})
	if err != nil {
		var b strings.Builder
		if rep != nil {
			rep.Write(&b)
		}
		t.Fatalf("invariants do not hold: %v\n%s", err, b.String())
	}
	return rep
}

// QueryState returns the state query of the order's latest run.
func QueryState(ctx context.Context, c client.Client, orderID string) (workflows.State, error) {
	v, err := c.QueryWorkflow(ctx, api.WorkflowID(orderID), "", api.QueryState)
	if err != nil {
		return workflows.State{}, fmt.Errorf("query %s: %w", api.WorkflowID(orderID), err)
	}
	var s workflows.State
	if err := v.Get(&s); err != nil {
		return workflows.State{}, fmt.Errorf("decode state of %s: %w", orderID, err)
	}
	return s, nil
}

// CheckQueries compares every order's state query with its rows: status,
// version, net points and the number of recorded business keys.
func CheckQueries(t testing.TB, c client.Client, db *gorm.DB, exp *scenario.Expected) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bad := 0
	for _, o := range exp.Orders {
		s, err := QueryState(ctx, c, o.OrderID)
		if err != nil {
			t.Errorf("%v", err)
			bad++
			continue
		}
		var (
			status        string
			version, keys int64
			points        sql.NullInt64
		)
		err = db.WithContext(ctx).Raw(`SELECT o.status, o.version,
				(SELECT count(*) FROM order_events e WHERE e.order_id = o.order_id),
				(SELECT sum(points) FROM points_ledger p WHERE p.order_id = o.order_id)
			FROM orders o WHERE o.order_id = ?`, o.OrderID).Row().Scan(&status, &version, &keys, &points)
		if err != nil {
			t.Errorf("read order %s: %v", o.OrderID, err)
			bad++
			continue
		}
		if string(s.Order.Status) != status || s.Order.Version != version || s.Points != points.Int64 ||
			int64(len(s.Recorded)) != keys || !s.Exists {
			t.Errorf("order %s: state query says %s v%d points %d keys %d; tables say %s v%d points %d keys %d",
				o.OrderID, s.Order.Status, s.Order.Version, s.Points, len(s.Recorded), status, version, points.Int64, keys)
			bad++
		}
		if bad > 10 {
			t.Fatal("too many disagreements")
		}
	}
}

// TerminateAll terminates the orders' workflows, so that none is left
// waiting on a task queue nobody polls any more.
func TerminateAll(c client.Client, exp *scenario.Expected, reason string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, o := range exp.Orders {
		_ = c.TerminateWorkflow(ctx, api.WorkflowID(o.OrderID), "", reason)
	}
}
