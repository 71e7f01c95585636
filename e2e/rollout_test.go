package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"gorm.io/gorm"

	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/internal/procs"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/scenario"
	"github.com/orderflow/orderflow/workflows"
)

// maxSwitchP99 bounds the p99 from publish to effect around each switch of
// the deployment's current version.
const maxSwitchP99 = 5 * time.Second

// TestRollingUpgradeAndRollback deploys a second worker build beside the
// first under a steady stream, with Worker Versioning: build a records the
// oldest workflow version this code may (what 0.1.0 replays), build b the newest (a change behind
// a patch: b's runs ask the database about remembered events). b is made
// current, a stopped; then the rollback: a started again and made current,
// b stopped. No step stops processing. Throughout, the five invariants
// hold, no workflow task fails, and p99 from publish to the event's row
// stays under maxSwitchP99 around each switch. A completion the server
// refuses because a signal came while the task ran (UnhandledCommand) is the
// engine's way of handing the run its new events, not a failure of the
// code: it is counted apart.
func TestRollingUpgradeAndRollback(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	gdb, dsn := testenv.NewDatabase(t)
	namesrv := testenv.RocketMQNamesrv(t)
	tc := testenv.RequireTemporal(t)
	pl := newPipeline(t, "rollout", dsn, namesrv)
	deployment := uniq.Name("rollout-dep")
	// A run whose last task ran on the build that stops being current
	// waits for its next one on that worker's sticky queue for the sticky
	// timeout: the SDK's 5 s made p99 around the rollback's switch 4.5 to
	// 8.2 s; 1 s, as docs/deploying.md suggests for rollouts, 0.25 to 3.9 s.
	build := func(id string, version int) []string {
		return pl.with("ORDERFLOW_WORKER_DEPLOYMENT_NAME="+deployment, "ORDERFLOW_WORKER_BUILD_ID="+id,
			fmt.Sprintf("ORDERFLOW_WORKER_WORKFLOW_VERSION=%d", version))
	}
	workerA, bridge := pl.procs(t, build("a", workflows.OldestWriteVersion), pl.env)
	workerB := newProc(t, "worker-b", pl.workerBin, "ORDERFLOW_WORKER_METRICS_ADDR", build("b", workflows.LatestVersion))
	t.Cleanup(func() {
		stop(t, workerB)
		if t.Failed() {
			t.Logf("worker-b log (tail):\n%s", workerB.Tail(6000))
		}
	})
	if err := workerA.Start(ctx); err != nil {
		t.Fatal(err)
	}
	setCurrent(ctx, t, tc, deployment, "a")
	if err := bridge.Start(ctx); err != nil {
		t.Fatal(err)
	}

	s, err := scenario.Generate(scenario.Options{Orders: 250, Seed: time.Now().UnixNano(), Prefix: pl.prefix, Start: time.Now(),
		DupRate: 0.2, Reorder: 0.3, CancelRate: 0.2, OpenRate: 0.1, UpdateRate: 0.2, GapRate: 0.05,
		UserChangeRate: 0.3, Conflicts: 5, Bad: 6})
	if err != nil {
		t.Fatal(err)
	}
	producer := newProducer(t, namesrv, "rollout", nil)
	sent := &sendTimes{first: map[string]time.Time{}}
	const rate = 30.0
	pubDone := make(chan error, 1)
	began := time.Now()
	go func() {
		pubDone <- scenario.Publish(ctx, timingPublisher{producer, sent}, s.Messages, scenario.PublishOptions{Topic: pl.topic, Rate: rate})
	}()

	// The rollout and the rollback, while the stream flows.
	type step struct {
		at   time.Duration
		what string
		do   func() error
	}
	var switches []time.Time
	current := func(id string) func() error {
		return func() error {
			setCurrent(ctx, t, tc, deployment, id)
			switches = append(switches, time.Now())
			return nil
		}
	}
	stopProc := func(p *procs.Proc) func() error {
		return func() error { _, _, err := p.Stop(45 * time.Second); return err }
	}
	steps := []step{
		{8 * time.Second, "start build b", func() error { return workerB.Start(ctx) }},
		{10 * time.Second, "make b current", current("b")},
		{16 * time.Second, "stop build a", stopProc(workerA)},
		{22 * time.Second, "start build a (rollback)", func() error { return workerA.Start(ctx) }},
		{24 * time.Second, "make a current", current("a")},
		{30 * time.Second, "stop build b", stopProc(workerB)},
	}
	for _, st := range steps {
		sleepCtx(ctx, time.Until(began.Add(st.at)))
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.what, err)
		}
		t.Logf("+%s: %s", time.Since(began).Round(100*time.Millisecond), st.what)
	}
	if err := <-pubDone; err != nil {
		t.Fatalf("publish: %v", err)
	}
	t.Logf("published %d messages at %.0f/s in %s", len(s.Messages), rate, time.Since(began).Round(time.Second))

	t.Logf("after the rollout and the rollback:\n%s", settle(ctx, t, gdb, s.Expected.FirstPhase(), "after the rollout and the rollback"))

	h := scanHistories(ctx, t, tc, pl.taskQueue)
	if h.failed != 0 {
		t.Errorf("%d workflow tasks failed over %d runs, want none", h.failed, h.runs)
	}
	// The runs moved with the current version, and each build recorded its
	// own workflow version in the runs it started.
	if h.bothBuilds == 0 {
		t.Errorf("no run had workflow tasks on both builds: the runs did not follow the current version (%+v)", h)
	}
	for _, v := range []int{workflows.OldestWriteVersion, workflows.LatestVersion} {
		if h.versions[v] == 0 {
			t.Errorf("no run recorded %s version %d (%v)", workflows.ChangeLocalActivities, v, h.versions)
		}
	}
	for i, at := range switches {
		p99, n := sent.p99(t, gdb, at.Add(-2*time.Second), at.Add(8*time.Second))
		if n == 0 || p99 > maxSwitchP99 {
			t.Errorf("switch %d: p99 from publish to row %s over %d keys published around it, want at most %s", i+1, p99, n, maxSwitchP99)
		}
		t.Logf("switch %d (to %s): p99 from publish to row %s over %d business keys published from 2 s before to 8 s after it",
			i+1, []string{"b", "a"}[i], p99.Round(time.Millisecond), n)
	}
	t.Logf("workflow task failures: %d over %d runs (and %d completions the server refused for a signal that came meanwhile); "+
		"%d runs had tasks on both builds; runs by recorded version %v", h.failed, h.runs, h.refused, h.bothBuilds, h.versions)
}

