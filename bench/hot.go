package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/orderflow/orderflow/api"
	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/scenario"
	"github.com/orderflow/orderflow/workflows"
)

// hotScenario is one order receiving n events (n >= 5): CREATED and n-5
// data updates at CREATED (the amount changing), then PAID, SHIPPED,
// DELIVERED and COMPLETED, published in version order. Its expectations are
// what scenario.Generate would state for such a path: the order ends as its
// highest version says, which is applied whatever the delivery order.
func hotScenario(prefix string, n int, start time.Time) (*scenario.Scenario, error) {
	if n < 5 {
		return nil, fmt.Errorf("a hot order needs at least 5 events, got %d", n)
	}
	id := scenario.OrderID(prefix, 0)
	start = start.UTC().Truncate(time.Second)
	sc := &scenario.Scenario{}
	exp := &sc.Expected
	paid := []scenario.Status{scenario.Paid, scenario.Shipped, scenario.Delivered, scenario.Completed}
	var last scenario.Event
	for v := 1; v <= n; v++ {
		status, amount := scenario.Created, int64(1000+v)
		if k := v - (n - len(paid)); k >= 1 {
			status, amount = paid[k-1], int64(1000+n-len(paid))
		}
		e := scenario.Event{EventID: fmt.Sprintf("%s-v%d", id, v), OrderID: id, UserID: 7, Status: status,
			Version: int64(v), AmountCents: amount, OccurredAt: start.Add(time.Duration(v) * time.Millisecond),
			ProducerID: prefix + "-producer", Seq: int64(v)}
		body, err := json.Marshal(e)
		if err != nil {
			return nil, fmt.Errorf("hot order: encode %s: %w", e.Key(), err)
		}
		m, err := mq.EventMessage("", body)
		if err != nil {
			return nil, err
		}
		sc.Messages = append(sc.Messages, scenario.Message{Kind: scenario.KindEvent, Msg: m, Event: e})
		k := scenario.PublishedKey{OrderID: id, Version: e.Version, Content: e.Content()}
		if v == n {
			k.Outcome = scenario.OutcomeApplied
		}
		exp.Keys = append(exp.Keys, k)
		last = e
	}
	exp.Prefix = prefix
	exp.Options = scenario.Options{Orders: 1, Prefix: prefix, Start: start}
	exp.Orders = []scenario.ExpectedOrder{{OrderID: id, UserID: last.UserID, Status: last.Status,
		Version: last.Version, AmountCents: last.AmountCents}}
	exp.Counts.Messages, exp.Counts.Orders, exp.Counts.Events = n, 1, n
	return sc, nil
}

// hotResult is what Temporal holds for the hot order's workflow once the
// database settled: its chain of runs and how each ended.
type hotResult struct {
	WorkflowID string `json:"workflow_id"`
	// Runs counts the runs of the chain; Statuses counts them by
	// execution status (ContinuedAsNew for all but the last, which is
	// Running during its grace period).
	Runs     int            `json:"runs"`
	Statuses map[string]int `json:"statuses"`
	// MaxHistory is the longest history of a run, in events, and
	// MaxSignals the most signals one run received. Under a continuous
	// stream a run that should continue as new may go on receiving
	// signals: MaxSignals shows how far.
	MaxHistory int64 `json:"max_history"`
	MaxSignals int   `json:"max_signals"`
	// MaxEvents is the most events one run received (a signal of the
	// order-events kind carries several).
	MaxEvents int `json:"max_events"`
	// MaxHandled is the most events one run handled: those its
	// predecessor carried over to it unhandled plus those it received,
	// less those it carried over to its successor (workflows.Input.Pending
	// of its start and of its continue-as-new). A run that continues as
	// new while signals keep coming receives more than it handles.
	MaxHandled int `json:"max_handled"`
	// TaskFailures counts the workflow tasks that failed over all runs, by
	// cause. FORCE_CLOSE_COMMAND is the server failing a task in flight
	// because more signals arrived meanwhile than it buffers (100 by
	// default): the task's work is done again by the next one.
	TaskFailures map[string]int `json:"task_failures,omitempty"`
	// Duplicates is the count of duplicates the workflow skipped itself.
	Duplicates int64 `json:"duplicates"`
}

