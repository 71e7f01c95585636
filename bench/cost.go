package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"

	"github.com/orderflow/orderflow/api"
	"github.com/orderflow/orderflow/scenario"
	"github.com/orderflow/orderflow/workflows"
)

// costSampleOrders is how many orders of a cell have their histories read.
const costSampleOrders = 30

// engineCost is the engine's work per distinct event of a cell: its action
// counter's delta; from the histories of a sample of orders, workflow
// tasks, history events and actions by Temporal Cloud's rules; from
// pg_stat_database, transactions (settle checks included) and rows written.
type engineCost struct {
	Actions        float64 `json:"actions_per_event"`
	SampleOrders   int     `json:"sample_orders"`
	SampleEvents   int     `json:"sample_events"`
	WorkflowTasks  float64 `json:"workflow_tasks_per_event"`
	HistoryEvents  float64 `json:"history_events_per_event"`
	BilledActions  float64 `json:"billed_actions_per_event"`
	PGTransactions float64 `json:"pg_transactions_per_event"`
	PGRowsWritten  float64 `json:"pg_rows_written_per_event"`
	// HistoryKinds are HistoryEvents by kind (historyKind).
	HistoryKinds map[string]float64 `json:"history_events_by_kind_per_event,omitempty"`
}

// String is the cost's line of output; a cell without a database (the
// direct floor's) has no PostgreSQL figures.
func (c engineCost) String() string {
	pg := fmt.Sprintf("%.2f transactions, %.2f rows written", c.PGTransactions, c.PGRowsWritten)
	if c.PGTransactions == 0 && c.PGRowsWritten == 0 {
		pg = "none (no database)"
	}
	return fmt.Sprintf("per event: %.2f actions (engine's counter), %.2f by Cloud's rules, %.2f workflow tasks, %.2f history events (%s; histories of %d orders, %d events); PostgreSQL: %s",
		c.Actions, c.BilledActions, c.WorkflowTasks, c.HistoryEvents, kindList(c.HistoryKinds), c.SampleOrders, c.SampleEvents, pg)
}

// kindList is the history events by kind, most first, or "" when none.
func kindList(kinds map[string]float64) string {
	names := slices.SortedFunc(maps.Keys(kinds), func(a, b string) int {
		return cmp.Or(cmp.Compare(kinds[b], kinds[a]), cmp.Compare(a, b))
	})
	parts := make([]string, 0, len(names))
	for _, k := range names {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, kinds[k]))
	}
	return strings.Join(parts, ", ")
}

// costCounters are the cumulative counters a cell's cost is the delta of.
type costCounters struct {
	actions, xacts, rows float64
}

