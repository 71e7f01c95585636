package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/worker"

	"github.com/orderflow/orderflow/api"
	"github.com/orderflow/orderflow/internal/procs"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/internal/workflowtest"
	"github.com/orderflow/orderflow/workflows"
)

// clearSettings removes, for the test, every variable the worker's
// settings read (ORDERFLOW_*, TEMPORAL_*, ROCKETMQ_*, DATABASE_URL,
// REDIS_URL), and points the home and configuration directories at an empty
// one (Temporal's client configuration file), so that the defaults the test
// asserts are the program's, whatever the environment running it sets.
func clearSettings(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "ORDERFLOW_") || strings.HasPrefix(k, "TEMPORAL_") || strings.HasPrefix(k, "ROCKETMQ_") ||
			k == "DATABASE_URL" || k == "REDIS_URL" {
			t.Setenv(k, "") // restored when the test ends
			if err := os.Unsetenv(k); err != nil {
				t.Fatal(err)
			}
		}
	}
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", home)
}

func TestParseDefaultsEnvAndFlags(t *testing.T) {
	clearSettings(t)
	t.Setenv("ORDERFLOW_TASK_QUEUE", "from-env")
	t.Setenv("ORDERFLOW_WORKER_METRICS_ADDR", "127.0.0.1:9999")
	t.Setenv("ORDERFLOW_CONSUMER_GROUP", "from-env-group")
	cfg, o, err := parse(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TaskQueue != "from-env" || o.MetricsAddr != "127.0.0.1:9999" || o.StopTimeout != 30*time.Second {
		t.Errorf("from env: task queue %q metrics %q stop %v", cfg.TaskQueue, o.MetricsAddr, o.StopTimeout)
	}
	if cfg.ConsumerGroup != "from-env-group" || o.BrokerLagInterval != 15*time.Second {
		t.Errorf("from env: consumer group %q, broker lag interval %v", cfg.ConsumerGroup, o.BrokerLagInterval)
	}
	if opts, err := cfg.TemporalClientOptions(); err != nil || opts.HostPort != "127.0.0.1:7233" {
		t.Errorf("default temporal address %q (%v)", opts.HostPort, err)
	}
	cfg, o, err = parse([]string{"-task-queue", "from-flag", "-metrics-addr", ":0", "-stop-timeout", "5s",
		"-max-concurrent-activities", "7"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TaskQueue != "from-flag" || o.MetricsAddr != ":0" || o.StopTimeout != 5*time.Second || o.MaxActivities != 7 {
		t.Errorf("from flags: %+v %+v", cfg, o)
	}
}

func TestParseStickyCacheSize(t *testing.T) {
	clearSettings(t)
	_, o, err := parse(nil, io.Discard)
	if err != nil || o.StickyCacheSize != 0 {
		t.Fatalf("default sticky cache size %d (%v), want 0 (the SDK's default)", o.StickyCacheSize, err)
	}
	t.Setenv("ORDERFLOW_WORKER_STICKY_CACHE_SIZE", "250")
	if _, o, err = parse(nil, io.Discard); err != nil || o.StickyCacheSize != 250 {
		t.Errorf("from env: sticky cache size %d (%v), want 250", o.StickyCacheSize, err)
	}
	if _, o, err = parse([]string{"-sticky-cache-size", "7"}, io.Discard); err != nil || o.StickyCacheSize != 7 {
		t.Errorf("from the flag over env: sticky cache size %d (%v), want 7", o.StickyCacheSize, err)
	}
}

func TestParseRejectsBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"-max-concurrent-activities", "-1"},
		{"-db-max-open-conns", "0"},
		{"-sticky-cache-size", "-1"},
		{"-stop-timeout", "soon"},
		{"-broker-lag-interval", "-1s"},
		{"-consumer-group", ""},
		{"-rocketmq-namesrv", " "},
		{"-no-such-flag"},
		{"extra"},
		{"-workflow-version", "3"},
		{"-workflow-version", fmt.Sprint(workflows.LatestVersion + 1)},
	} {
		if _, _, err := parse(args, io.Discard); err == nil {
			t.Errorf("parse(%q) succeeded", args)
		}
	}
	// Without the broker-side lag, no RocketMQ setting is needed.
	if _, _, err := parse([]string{"-broker-lag-interval", "0", "-consumer-group", ""}, io.Discard); err != nil {
		t.Errorf("-broker-lag-interval 0 with no consumer group: %v", err)
	}
	if _, _, err := parse([]string{"-h"}, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: err = %v", err)
	}
	t.Setenv("ORDERFLOW_WORKER_STOP_TIMEOUT", "forever")
	if _, _, err := parse(nil, io.Discard); err == nil || !strings.Contains(err.Error(), "ORDERFLOW_WORKER_STOP_TIMEOUT") {
		t.Errorf("bad %s: err = %v", "ORDERFLOW_WORKER_STOP_TIMEOUT", err)
	}
}