// String is the one-line summary of r.
func (r hotResult) String() string {
	var parts []string
	for _, s := range sortedStatuses(r.Statuses) {
		parts = append(parts, fmt.Sprintf("%s %d", s, r.Statuses[s]))
	}
	failed, n := []string{}, 0
	for _, c := range sortedStatuses(r.TaskFailures) {
		failed = append(failed, fmt.Sprintf("%s %d", c, r.TaskFailures[c]))
		n += r.TaskFailures[c]
	}
	tasks := fmt.Sprintf("%d failed workflow tasks", n)
	if n > 0 {
		tasks += " (" + strings.Join(failed, ", ") + ")"
	}
	return fmt.Sprintf("%d run(s) (%s), longest history %d events, at most %d signals (%d order events) received and %d events handled in one run, %s",
		r.Runs, strings.Join(parts, ", "), r.MaxHistory, r.MaxSignals, r.MaxEvents, r.MaxHandled, tasks)
}

func sortedStatuses(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for s := range m {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// checkHot lists every run of the order's workflow and fails when one ended
// otherwise than by continue-as-new or completion (a history limit
// terminates a run; a later signal would start a fresh one that rehydrates
// from PostgreSQL, so the database alone cannot tell).
func checkHot(ctx context.Context, c client.Client, namespace, orderID string) (hotResult, error) {
	// Visibility trails the runs by a moment: look again while it does.
	for i := 0; ; i++ {
		r, err := listHot(ctx, c, namespace, orderID)
		if !errors.Is(err, errVisibilityLag) || i == 40 {
			return r, err
		}
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// errVisibilityLag is listHot's error when visibility does not list every
// run yet.
var errVisibilityLag = errors.New("visibility lags")

// listHot is one look of checkHot.
func listHot(ctx context.Context, c client.Client, namespace, orderID string) (hotResult, error) {
	id := api.WorkflowID(orderID)
	r := hotResult{WorkflowID: id, Statuses: map[string]int{}, TaskFailures: map[string]int{}}
	var (
		token []byte
		bad   []string
	)
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: namespace, Query: fmt.Sprintf("WorkflowId = '%s'", id), NextPageToken: token})
		if err != nil {
			return r, fmt.Errorf("list runs of %s: %w", id, err)
		}
		for _, ex := range resp.GetExecutions() {
			why, err := r.addRun(ctx, c, ex)
			if err != nil {
				return r, err
			}
			if why != "" {
				bad = append(bad, why)
			}
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	if r.Runs == 0 {
		return r, fmt.Errorf("%w: no run of %s is visible", errVisibilityLag, id)
	}
	if len(bad) > 0 {
		return r, fmt.Errorf("the hot order's workflow did not continue as new cleanly: %s", strings.Join(bad, "; "))
	}
	qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	v, err := c.QueryWorkflow(qctx, id, "", api.QueryState)
	if err != nil {
		return r, fmt.Errorf("query %s: %w", id, err)
	}
	var st workflows.State
	if err := v.Get(&st); err != nil {
		return r, fmt.Errorf("query %s: %w", id, err)
	}
	if st.Runs != r.Runs {
		return r, fmt.Errorf("%w: the workflow counts %d runs, Temporal lists %d", errVisibilityLag, st.Runs, r.Runs)
	}
	r.Duplicates = st.Counts[fsm.Duplicate]
	return r, nil
}

// addRun counts one run of the workflow into r: its status, history length
// and what its history holds. It says why the run is bad when it ended
// otherwise than by continue-as-new or completion.
func (r *hotResult) addRun(ctx context.Context, c client.Client, ex *workflowpb.WorkflowExecutionInfo) (string, error) {
	id, runID := r.WorkflowID, ex.GetExecution().GetRunId()
	r.Runs++
	st := ex.GetStatus()
	r.Statuses[strings.TrimPrefix(st.String(), "WORKFLOW_EXECUTION_STATUS_")]++
	n, why := ex.GetHistoryLength(), ""
	switch st {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		// Visibility has the length of closed runs only.
		d, err := c.DescribeWorkflowExecution(ctx, id, runID)
		if err != nil {
			return "", fmt.Errorf("describe %s: %w", id, err)
		}
		n = d.GetWorkflowExecutionInfo().GetHistoryLength()
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW:
	default:
		why = fmt.Sprintf("run %s %s: %s", runID, st, closeReason(ctx, c, id, runID))
	}
	r.MaxHistory = max(r.MaxHistory, n)
	rh, err := scanHistory(ctx, c, id, runID, r.TaskFailures)
	if err != nil {
		return "", err
	}
	r.MaxSignals = max(r.MaxSignals, rh.signals)
	r.MaxEvents = max(r.MaxEvents, rh.events)
	r.MaxHandled = max(r.MaxHandled, rh.handled())
	return why, nil
}

// runHistory is what scanHistory reads in a run's history.
type runHistory struct {
	signals, events int // signals received, and the events in them
	// carriedIn and carriedOut are the events the run's input carried in
	// and its continue-as-new carried out, unhandled.
	carriedIn, carriedOut int
}

// handled is the number of events the run handled.
func (h runHistory) handled() int { return h.carriedIn + h.events - h.carriedOut }

// scanHistory reads a run's history: the signals and events it received
// and carried, and its failed workflow tasks, counted into failures by
// cause.
func scanHistory(ctx context.Context, c client.Client, id, runID string, failures map[string]int) (runHistory, error) {
	var h runHistory
	dc := converter.GetDefaultDataConverter()
	pending := func(p *commonpb.Payloads) (int, error) {
		if p == nil {
			return 0, nil
		}
		var in workflows.Input
		if err := dc.FromPayloads(p, &in); err != nil {
			return 0, fmt.Errorf("history of %s run %s: input: %w", id, runID, err)
		}
		return len(in.Pending), nil
	}
	it := c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return h, fmt.Errorf("history of %s run %s: %w", id, runID, err)
		}
		if a := e.GetWorkflowExecutionStartedEventAttributes(); a != nil {
			if h.carriedIn, err = pending(a.GetInput()); err != nil {
				return h, err
			}
		}
		if a := e.GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil {
			if h.carriedOut, err = pending(a.GetInput()); err != nil {
				return h, err
			}
		}
		if a := e.GetWorkflowExecutionSignaledEventAttributes(); a != nil {
			h.signals++
			h.events++
			if a.GetSignalName() == api.SignalEvents {
				var b workflows.Batch
				if err := dc.FromPayloads(a.GetInput(), &b); err != nil {
					return h, fmt.Errorf("history of %s run %s: signal %s: %w", id, runID, a.GetSignalName(), err)
				}
				h.events += len(b.Deliveries) - 1
			}
		}
		if a := e.GetWorkflowTaskFailedEventAttributes(); a != nil {
			failures[strings.TrimPrefix(a.GetCause().String(), "WORKFLOW_TASK_FAILED_CAUSE_")]++
		}
	}
	return h, nil
}

// closeReason is the close event of a run, for the report of a run that
// failed or was terminated.
func closeReason(ctx context.Context, c client.Client, id, runID string) string {
	it := c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
	if !it.HasNext() {
		return "no close event"
	}
	e, err := it.Next()
	switch {
	case err != nil:
		return err.Error()
	case e.GetWorkflowExecutionTerminatedEventAttributes() != nil:
		return "terminated: " + e.GetWorkflowExecutionTerminatedEventAttributes().GetReason()
	case e.GetWorkflowExecutionFailedEventAttributes() != nil:
		return "failed: " + e.GetWorkflowExecutionFailedEventAttributes().GetFailure().GetMessage()
	}
	return e.GetEventType().String()
}
