package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/orderflow/orderflow/api"
	"github.com/orderflow/orderflow/config"
	"github.com/orderflow/orderflow/workflows"
)

// temporalConn is a Temporal client and where it is connected.
type temporalConn struct {
	client.Client
	addr, namespace string
}

// dialTemporal connects to the Temporal frontend of cfg within timeout. An
// unreachable frontend is named with its address (Temporal settings hold no
// password in the address; an API key is never printed).
func dialTemporal(ctx context.Context, cfg config.Config, timeout time.Duration) (*temporalConn, error) {
	opts, err := cfg.TemporalClientOptions()
	if err != nil {
		return nil, err
	}
	// The SDK's own log lines would interleave with the command's output;
	// its errors are returned and reported instead.
	opts.Logger = sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := client.DialContext(dctx, opts)
	if err != nil {
		return nil, fmt.Errorf("the Temporal server at %s (namespace %s) is unreachable: %w", opts.HostPort, opts.Namespace, err)
	}
	return &temporalConn{Client: c, addr: opts.HostPort, namespace: opts.Namespace}, nil
}

// workflowReport is what Temporal knows about an order's workflow.
type workflowReport struct {
	ID string `json:"id"`
	// URL is the workflow's page in the Temporal UI.
	URL string `json:"url"`
	// Found is false when Temporal has no run of the workflow (never
	// started, or past the namespace's retention).
	Found bool `json:"found"`
	// Status of the latest run: running, completed, continued_as_new,
	// terminated, failed, canceled, timed_out.
	Status        string    `json:"status,omitempty"`
	RunID         string    `json:"run_id,omitempty"`
	StartTime     time.Time `json:"start_time,omitzero"`
	CloseTime     time.Time `json:"close_time,omitzero"`
	HistoryLength int64     `json:"history_length,omitempty"`
	// Build is the Worker Deployment version (build ID) the latest run is
	// on, and Deployment its Worker Deployment; empty for a run of
	// unversioned workers.
	Build      string `json:"build,omitempty"`
	Deployment string `json:"deployment,omitempty"`
	// Runs counts the runs Temporal's visibility lists under the workflow
	// ID (fresh runs after a close and continue-as-new runs, within the
	// retention); 0 when it could not count them.
	Runs int64 `json:"runs,omitempty"`
	// CloseReason is the workflow's completion reason (grace-period,
	// idle-timeout) when its latest run completed.
	CloseReason string `json:"close_reason,omitempty"`
	// State is the state query's answer (a running workflow) or the state
	// the latest run completed with.
	State *workflows.State `json:"state,omitempty"`
	// Details are a running workflow's current details as the UI shows
	// them.
	Details string `json:"details,omitempty"`
	// Problems lists what could not be read (a query no worker answered).
	Problems []string `json:"problems,omitempty"`
}

// describeWorkflow reads the order's workflow: its latest run, how many
// runs there were, and its state (the state query for a running
// workflow, answered by a worker within queryTimeout; the result of a
// completed one).
func describeWorkflow(ctx context.Context, c *temporalConn, cfg config.Config, orderID string, queryTimeout time.Duration) (workflowReport, error) {
	id := api.WorkflowID(orderID)
	r := workflowReport{ID: id, URL: cfg.WorkflowURL(c.namespace, id)}
	d, err := c.DescribeWorkflowExecution(ctx, id, "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return r, nil
	}
	if err != nil {
		return r, fmt.Errorf("the Temporal server at %s: describe %s: %w", c.addr, id, err)
	}
	info := d.GetWorkflowExecutionInfo()
	r.Found = true
	r.Status = strings.ToLower(strings.TrimPrefix(info.GetStatus().String(), "WORKFLOW_EXECUTION_STATUS_"))
	r.RunID = info.GetExecution().GetRunId()
	r.StartTime = info.GetStartTime().AsTime()
	if info.GetCloseTime() != nil {
		r.CloseTime = info.GetCloseTime().AsTime()
	}
	r.HistoryLength = info.GetHistoryLength()
	v := info.GetVersioningInfo().GetDeploymentVersion()
	r.Build, r.Deployment = v.GetBuildId(), v.GetDeploymentName()
	if n, err := c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{
		Namespace: c.namespace, Query: fmt.Sprintf("WorkflowId = '%s'", id)}); err == nil {
		r.Runs = n.GetCount()
	} else {
		r.Problems = append(r.Problems, fmt.Sprintf("counting runs: %v", err))
	}

	switch info.GetStatus() {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		qctx, cancel := context.WithTimeout(ctx, queryTimeout)
		defer cancel()
		var st workflows.State
		if v, err := c.QueryWorkflow(qctx, id, r.RunID, api.QueryState); err != nil {
			r.Problems = append(r.Problems, fmt.Sprintf("state query: %v (is a worker running on task queue %s?)", shortErr(err), cfg.TaskQueue))
		} else if err := v.Get(&st); err != nil {
			r.Problems = append(r.Problems, fmt.Sprintf("state query: %v", err))
		} else {
			r.State = &st
		}
		var md sdkpb.WorkflowMetadata
		if r.State != nil {
			if v, err := c.QueryWorkflow(qctx, id, r.RunID, api.QueryMetadata); err == nil && v.Get(&md) == nil {
				r.Details = md.GetCurrentDetails()
			}
		}
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		var res workflows.Result
		if err := c.GetWorkflow(ctx, id, r.RunID).Get(ctx, &res); err != nil {
			r.Problems = append(r.Problems, fmt.Sprintf("result: %v", err))
		} else {
			r.State, r.CloseReason = &res.State, res.Reason
		}
	}
	return r, nil
}

// shortErr is the first line of err, without the SDK's wrapping noise.
func shortErr(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return cut(s, 160)
}
