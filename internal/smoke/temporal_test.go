package smoke

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/orderflow/orderflow/api"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
)

// shout is the smoke test's activity.
func shout(_ context.Context, s string) (string, error) { return strings.ToUpper(s) + "!", nil }

// greetWorkflow runs shout twice through the server and joins the results.
func greetWorkflow(ctx workflow.Context, name string) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
	var a, b string
	if err := workflow.ExecuteActivity(ctx, shout, "hello").Get(ctx, &a); err != nil {
		return "", err
	}
	if err := workflow.ExecuteActivity(ctx, shout, name).Get(ctx, &b); err != nil {
		return "", err
	}
	return a + " " + b, nil
}

// TestTemporalWorkflow executes a workflow on the Temporal server with an
// in-process worker on a task queue of its own, and checks its result and the
// OrderStatus search attribute registered by `make up`.
func TestTemporalWorkflow(t *testing.T) {
	c := testenv.RequireTemporal(t)
	queue := uniq.Name("smoke")

	w := worker.New(c, queue, worker.Options{})
	w.RegisterWorkflow(greetWorkflow)
	w.RegisterActivity(shout)
	if err := w.Start(); err != nil {
		t.Fatalf("start worker: %v", err)
	}
	t.Cleanup(w.Stop)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := uniq.Name("smoke-greet")
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                queue,
		WorkflowExecutionTimeout: time.Minute,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			temporal.NewSearchAttributeKeyKeyword(api.SearchAttributeOrderStatus).ValueSet("SMOKE"),
		),
	}, greetWorkflow, "orderflow")
	if err != nil {
		t.Fatalf("start workflow: %v", err)
	}
	var got string
	if err := run.Get(ctx, &got); err != nil {
		t.Fatalf("workflow %s: %v", id, err)
	}
	if want := "HELLO! ORDERFLOW!"; got != want {
		t.Fatalf("workflow result = %q, want %q", got, want)
	}

	desc, err := c.DescribeWorkflowExecution(ctx, id, run.GetRunID())
	if err != nil {
		t.Fatalf("describe workflow: %v", err)
	}
	if st := desc.GetWorkflowExecutionInfo().GetStatus().String(); st != "Completed" {
		t.Fatalf("workflow status = %s, want Completed", st)
	}
	if _, ok := desc.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()[api.SearchAttributeOrderStatus]; !ok {
		t.Fatalf("search attribute %s not set on the workflow: is it registered on the server?", api.SearchAttributeOrderStatus)
	}
}
