package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"

	"github.com/orderflow/orderflow/api"
	"github.com/orderflow/orderflow/scenario"
)

// costSampleOrders is how many orders of a cell have their histories read.
const costSampleOrders = 30

// engineCost is the engine's work per distinct event of a cell.
type engineCost struct {
	// Actions is the engine's own count: the delta of the Temporal
	// server's action counter over the cell (the cell's namespace), per
	// event.
	Actions float64 `json:"actions_per_event"`
	// SampleOrders of the cell's orders, with SampleEvents distinct events,
	// had their histories read (every run) once the cell settled; the
	// counts below are theirs, per event.
	SampleOrders  int     `json:"sample_orders"`
	SampleEvents  int     `json:"sample_events"`
	WorkflowTasks float64 `json:"workflow_tasks_per_event"`
	HistoryEvents float64 `json:"history_events_per_event"`
	// BilledActions counts the sample's actions by Temporal Cloud's rules
	// (historyCost).
	BilledActions float64 `json:"billed_actions_per_event"`
	// PGTransactions and PGRowsWritten are the cell database's transactions
	// (pg_stat_database xact_commit + xact_rollback: pg_stat_statements is
	// not available; the benchmark's own settle checks included) and rows
	// written (tup_inserted + tup_updated + tup_deleted) per event.
	PGTransactions float64 `json:"pg_transactions_per_event"`
	PGRowsWritten  float64 `json:"pg_rows_written_per_event"`
}

// String is the cost's line of output.
func (c engineCost) String() string {
	return fmt.Sprintf("per event: %.2f actions (engine's counter), %.2f by Cloud's rules, %.2f workflow tasks, %.2f history events (histories of %d orders, %d events); PostgreSQL: %.2f transactions, %.2f rows written",
		c.Actions, c.BilledActions, c.WorkflowTasks, c.HistoryEvents, c.SampleOrders, c.SampleEvents, c.PGTransactions, c.PGRowsWritten)
}

// costCounters are the cumulative counters a cell's cost is the delta of.
type costCounters struct {
	actions, xacts, rows float64
}

// readCounters reads the engine's action counter of namespace from its
// Prometheus endpoint (none: 0) and the cell database's statistics; when
// save is not empty, it keeps the engine's metrics there.
func readCounters(ctx context.Context, metricsURL, namespace, save string, db *database) (costCounters, error) {
	var c costCounters
	if metricsURL != "" {
		text, err := get(ctx, metricsURL)
		if err != nil {
			return c, fmt.Errorf("engine metrics: %w", err)
		}
		c.actions = promSum(text, "action", `namespace="`+namespace+`"`)
		if save != "" {
			_ = os.WriteFile(save, []byte(text), 0o644)
		}
	}
	err := db.DB.WithContext(ctx).Raw(`SELECT xact_commit + xact_rollback, tup_inserted + tup_updated + tup_deleted
		FROM pg_stat_database WHERE datname = current_database()`).Row().Scan(&c.xacts, &c.rows)
	if err != nil {
		return c, fmt.Errorf("pg_stat_database: %w", err)
	}
	return c, nil
}

// get is the body of url.
func get(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// historyTally is what a sample of histories holds.
type historyTally struct {
	events, tasks, actions int
}

// add adds u to t.
func (t *historyTally) add(u historyTally) {
	t.events, t.tasks, t.actions = t.events+u.events, t.tasks+u.tasks, t.actions+u.actions
}

// historyCost tallies one run's history by Temporal Cloud's published
// rules: a signal (SignalWithStart included) is one action, a run started
// by continue-as-new one, all local activities of one workflow task
// together one, each search-attribute upsert, timer started and activity
// scheduled one; a workflow task none (counted apart), nor a version
// marker.
func historyCost(events []*historypb.HistoryEvent) historyTally {
	t := historyTally{events: len(events)}
	task, laTask := 0, -1
	for _, e := range events {
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			task++
			t.tasks++
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			if e.GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId() != "" {
				t.actions++
			}
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED, enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES,
			enumspb.EVENT_TYPE_TIMER_STARTED, enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			t.actions++
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			if e.GetMarkerRecordedEventAttributes().GetMarkerName() == "LocalActivity" && laTask != task {
				laTask = task
				t.actions++
			}
		}
	}
	return t
}

// orderHistories tallies every run of the order's workflow, from the
// current one back through the runs it continued.
func orderHistories(ctx context.Context, tc client.Client, orderID string) (historyTally, error) {
	var sum historyTally
	id, runID := api.WorkflowID(orderID), ""
	for runs := 0; runs < 1000; runs++ {
		var events []*historypb.HistoryEvent
		it := tc.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				return sum, fmt.Errorf("history of %s: %w", id, err)
			}
			events = append(events, e)
		}
		sum.add(historyCost(events))
		if len(events) == 0 {
			return sum, nil
		}
		runID = events[0].GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId()
		if runID == "" {
			return sum, nil
		}
	}
	return sum, fmt.Errorf("history of %s: more than 1000 runs", id)
}

// costSample is up to n of the scenario's orders, spread over it, with the
// number of distinct valid events of each.
func costSample(msgs []scenario.Message, n int) map[string]int {
	versions := map[string]map[int64]bool{}
	var orders []string
	for _, m := range msgs {
		if m.Kind == scenario.KindBad {
			continue
		}
		id := m.Event.OrderID
		if versions[id] == nil {
			versions[id] = map[int64]bool{}
			orders = append(orders, id)
		}
		versions[id][m.Event.Version] = true
	}
	out := map[string]int{}
	step := max(1, len(orders)/max(n, 1))
	for i := 0; i < len(orders) && len(out) < n; i += step {
		out[orders[i]] = len(versions[orders[i]])
	}
	return out
}

// measureCost fills res.Cost: the counters' delta since before, per event,
// and the sample's histories.
func (b *bench) measureCost(ctx context.Context, db *database, before costCounters, sample map[string]int, res *cellResult) error {
	// A PostgreSQL backend publishes its counters within a second of
	// going idle.
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(1500 * time.Millisecond):
	}
	// The engine's metrics are kept beside the processes' (its action
	// counter by action_type).
	save := filepath.Join(b.logDir, res.Config.Name+"-engine.metrics.txt")
	after, err := readCounters(ctx, b.engineMetrics, b.cfg.TemporalNamespace, save, db)
	if err != nil {
		return err
	}
	ev := float64(max(res.Events, 1))
	c := engineCost{Actions: (after.actions - before.actions) / ev,
		PGTransactions: (after.xacts - before.xacts) / ev, PGRowsWritten: (after.rows - before.rows) / ev}
	var sum historyTally
	for orderID, n := range sample {
		t, err := orderHistories(ctx, b.tc, orderID)
		if err != nil {
			return err
		}
		sum.add(t)
		c.SampleOrders++
		c.SampleEvents += n
	}
	if se := float64(max(c.SampleEvents, 1)); c.SampleOrders > 0 {
		c.WorkflowTasks, c.HistoryEvents, c.BilledActions = float64(sum.tasks)/se, float64(sum.events)/se, float64(sum.actions)/se
	}
	res.Cost = &c
	return nil
}