// Worker Versioning is off without a deployment name; with one, the build
// ID is the one given, and new runs record the workflow version asked for.
func TestParseVersioning(t *testing.T) {
	_, o, err := parse(nil, io.Discard)
	if err != nil || deploymentOptions(o).UseVersioning || o.WorkflowVersion != workflows.LatestVersion {
		t.Fatalf("defaults: %+v, %v; want versioning off and workflow version %d", o, err, workflows.LatestVersion)
	}
	_, o, err = parse([]string{"-deployment-name", "orderflow", "-build-id", "b-7", "-workflow-version",
		fmt.Sprint(workflows.OldestWriteVersion)}, io.Discard)
	d := deploymentOptions(o)
	if err != nil || !d.UseVersioning || d.Version.DeploymentName != "orderflow" || d.Version.BuildID != "b-7" ||
		o.WorkflowVersion != workflows.OldestWriteVersion {
		t.Errorf("versioned: %+v, %v", d, err)
	}
}

// buildOnce builds the worker binary once per test binary run.
var buildOnce struct {
	sync.Once
	dir, path string
	err       error
}

func workerBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if buildOnce.dir, buildOnce.err = os.MkdirTemp("", "orderflow-worker-bin-"); buildOnce.err != nil {
			return
		}
		buildOnce.path, buildOnce.err = procs.Build(context.Background(), "github.com/orderflow/orderflow/worker", buildOnce.dir)
	})
	if buildOnce.err != nil {
		t.Fatalf("go build worker: %v", buildOnce.err)
	}
	return buildOnce.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildOnce.dir != "" {
		_ = os.RemoveAll(buildOnce.dir)
	}
	os.Exit(code)
}

// proc is a worker process started by a test.
type proc struct {
	*procs.Proc
	t    *testing.T
	addr string // host:port of its HTTP endpoints
}

