package main

import (
	"context"
	"fmt"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/orderflow/orderflow/api"
)

// signalled returns, for each order, its workflow's latest run and the
// signals that run received so far, as Temporal recorded them: a signal is
// in the history once the call that sent it returns. Two equal answers
// mean that no signal reached the orders' workflows in between, whatever
// the workflows do with signals later.
func signalled(t *testing.T, c client.Client, orders ...string) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	for _, o := range orders {
		id := api.WorkflowID(o)
		d, err := c.DescribeWorkflowExecution(ctx, id, "")
		if err != nil {
			t.Fatalf("describe %s: %v", id, err)
		}
		run := d.GetWorkflowExecutionInfo().GetExecution().GetRunId()
		it := c.GetWorkflowHistory(ctx, id, run, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		n := 0
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				t.Fatalf("history of %s: %v", id, err)
			}
			if e.GetWorkflowExecutionSignaledEventAttributes() != nil {
				n++
			}
		}
		out[o] = fmt.Sprintf("run %s, %d signals", run, n)
	}
	return out
}