// readCounters reads the action counter of namespace from the engine's
// Prometheus endpoint, keeping the metrics in the file save when it is
// named, and the cell database's statistics (none when db is nil: a cell
// without a database).
func readCounters(ctx context.Context, metricsURL, namespace, save string, db *database) (costCounters, error) {
	var c costCounters
	text, err := get(ctx, metricsURL)
	if err != nil {
		return c, fmt.Errorf("engine metrics: %w", err)
	}
	if c.actions, err = promSum(text, "action", "namespace", namespace); err != nil {
		return c, fmt.Errorf("engine metrics: %w", err)
	}
	if save != "" {
		_ = os.WriteFile(save, []byte(text), 0o644)
	}
	if db == nil {
		return c, nil
	}
	err = db.DB.WithContext(ctx).Raw(`SELECT xact_commit + xact_rollback, tup_inserted + tup_updated + tup_deleted
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

// historyTally counts the events, workflow tasks and actions of histories,
// and the events by kind (historyKind).
type historyTally struct {
	events, tasks, actions int
	kinds                  map[string]int
}

// add adds o's counts to t's.
func (t *historyTally) add(o historyTally) {
	t.events, t.tasks, t.actions = t.events+o.events, t.tasks+o.tasks, t.actions+o.actions
	if t.kinds == nil {
		t.kinds = map[string]int{}
	}
	for k, n := range o.kinds {
		t.kinds[k] += n
	}
}

// historyKind is the kind of a history event as the cost of an event is
// told apart: the run's start and end, a workflow task's events, signals,
// local activities' markers, GetVersion's marker and its
// TemporalChangeVersion upsert, the other upserts (the OrderStatus search
// attribute), timers, activities.
func historyKind(e *historypb.HistoryEvent) string {
	switch t := e.GetEventType(); t {
	case enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED,
		enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED,
		enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
		return "task"
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
		return "signal"
	case enumspb.EVENT_TYPE_MARKER_RECORDED:
		if e.GetMarkerRecordedEventAttributes().GetMarkerName() == "LocalActivity" {
			return "local activity"
		}
		return "version marker"
	case enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
		if versionUpsert(e) {
			return "version upsert"
		}
		return "status upsert"
	case enumspb.EVENT_TYPE_TIMER_STARTED, enumspb.EVENT_TYPE_TIMER_FIRED, enumspb.EVENT_TYPE_TIMER_CANCELED:
		return "timer"
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED,
		enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED,
		enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
		return "activity"
	default:
		if strings.HasPrefix(t.String(), "WorkflowExecution") {
			return "run"
		}
		return "other"
	}
}

// historyCost tallies one run's history by Temporal Cloud's published
// rules: a signal (SignalWithStart included) is one action, a run started
// by continue-as-new one, all local activities of one workflow task
// together one, each search-attribute upsert, timer started and activity
// scheduled one; a workflow task none (counted apart), nor a version
// marker, nor the upsert of TemporalChangeVersion that the SDK writes with
// it, nor the search attributes a run starts with.
func historyCost(events []*historypb.HistoryEvent) historyTally {
	t := historyTally{events: len(events), kinds: map[string]int{}}
	laTask := -1
	for _, e := range events {
		t.kinds[historyKind(e)]++
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			t.tasks++
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			if e.GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId() != "" {
				t.actions++
			}
		case enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
			if !versionUpsert(e) {
				t.actions++
			}
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED, enumspb.EVENT_TYPE_TIMER_STARTED,
			enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			t.actions++
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			if e.GetMarkerRecordedEventAttributes().GetMarkerName() == "LocalActivity" && laTask != t.tasks {
				laTask = t.tasks
				t.actions++
			}
		}
	}
	return t
}

// versionUpsert reports whether e upserts only TemporalChangeVersion: the
// SDK's record of a workflow.GetVersion, which Temporal Cloud does not
// bill.
func versionUpsert(e *historypb.HistoryEvent) bool {
	fields := e.GetUpsertWorkflowSearchAttributesEventAttributes().GetSearchAttributes().GetIndexedFields()
	_, ok := fields[workflows.ChangeVersionSearchAttribute]
	return ok && len(fields) == 1
}

// orderRuns is the history of every run of the order's workflow, the
// current run first, back through the runs it continued.
func orderRuns(ctx context.Context, tc client.Client, orderID string) ([][]*historypb.HistoryEvent, error) {
	var runs [][]*historypb.HistoryEvent
	id, runID := api.WorkflowID(orderID), ""
	for len(runs) < 1000 {
		var events []*historypb.HistoryEvent
		it := tc.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				return runs, fmt.Errorf("history of %s: %w", id, err)
			}
			events = append(events, e)
		}
		if len(events) == 0 {
			return runs, nil
		}
		runs = append(runs, events)
		if runID = events[0].GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId(); runID == "" {
			return runs, nil
		}
	}
	return runs, fmt.Errorf("history of %s: more than 1000 runs", id)
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
// and the sample's histories. The engine's metrics are kept in the log
// folder.
func (b *bench) measureCost(ctx context.Context, db *database, before costCounters, sample map[string]int, res *cellResult) error {
	// A PostgreSQL backend publishes its counters within a second of
	// going idle.
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(1500 * time.Millisecond):
	}
	save := filepath.Join(b.logDir, res.Config.Name+"-engine.metrics.txt")
	after, err := readCounters(ctx, b.e.Metrics, b.cfg.TemporalNamespace, save, db)
	if err != nil {
		return err
	}
	ev := float64(max(res.Events, 1))
	c := engineCost{Actions: (after.actions - before.actions) / ev,
		PGTransactions: (after.xacts - before.xacts) / ev, PGRowsWritten: (after.rows - before.rows) / ev}
	var sum historyTally
	for orderID, n := range sample {
		runs, err := orderRuns(ctx, b.tc, orderID)
		if err != nil {
			return err
		}
		for _, events := range runs {
			sum.add(historyCost(events))
		}
		c.SampleOrders++
		c.SampleEvents += n
	}
	se := float64(max(c.SampleEvents, 1))
	c.WorkflowTasks, c.HistoryEvents, c.BilledActions = float64(sum.tasks)/se, float64(sum.events)/se, float64(sum.actions)/se
	c.HistoryKinds = map[string]float64{}
	for k, n := range sum.kinds {
		c.HistoryKinds[k] = float64(n) / se
	}
	res.Cost = &c
	return nil
}
