package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"

	"github.com/orderflow/orderflow/internal/procs"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/scenario"
	"github.com/orderflow/orderflow/workflows"
)

// TestRolloutAcrossReleases upgrades from the previous release (CHANGELOG.md's
// newest, built from its commit) to this code, rolls back and rolls forward
// again, under a steady stream, the way the chart does it: this code's
// worker joins as a new build writing the workflow version the previous
// release replays, takes a share of the runs (ramp), is made current,
// then the bridges are switched (workers before bridges) and the old
// workers stop; the rollback makes the previous release current again
// and switches the bridges back; then forward again. Two starting points:
// the previous release as a version of the same Worker Deployment, and the
// previous release unversioned (the first upgrade of a user who ran it
// without Worker Versioning), whose rollback makes unversioned workers
// current again. The independent checker judges each run (nothing lost,
// nothing twice, orders and points as the scenario says), and the engine's
// histories must show no failed workflow task in any phase.
func TestRolloutAcrossReleases(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end runs of minutes; skipped with -short")
	}
	rel := testenv.PreviousRelease(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	oldWorker, oldStarter := buildRelease(ctx, t, rel)
	newWorker, newStarter := buildBinaries(t)
	for _, versioned := range []bool{true, false} {
		name := map[bool]string{true: "from-versioned", false: "from-unversioned"}[versioned]
		t.Run(name, func(t *testing.T) {
			testRollout(ctx, t, rel, versioned, [2]string{oldWorker, oldStarter}, [2]string{newWorker, newStarter})
		})
	}
}

// rolloutPhase is a span of the rollout, from its first step.
type rolloutPhase struct {
	name  string
	start time.Time
}