// setCurrent makes build the current version of the Worker Deployment,
// waiting for the version's workers to have polled (the server knows a
// version only then).
func setCurrent(ctx context.Context, t *testing.T, c client.Client, deployment, build string) {
	t.Helper()
	h := c.WorkerDeploymentClient().GetHandle(deployment)
	untilAccepted(ctx, t, fmt.Sprintf("set the current version of %s to %s", deployment, build), func() error {
		_, err := h.SetCurrentVersion(ctx, client.WorkerDeploymentSetCurrentVersionOptions{BuildID: build})
		return err
	})
}

// untilAccepted retries a change of a Worker Deployment for 90 s, every
// 500 ms, until the server accepts it: a build must have polled every task
// queue the current version polls before it may be made current or ramp.
func untilAccepted(ctx context.Context, t *testing.T, what string, change func() error) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		err := change()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		sleepCtx(ctx, 500*time.Millisecond)
	}
}

// histories is what the runs of a task queue recorded.
type histories struct {
	runs int
	// failed counts the failed workflow tasks but those the server refused
	// because events came while they ran (UnhandledCommand: a completion
	// or continue-as-new with a signal pending; the next task handles the
	// signal), which refused counts.
	failed, refused int
	// bothBuilds counts the runs with workflow tasks completed by both
	// builds.
	bothBuilds int
	// versions counts the runs by the version of
	// workflows.ChangeLocalActivities they recorded.
	versions map[int]int
}