// startWorker runs the worker binary against the database and task queue,
// with its HTTP endpoints on a free port, and waits until it polls.
func startWorker(t *testing.T, dsn, taskQueue string, extra ...string) *proc {
	t.Helper()
	args := append([]string{"-metrics-addr", "127.0.0.1:0", "-stop-timeout", "20s"}, extra...)
	p := &proc{t: t, Proc: procs.New(procs.Spec{Name: "worker", Path: workerBinary(t), Args: args,
		Env:         []string{"DATABASE_URL=" + dsn, "ORDERFLOW_TASK_QUEUE=" + taskQueue, "ORDERFLOW_LOG_LEVEL=info"},
		ReadyOutput: `"msg":"worker polling"`, ReadyTimeout: 60 * time.Second})}
	t.Cleanup(func() {
		if p.Running() {
			_ = p.Kill()
		}
		if t.Failed() {
			t.Logf("worker pid %d log (tail):\n%s", p.Pid(), p.Tail(4000))
		}
	})
	if err := p.Start(context.Background()); err != nil {
		t.Fatalf("start worker: %v\n%s", err, p.Output())
	}
	// The address it listens on is in its "worker polling" line.
	for _, line := range strings.Split(p.Output(), "\n") {
		var rec struct {
			Msg  string `json:"msg"`
			HTTP string `json:"http"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "worker polling" {
			p.addr = rec.HTTP
			return p
		}
	}
	t.Fatalf("worker did not log its polling with its address\n%s", p.Output())
	return nil
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait(limit time.Duration) int {
	p.t.Helper()
	select {
	case <-p.Done():
	case <-time.After(limit):
		p.t.Fatalf("worker did not exit within %v", limit)
	}
	return p.ExitCode()
}

func (p *proc) get(path string) (int, string) {
	p.t.Helper()
	resp, err := http.Get("http://" + p.addr + path)
	if err != nil {
		p.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// ready polls /readyz until it answers 200, for up to 20 s, and returns
// the last answer: the readiness checks run in the background, and their
// first run may end after the worker has logged that it polls.
func (p *proc) ready() (int, string) {
	p.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, body := p.get("/readyz")
		if code == http.StatusOK || time.Now().After(deadline) {
			return code, body
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// runWorker runs the worker binary with args until it exits and returns its
// exit code, its output, and an error when it could not be started.
func runWorker(t *testing.T, args ...string) (code int, out string, err error) {
	t.Helper()
	code, out, err = procs.Run(context.Background(), procs.Spec{Name: "worker", Path: workerBinary(t), Args: args})
	return code, out, err
}

// TestWorkerSurvivesSIGKILL runs the worker binary on a fresh database and
// a unique task queue, kills it with SIGKILL in the middle of a stream of
// 100 orders' shuffled and duplicated events, starts it again, and checks
// the invariants and the state queries. The second process is then stopped
// with SIGTERM and must exit cleanly.
func TestWorkerSurvivesSIGKILL(t *testing.T) {
	c := testenv.RequireTemporal(t)
	db, dsn := testenv.NewDatabase(t)
	tq := uniq.Name("wk-kill")
	sc := workflowtest.Scenario(t, uniq.Name("wkk"), 100, 7)
	t.Cleanup(func() { workflowtest.TerminateAll(c, &sc.Expected, "test finished") })

	first := startWorker(t, dsn, tq)
	if code, body := first.get("/healthz"); code != 200 {
		t.Fatalf("/healthz = %d %s", code, body)
	}
	if code, body := first.ready(); code != 200 || !strings.Contains(body, `"name":"postgres","ok":true`) ||
		!strings.Contains(body, `"name":"temporal","ok":true`) {
		t.Fatalf("/readyz = %d %s", code, body)
	}

	total := int64(len(sc.Messages) - sc.Expected.Counts.Bad)
	var killed atomic.Bool
	killAt := total / 3
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	err := workflowtest.DeliverAll(ctx, c, tq, workflows.DefaultParams(), sc.Messages, 4, func(n int64) {
		if n == killAt && killed.CompareAndSwap(false, true) {
			if err := first.Kill(); err != nil {
				t.Errorf("SIGKILL: %v", err)
			}
		}
	})
	if err != nil {
		t.Fatalf("deliver: %v", err)
	}
	if !killed.Load() {
		t.Fatal("the worker was never killed")
	}
	if code := first.wait(10 * time.Second); code != -1 {
		t.Errorf("killed worker exit code %d, want -1 (signal)", code)
	}
	second := startWorker(t, dsn, tq)
	workflowtest.WaitSettled(t, db, sc.Expected.FirstPhase(), 100*time.Second)
	lateCtx, lateCancel := context.WithTimeout(context.Background(), time.Minute)
	defer lateCancel()
	if err := workflowtest.DeliverAll(lateCtx, c, tq, workflows.DefaultParams(), sc.Late, 4, nil); err != nil {
		t.Fatalf("deliver the late phase: %v", err)
	}
	rep := workflowtest.WaitSettled(t, db, &sc.Expected, 100*time.Second)
	t.Logf("killed after %d of %d deliveries; settled %v after start; orders %v outcomes %v points %d",
		killAt, total, time.Since(start).Round(time.Millisecond), rep.OrdersByStatus, rep.EventsByOutcome, rep.Points)
	workflowtest.CheckQueries(t, c, db, &sc.Expected)

	// The project's and the SDK's metrics are exported.
	_, metrics := second.get("/metrics")
	for _, want := range []string{`orderflow_events_total{outcome="applied"}`, "orderflow_points_awarded_total",
		"temporal_workflow_task_execution_latency", "temporal_local_activity_execution_latency"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// Activity latency is the SDK's, as a histogram per activity type.
	found := false
	for _, line := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(line, "temporal_local_activity_execution_latency") && strings.Contains(line, "_bucket{") &&
			strings.Contains(line, `activity_type="`+api.ActivityApplyEventAndAward+`"`) {
			found = true
			break
		}
	}
	if !found {
		t.Errorf("/metrics has no histogram of %s's local activity latency", api.ActivityApplyEventAndAward)
	}

	code, _, err := second.Stop(30 * time.Second)
	if err != nil {
		t.Fatalf("worker did not exit within 30s of SIGTERM: %v", err)
	}
	if code != 0 {
		t.Errorf("SIGTERM: exit code %d, want 0", code)
	}
	log := second.Output()
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		if !json.Valid([]byte(line)) {
			t.Errorf("log line is not JSON: %s", line)
			break
		}
	}
	for _, want := range []string{`"msg":"shutdown requested; letting running activities finish"`, `"msg":"worker stopped"`} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %s", want)
		}
	}
}

// TestWorkerFailsClearlyOnBadDatabase: a database that cannot be reached
// stops the worker at start with an error naming the problem.
func TestWorkerFailsClearlyOnBadDatabase(t *testing.T) {
	code, out, err := runWorker(t, "-metrics-addr", "127.0.0.1:0",
		"-database-url", "postgres://orderflow:orderflow@127.0.0.1:1/none?sslmode=disable&connect_timeout=2")
	if code != 1 {
		t.Fatalf("worker with a bad database: err %v\n%s", err, out)
	}
	if !strings.Contains(out, "worker: open database: ") || !strings.Contains(out, "127.0.0.1:1") {
		t.Errorf("error does not say what failed:\n%s", out)
	}
}

// TestWorkerRejectsBadFlag exits with an error for an unknown flag.
func TestWorkerRejectsBadFlag(t *testing.T) {
	code, out, err := runWorker(t, "-no-such-flag")
	if code == 0 || !strings.Contains(out, "no-such-flag") {
		t.Fatalf("err %v\n%s", err, out)
	}
}

// TestWorkerStickyCacheSize runs the worker with a sticky cache of 3
// workflow executions while 20 orders' workflows are open: the cache must
// hold no more than 3, evict the others, and every invariant must still
// hold (the evicted workflows replay their histories on their next task).
func TestWorkerStickyCacheSize(t *testing.T) {
	const orders, cacheSize = 20, 3
	c := testenv.RequireTemporal(t)
	db, dsn := testenv.NewDatabase(t)
	tq := uniq.Name("wk-sticky")
	sc := workflowtest.Scenario(t, uniq.Name("wks"), orders, 11)
	t.Cleanup(func() { workflowtest.TerminateAll(c, &sc.Expected, "test finished") })

	w := startWorker(t, dsn, tq, "-sticky-cache-size", strconv.Itoa(cacheSize))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := workflowtest.DeliverAll(ctx, c, tq, workflows.DefaultParams(), sc.Messages, 4, nil); err != nil {
		t.Fatalf("deliver: %v", err)
	}
	workflowtest.WaitSettled(t, db, sc.Expected.FirstPhase(), 100*time.Second)

	_, metrics := w.get("/metrics")
	size := metricSum(metrics, "temporal_sticky_cache_size")
	evicted := metricSum(metrics, "temporal_sticky_cache_total_forced_eviction_total")
	t.Logf("sticky cache: size %v, forced evictions %v, hits %v, misses %v", size, evicted,
		metricSum(metrics, "temporal_sticky_cache_hit_total"), metricSum(metrics, "temporal_sticky_cache_miss_total"))
	if size < 1 || size > cacheSize {
		t.Errorf("temporal_sticky_cache_size = %v with -sticky-cache-size %d", size, cacheSize)
	}
	if evicted < 1 {
		t.Errorf("no forced eviction from a cache of %d with %d open workflows", cacheSize, orders)
	}
	logged := false
	for _, line := range strings.Split(w.Output(), "\n") {
		logged = logged || strings.Contains(line, `"msg":"sticky workflow cache"`) && strings.Contains(line, fmt.Sprintf(`"size":%d`, cacheSize))
	}
	if !logged {
		t.Errorf("the worker did not log its sticky cache size")
	}
}

// TestWorkerPollerAutoscaling: a worker whose pollers scale settles a
// scenario's orders, and says how it polls.
func TestWorkerPollerAutoscaling(t *testing.T) {
	const orders = 20
	c := testenv.RequireTemporal(t)
	db, dsn := testenv.NewDatabase(t)
	tq := uniq.Name("wk-autoscale")
	sc := workflowtest.Scenario(t, uniq.Name("wka"), orders, 13)
	t.Cleanup(func() { workflowtest.TerminateAll(c, &sc.Expected, "test finished") })

	w := startWorker(t, dsn, tq, "-poller-autoscaling", "-workflow-pollers", "8")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := workflowtest.DeliverAll(ctx, c, tq, workflows.DefaultParams(), sc.Messages, 4, nil); err != nil {
		t.Fatalf("deliver: %v", err)
	}
	workflowtest.WaitSettled(t, db, sc.Expected.FirstPhase(), 100*time.Second)
	if !strings.Contains(w.Output(), `"poller_autoscaling":true`) {
		t.Errorf("the worker did not log that its pollers scale")
	}
}

// metricSum adds the values of the samples of metric in Prometheus text.
func metricSum(text, metric string) float64 {
	var total float64
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, metric+"{") && !strings.HasPrefix(line, metric+" ") {
			continue
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			total += v
		}
	}
	return total
}

// TestParseMetricsAddrLoopback: by default /metrics, /healthz and /readyz
// listen on loopback only; containers set 0.0.0.0 explicitly.
func TestParseMetricsAddrLoopback(t *testing.T) {
	clearSettings(t)
	_, o, err := parse(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.MetricsAddr != "127.0.0.1:9090" {
		t.Errorf("default metrics address %q, want 127.0.0.1:9090", o.MetricsAddr)
	}
}

func TestParsePollerAutoscaling(t *testing.T) {
	clearSettings(t)
	_, o, err := parse(nil, io.Discard)
	if err != nil || o.PollerAutoscaling {
		t.Fatalf("default poller autoscaling %v (%v), want off", o.PollerAutoscaling, err)
	}
	t.Setenv("ORDERFLOW_WORKER_POLLER_AUTOSCALING", "true")
	if _, o, err = parse(nil, io.Discard); err != nil || !o.PollerAutoscaling {
		t.Errorf("from env: poller autoscaling %v (%v), want on", o.PollerAutoscaling, err)
	}
	if _, o, err = parse([]string{"-poller-autoscaling=false"}, io.Discard); err != nil || o.PollerAutoscaling {
		t.Errorf("from the flag over env: poller autoscaling %v (%v), want off", o.PollerAutoscaling, err)
	}
}

// TestSetPollers: fixed pollers set the SDK's maximums and no behaviour;
// autoscaling sets both behaviours and no maximum (the SDK refuses both).
func TestSetPollers(t *testing.T) {
	var fixed worker.Options
	setPollers(&fixed, options{ActivityPollers: 3, WorkflowPollers: 5})
	if fixed.MaxConcurrentActivityTaskPollers != 3 || fixed.MaxConcurrentWorkflowTaskPollers != 5 ||
		fixed.ActivityTaskPollerBehavior != nil || fixed.WorkflowTaskPollerBehavior != nil {
		t.Errorf("fixed: %+v", fixed)
	}
	var scaled worker.Options
	setPollers(&scaled, options{ActivityPollers: 3, WorkflowPollers: 5, PollerAutoscaling: true})
	if scaled.MaxConcurrentActivityTaskPollers != 0 || scaled.MaxConcurrentWorkflowTaskPollers != 0 ||
		scaled.ActivityTaskPollerBehavior == nil || scaled.WorkflowTaskPollerBehavior == nil {
		t.Errorf("autoscaling: %+v", scaled)
	}
}
