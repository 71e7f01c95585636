package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/workflowtest"
	"github.com/orderflow/orderflow/workflows"
)

func TestParseDefaultsEnvAndFlags(t *testing.T) {
	t.Setenv("ORDERFLOW_TASK_QUEUE", "from-env")
	t.Setenv("ORDERFLOW_WORKER_METRICS_ADDR", "127.0.0.1:9999")
	cfg, o, err := parse(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TaskQueue != "from-env" || o.MetricsAddr != "127.0.0.1:9999" || o.StopTimeout != 30*time.Second {
		t.Errorf("from env: task queue %q metrics %q stop %v", cfg.TaskQueue, o.MetricsAddr, o.StopTimeout)
	}
	if opts, err := cfg.TemporalClientOptions(); err != nil || (opts.HostPort != "127.0.0.1:7233" && os.Getenv("TEMPORAL_ADDRESS") == "") {
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

func TestParseRejectsBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"-max-concurrent-activities", "-1"},
		{"-db-max-open-conns", "0"},
		{"-stop-timeout", "soon"},
		{"-no-such-flag"},
		{"extra"},
	} {
		if _, _, err := parse(args, io.Discard); err == nil {
			t.Errorf("parse(%q) succeeded", args)
		}
	}
	if _, _, err := parse([]string{"-h"}, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: err = %v", err)
	}
	t.Setenv("ORDERFLOW_WORKER_STOP_TIMEOUT", "forever")
	if _, _, err := parse(nil, io.Discard); err == nil || !strings.Contains(err.Error(), "ORDERFLOW_WORKER_STOP_TIMEOUT") {
		t.Errorf("bad %s: err = %v", "ORDERFLOW_WORKER_STOP_TIMEOUT", err)
	}
}

// buildWorker builds the worker binary once per test binary run.
var buildOnce struct {
	sync.Once
	path string
	err  error
	out  []byte
}

func workerBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "orderflow-worker-bin-")
		if err != nil {
			buildOnce.err = err
			return
		}
		buildOnce.path = filepath.Join(dir, "worker")
		cmd := exec.Command("go", "build", "-o", buildOnce.path, ".")
		buildOnce.out, buildOnce.err = cmd.CombinedOutput()
	})
	if buildOnce.err != nil {
		t.Fatalf("go build worker: %v\n%s", buildOnce.err, buildOnce.out)
	}
	return buildOnce.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildOnce.path != "" {
		_ = os.RemoveAll(filepath.Dir(buildOnce.path))
	}
	os.Exit(code)
}

// proc is a worker process started by a test.
type proc struct {
	t    *testing.T
	cmd  *exec.Cmd
	addr string // host:port of its HTTP endpoints
	done chan error
	log  *lockedBuffer
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startWorker runs the worker binary against the database and task queue,
// with its HTTP endpoints on a free port, and waits until it polls.
func startWorker(t *testing.T, dsn, taskQueue string, extra ...string) *proc {
	t.Helper()
	args := append([]string{"-metrics-addr", "127.0.0.1:0", "-stop-timeout", "20s"}, extra...)
	cmd := exec.Command(workerBinary(t), args...)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dsn, "ORDERFLOW_TASK_QUEUE="+taskQueue, "ORDERFLOW_LOG_LEVEL=info")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, cmd: cmd, done: make(chan error, 1), log: &lockedBuffer{}}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start worker: %v", err)
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.log.Write([]byte(line + "\n"))
			var rec struct {
				Msg  string `json:"msg"`
				HTTP string `json:"http"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "worker polling" {
				select {
				case ready <- rec.HTTP:
				default:
				}
			}
		}
		p.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("worker pid %d log (tail):\n%s", cmd.Process.Pid, tail(p.log.String(), 4000))
		}
	})
	select {
	case p.addr = <-ready:
	case err := <-p.done:
		p.done <- err
		t.Fatalf("worker exited before polling: %v\n%s", err, p.log.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("worker did not start polling within 60s\n%s", p.log.String())
	}
	return p
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait(limit time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(limit):
		p.t.Fatalf("worker did not exit within %v", limit)
	}
	return p.cmd.ProcessState.ExitCode()
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

// TestWorkerSurvivesSIGKILL runs the worker binary on a fresh database and
// a unique task queue, kills it with SIGKILL in the middle of a stream of
// 100 orders' shuffled and duplicated events, starts it again, and checks
// the invariants and the state queries. The second process is then stopped
// with SIGTERM and must exit cleanly.
func TestWorkerSurvivesSIGKILL(t *testing.T) {
	c := testenv.RequireTemporal(t)
	db, dsn := testenv.NewDatabase(t)
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	tq := testenv.UniqueName("wk-kill")
	sc := workflowtest.Scenario(t, testenv.UniqueName("wkk"), 100, 7)
	t.Cleanup(func() { workflowtest.TerminateAll(c, &sc.Expected, "test finished") })

	first := startWorker(t, dsn, tq)
	if code, body := first.get("/healthz"); code != 200 {
		t.Fatalf("/healthz = %d %s", code, body)
	}
	if code, body := first.get("/readyz"); code != 200 || !strings.Contains(body, `"name":"postgres","ok":true`) ||
		!strings.Contains(body, `"name":"temporal","ok":true`) {
		t.Fatalf("/readyz = %d %s", code, body)
	}

	total := int64(sc.Expected.Counts.Messages - sc.Expected.Counts.Bad)
	var killed atomic.Bool
	killAt := total / 3
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	err = workflowtest.DeliverAll(ctx, c, tq, workflows.DefaultParams(), sc.Messages, 4, func(n int64) {
		if n == killAt && killed.CompareAndSwap(false, true) {
			if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
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
	rep := workflowtest.WaitSettled(t, sqlDB, &sc.Expected, 100*time.Second)
	t.Logf("killed after %d of %d deliveries; settled %v after start; orders %v outcomes %v points %d",
		killAt, total, time.Since(start).Round(time.Millisecond), rep.OrdersByStatus, rep.EventsByOutcome, rep.Points)
	workflowtest.CheckQueries(t, c, sqlDB, &sc.Expected)

	// The project's and the SDK's metrics are exported.
	_, metrics := second.get("/metrics")
	for _, want := range []string{`orderflow_events_total{outcome="applied"}`, `orderflow_activity_duration_seconds_bucket{activity="ApplyEvent"`,
		"orderflow_points_awarded_total", "temporal_workflow_task_execution_latency", "temporal_local_activity_execution_latency"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	if err := second.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := second.wait(30 * time.Second); code != 0 {
		t.Errorf("SIGTERM: exit code %d, want 0", code)
	}
	log := second.log.String()
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
	cmd := exec.Command(workerBinary(t), "-metrics-addr", "127.0.0.1:0",
		"-database-url", "postgres://orderflow:orderflow@127.0.0.1:1/none?sslmode=disable&connect_timeout=2")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("worker with a bad database: err %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "worker: open database: ") || !strings.Contains(string(out), "127.0.0.1:1") {
		t.Errorf("error does not say what failed:\n%s", out)
	}
}

// TestWorkerRejectsBadFlag exits with an error for an unknown flag.
func TestWorkerRejectsBadFlag(t *testing.T) {
	out, err := exec.Command(workerBinary(t), "-no-such-flag").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no-such-flag") {
		t.Fatalf("err %v\n%s", err, out)
	}
}