// scanHistories reads the history of every run on the task queue.
func scanHistories(ctx context.Context, t *testing.T, c client.Client, taskQueue string) histories {
	t.Helper()
	h := histories{versions: map[int]int{}}
	eachRun(ctx, t, c, taskQueue, func(workflowID string, events []*historypb.HistoryEvent) {
		h.runs++
		builds := map[string]bool{}
		for _, ev := range events {
			switch ev.GetEventType() {
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED:
				a := ev.GetWorkflowTaskFailedEventAttributes()
				if a.GetCause() == enumspb.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND {
					h.refused++
					continue
				}
				h.failed++
				t.Logf("%s: workflow task failed (%s): %s", workflowID, a.GetCause(), a.GetFailure().GetMessage())
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
				builds[ev.GetWorkflowTaskCompletedEventAttributes().GetDeploymentVersion().GetBuildId()] = true
			case enumspb.EVENT_TYPE_MARKER_RECORDED:
				if v, ok := versionMarker(ev.GetMarkerRecordedEventAttributes()); ok {
					h.versions[v]++
				}
			}
		}
		if builds["a"] && builds["b"] {
			h.bothBuilds++
		}
	})
	return h
}

// eachRun calls f with the workflow ID and the history of every run on the
// task queue.
func eachRun(ctx context.Context, t *testing.T, c client.Client, taskQueue string, f func(workflowID string, events []*historypb.HistoryEvent)) {
	t.Helper()
	var token []byte
	for {
		res, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf("TaskQueue = '%s'", taskQueue), NextPageToken: token, PageSize: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range res.GetExecutions() {
			var events []*historypb.HistoryEvent
			it := c.GetWorkflowHistory(ctx, e.GetExecution().GetWorkflowId(), e.GetExecution().GetRunId(), false,
				enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			for it.HasNext() {
				ev, err := it.Next()
				if err != nil {
					t.Fatal(err)
				}
				events = append(events, ev)
			}
			f(e.GetExecution().GetWorkflowId(), events)
		}
		if token = res.GetNextPageToken(); len(token) == 0 {
			return
		}
	}
}

// versionMarker returns the version a GetVersion marker of
// workflows.ChangeLocalActivities recorded.
func versionMarker(m *historypb.MarkerRecordedEventAttributes) (int, bool) {
	if m.GetMarkerName() != "Version" {
		return 0, false
	}
	var id string
	var v int
	dc := converter.GetDefaultDataConverter()
	if p := m.GetDetails()["change-id"]; p == nil || dc.FromPayloads(p, &id) != nil || id != workflows.ChangeLocalActivities {
		return 0, false
	}
	if p := m.GetDetails()["version"]; p == nil || dc.FromPayloads(p, &v) != nil {
		return 0, false
	}
	return v, true
}

// sendTimes are the times the broker acknowledged the first message of
// each business key.
type sendTimes struct {
	mu    sync.Mutex
	first map[string]time.Time // "order_id@version"
}

// timingPublisher records, for each message the broker acknowledged, when
// its business key was first sent.
type timingPublisher struct {
	p    scenario.Publisher
	sent *sendTimes
}

func (tp timingPublisher) Publish(ctx context.Context, m mq.Message) (mq.Receipt, error) {
	rc, err := tp.p.Publish(ctx, m)
	var body struct {
		OrderID string `json:"order_id"`
		Version int64  `json:"version"`
	}
	if err == nil && json.Unmarshal(m.Body, &body) == nil && body.OrderID != "" {
		k := fmt.Sprintf("%s@%d", body.OrderID, body.Version)
		tp.sent.mu.Lock()
		if _, ok := tp.sent.first[k]; !ok {
			tp.sent.first[k] = time.Now()
		}
		tp.sent.mu.Unlock()
	}
	return rc, err
}

// p99 is the 99th percentile, over the business keys first sent in
// [from, to), of the time from the send to the key's order_events row, and
// the number of those keys.
func (s *sendTimes) p99(t *testing.T, db *gorm.DB, from, to time.Time) (time.Duration, int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	rows, err := db.Raw(`SELECT order_id, version, first_seen_at FROM order_events`).Rows()
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var lat []time.Duration
	for rows.Next() {
		var id string
		var v int64
		var at time.Time
		if err := rows.Scan(&id, &v, &at); err != nil {
			t.Fatal(err)
		}
		sent, ok := s.first[fmt.Sprintf("%s@%d", id, v)]
		if ok && !sent.Before(from) && sent.Before(to) {
			lat = append(lat, at.Sub(sent))
		}
	}
	if len(lat) == 0 {
		return 0, 0
	}
	slices.Sort(lat)
	return lat[min(len(lat)-1, len(lat)*99/100)], len(lat)
}
