package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/orderflow/orderflow/api"
	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/scenario"
	"github.com/orderflow/orderflow/workflows"
)

// hotScenario is one order receiving n events (n >= 5), published in
// version order: CREATED and n-5 data updates at CREATED (the amount
// changing), then PAID, SHIPPED, DELIVERED and COMPLETED at the last
// amount. The order ends as its highest version says.
func hotScenario(prefix string, n int, start time.Time) (*scenario.Scenario, error) {
	if n < 5 {
		return nil, fmt.Errorf("a hot order needs at least 5 events, got %d", n)
	}
	id := scenario.OrderID(prefix, 0)
	start = start.UTC().Truncate(time.Second)
	sc := &scenario.Scenario{}
	exp := &sc.Expected
	paid := []scenario.Status{scenario.Paid, scenario.Shipped, scenario.Delivered, scenario.Completed}
	var e scenario.Event
	for v := 1; v <= n; v++ {
		status, amount := scenario.Created, int64(1000+v)
		if k := v - (n - len(paid)); k >= 1 {
			status, amount = paid[k-1], int64(1000+n-len(paid))
		}
		e = scenario.Event{EventID: fmt.Sprintf("%s-v%d", id, v), OrderID: id, UserID: 7, Status: status,
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
	}
	exp.Prefix = prefix
	exp.Options = scenario.Options{Orders: 1, Prefix: prefix, Start: start}
	exp.Orders = []scenario.ExpectedOrder{{OrderID: id, UserID: e.UserID, Status: e.Status,
		Version: e.Version, AmountCents: e.AmountCents}}
	exp.Counts.Messages, exp.Counts.Orders, exp.Counts.Events = n, 1, n
	return sc, nil
}

// hotResult is the hot order's chain of runs: how many (each ended by
// continue-as-new, the last by completion or still running), the most
// events one run handled and the workflow tasks that failed over all runs,
// with how many failed for each cause the engine recorded.
type hotResult struct {
	Runs         int            `json:"runs"`
	MaxHandled   int            `json:"max_handled"`
	FailedTasks  int            `json:"failed_tasks"`
	FailedCauses map[string]int `json:"failed_task_causes,omitempty"`
}

// String is the one-line summary of r.
func (r hotResult) String() string {
	s := fmt.Sprintf("%d run(s), at most %d events handled by one run, %d failed workflow tasks", r.Runs, r.MaxHandled, r.FailedTasks)
	if len(r.FailedCauses) > 0 {
		var causes []string
		for _, c := range slices.Sorted(maps.Keys(r.FailedCauses)) {
			causes = append(causes, fmt.Sprintf("%s %d", c, r.FailedCauses[c]))
		}
		s += " (" + strings.Join(causes, ", ") + ")"
	}
	return s
}

// checkHot reads every run of the order's workflow and fails when one ended
// otherwise than by continue-as-new or completion, or when Temporal holds a
// run outside the chain (one a history limit ended: the database cannot tell).
func checkHot(ctx context.Context, c client.Client, namespace, orderID string) (hotResult, error) {
	r := hotResult{FailedCauses: map[string]int{}}
	runs, err := orderRuns(ctx, c, orderID)
	if err != nil {
		return r, err
	}
	for _, events := range runs {
		end, handled, failed, err := hotRun(events)
		if err != nil {
			return r, fmt.Errorf("%s: %w", api.WorkflowID(orderID), err)
		}
		r.Runs++
		r.MaxHandled = max(r.MaxHandled, handled)
		for cause, n := range failed {
			r.FailedCauses[cause] += n
			r.FailedTasks += n
		}
		if end != "ContinuedAsNew" && end != "Completed" && end != "Running" {
			return r, fmt.Errorf("a run of %s ended %s, not by continue-as-new", api.WorkflowID(orderID), end)
		}
	}
	// Visibility trails the runs by a moment: count again while it does.
	req := &workflowservice.CountWorkflowExecutionsRequest{Namespace: namespace,
		Query: fmt.Sprintf("WorkflowId = '%s'", api.WorkflowID(orderID))}
	for i := 0; ; i++ {
		resp, err := c.CountWorkflow(ctx, req)
		switch n := resp.GetCount(); {
		case err != nil:
			return r, fmt.Errorf("count the runs of %s: %w", api.WorkflowID(orderID), err)
		case n == int64(r.Runs):
			return r, nil
		case n > int64(r.Runs) || i == 40 || ctx.Err() != nil:
			return r, fmt.Errorf("the chain of continue-as-new of %s holds %d runs, Temporal %d", api.WorkflowID(orderID), r.Runs, n)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// hotRun reads one run's history: how it ended (Running when it has not),
// how many events it handled (those its start carried over unhandled plus
// those its signals brought, less those its continue-as-new carried on) and
// how many of its workflow tasks failed, by the cause the engine recorded.
func hotRun(events []*historypb.HistoryEvent) (end string, handled int, failed map[string]int, err error) {
	failed = map[string]int{}
	dc := converter.GetDefaultDataConverter()
	pending := func(p *commonpb.Payloads) int {
		var in workflows.Input
		if p != nil && err == nil {
			err = dc.FromPayloads(p, &in)
		}
		return len(in.Pending)
	}
	end = "Running"
	for _, e := range events {
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			handled += pending(e.GetWorkflowExecutionStartedEventAttributes().GetInput())
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
			handled -= pending(e.GetWorkflowExecutionContinuedAsNewEventAttributes().GetInput())
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			a := e.GetWorkflowExecutionSignaledEventAttributes()
			var b workflows.Batch
			if a.GetSignalName() != api.SignalEvents {
				handled++
			} else if err = dc.FromPayloads(a.GetInput(), &b); err == nil {
				handled += len(b.Deliveries)
			}
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED:
			failed[e.GetWorkflowTaskFailedEventAttributes().GetCause().String()]++
		}
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
			enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED,
			enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
			end = strings.TrimPrefix(e.GetEventType().String(), "WorkflowExecution")
		}
		if err != nil {
			return end, handled, failed, fmt.Errorf("event %d: %w", e.GetEventId(), err)
		}
	}
	return end, handled, failed, nil
}