func testRollout(ctx context.Context, t *testing.T, rel testenv.Release, versioned bool, oldBins, newBins [2]string) {
	gdb, dsn := testenv.NewDatabase(t)
	namesrv := testenv.RocketMQNamesrv(t)
	tc := testenv.RequireTemporal(t)
	pl := newPipelineWith(t, "release", dsn, namesrv, oldBins[0], oldBins[1])
	deployment := uniq.Name("release-dep")
	oldEnv := pl.env
	if versioned {
		oldEnv = pl.with("ORDERFLOW_WORKER_DEPLOYMENT_NAME="+deployment, "ORDERFLOW_WORKER_BUILD_ID=old")
	}
	// As the chart runs a new build until it is named current: it writes
	// what the previous release replays.
	newEnv := pl.with("ORDERFLOW_WORKER_DEPLOYMENT_NAME="+deployment, "ORDERFLOW_WORKER_BUILD_ID=new",
		fmt.Sprintf("ORDERFLOW_WORKER_WORKFLOW_VERSION=%d", workflows.PreviousReleaseVersion))
	oldW, oldB := pl.procs(t, oldEnv, pl.env)
	newW := newProc(t, "worker-new", newBins[0], "ORDERFLOW_WORKER_METRICS_ADDR", newEnv)
	newB := newProc(t, "bridge-new", newBins[1], "ORDERFLOW_BRIDGE_METRICS_ADDR", pl.env)
	t.Cleanup(func() {
		stop(t, newB)
		stop(t, newW)
		if t.Failed() {
			t.Logf("worker-new log (tail):\n%s", newW.Tail(6000))
			t.Logf("bridge-new log (tail):\n%s", newB.Tail(6000))
		}
	})
	oldBuild := ""
	if versioned {
		oldBuild = "old"
	}
	for _, p := range []*procs.Proc{oldW, oldB} {
		if err := p.Start(ctx); err != nil {
			t.Fatalf("release %s: %v\n%s", rel.Name, err, p.Tail(4000))
		}
	}
	if versioned {
		setCurrent(ctx, t, tc, deployment, oldBuild)
	}

	s, err := scenario.Generate(scenario.Options{Orders: 300, Seed: time.Now().UnixNano(), Prefix: pl.prefix, Start: time.Now(),
		DupRate: 0.2, Reorder: 0.3, CancelRate: 0.2, OpenRate: 0.1, UpdateRate: 0.2, GapRate: 0.05,
		UserChangeRate: 0.3, Conflicts: 5, Bad: 6})
	if err != nil {
		t.Fatal(err)
	}
	producer := newProducer(t, namesrv, "release", nil)
	const rate = 30.0
	pubDone := make(chan error, 1)
	began := time.Now()
	go func() {
		pubDone <- scenario.Publish(ctx, producer, s.Messages, scenario.PublishOptions{Topic: pl.topic, Rate: rate})
	}()

	start := func(p *procs.Proc) func() error { return func() error { return p.Start(ctx) } }
	stopP := func(p *procs.Proc) func() error {
		return func() error { _, _, err := p.Stop(45 * time.Second); return err }
	}
	current := func(build string) func() error {
		return func() error { setCurrent(ctx, t, tc, deployment, build); return nil }
	}
	ramp := func(build string, pct float32) func() error {
		return func() error {
			untilAccepted(ctx, t, fmt.Sprintf("ramp build %s to %v%%", build, pct), func() error {
				_, err := tc.WorkerDeploymentClient().GetHandle(deployment).SetRampingVersion(ctx,
					client.WorkerDeploymentSetRampingVersionOptions{BuildID: build, Percentage: pct})
				return err
			})
			return nil
		}
	}
	type step struct {
		at    time.Duration
		phase string // a new phase starts with this step
		what  string
		do    func() error
	}
	upgrade := []step{
		{6 * time.Second, "upgrade", "start this code's worker (build new)", start(newW)},
		{8 * time.Second, "", "ramp build new to 50%", ramp("new", 50)},
		{14 * time.Second, "", "make build new current", current("new")},
		{16 * time.Second, "", "start this code's bridge", start(newB)},
		{18 * time.Second, "", "stop the previous release's bridge", stopP(oldB)},
		{20 * time.Second, "", "stop the previous release's worker", stopP(oldW)},
		{26 * time.Second, "rollback", "start the previous release's worker", start(oldW)},
		{28 * time.Second, "", "make the previous release current", current(oldBuild)},
		{30 * time.Second, "", "start the previous release's bridge", start(oldB)},
		{32 * time.Second, "", "stop this code's bridge", stopP(newB)},
		{34 * time.Second, "", "stop this code's worker", stopP(newW)},
		{40 * time.Second, "forward", "start this code's worker again", start(newW)},
		{42 * time.Second, "", "make build new current again", current("new")},
		{44 * time.Second, "", "start this code's bridge again", start(newB)},
		{46 * time.Second, "", "stop the previous release's bridge", stopP(oldB)},
		{48 * time.Second, "", "stop the previous release's worker", stopP(oldW)},
	}
	if !versioned {
		// An unversioned release takes no ramp: the deployment's first
		// version becomes current at once.
		upgrade = append(upgrade[:1], upgrade[2:]...)
	}
	phases := []rolloutPhase{{"before", began}}
	for _, st := range upgrade {
		sleepCtx(ctx, time.Until(began.Add(st.at)))
		if st.phase != "" {
			phases = append(phases, rolloutPhase{st.phase, time.Now()})
		}
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.what, err)
		}
		t.Logf("+%s: %s", time.Since(began).Round(100*time.Millisecond), st.what)
	}
	if err := <-pubDone; err != nil {
		t.Fatalf("publish: %v", err)
	}
	report := settle(ctx, t, gdb, s.Expected.FirstPhase(), "after the upgrade, the rollback and the upgrade again")
	failed, refused, runs, both := failedTasksByPhase(ctx, t, tc, pl.taskQueue, phases, oldBuild, "new")
	total := 0
	var byPhase []string
	for _, p := range phases {
		total += failed[p.name]
		byPhase = append(byPhase, fmt.Sprintf("%s %d", p.name, failed[p.name]))
	}
	if total != 0 {
		t.Errorf("workflow tasks failed by phase: %s; want none", strings.Join(byPhase, ", "))
	}
	// The runs followed the current version: back to the release and forward.
	if both == 0 {
		t.Errorf("no run had workflow tasks completed by both the release and this code (%d runs)", runs)
	}
	for name, p := range map[string]*procs.Proc{"the release's worker": oldW, "the release's bridge": oldB,
		"this code's worker": newW, "this code's bridge": newB} {
		if x := p.Crashes(); len(x) > 0 {
			t.Errorf("%s crashed: %s", name, strings.Join(x, "; "))
		}
	}
	t.Logf("release %s (%s, %s) to this code and back and forward: %d messages, %d runs (%d with tasks on both); "+
		"failed workflow tasks by phase: %s (and %d completions refused for a signal meanwhile):\n%s",
		rel.Name, rel.Commit, map[bool]string{true: "versioned", false: "unversioned"}[versioned], len(s.Messages), runs, both,
		strings.Join(byPhase, ", "), refused, report)
}

// failedTasksByPhase counts the failed workflow tasks of the task queue's
// runs by the phase their failure falls in (the last phase started before
// it), and apart those the server refused because a signal came while they
// ran (UnhandledCommand, the engine's way of handing a run its new events);
// both counts the runs with workflow tasks completed by build a and by
// build b ("" for unversioned workers).
func failedTasksByPhase(ctx context.Context, t *testing.T, c client.Client, taskQueue string, phases []rolloutPhase,
	a, b string) (failed map[string]int, refused, runs, both int) {
	t.Helper()
	failed = map[string]int{}
	eachRun(ctx, t, c, taskQueue, func(workflowID string, events []*historypb.HistoryEvent) {
		runs++
		builds := map[string]bool{}
		for _, ev := range events {
			switch ev.GetEventType() {
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
				builds[ev.GetWorkflowTaskCompletedEventAttributes().GetDeploymentVersion().GetBuildId()] = true
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED:
				f := ev.GetWorkflowTaskFailedEventAttributes()
				if f.GetCause() == enumspb.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND {
					refused++
					continue
				}
				phase := phases[0].name
				for _, p := range phases {
					if !ev.GetEventTime().AsTime().Before(p.start) {
						phase = p.name
					}
				}
				failed[phase]++
				t.Logf("%s: workflow task failed in phase %s (%s): %s", workflowID, phase, f.GetCause(), f.GetFailure().GetMessage())
			}
		}
		if builds[a] && builds[b] {
			both++
		}
	})
	return failed, refused, runs, both
}
