//go:build chaos

package e2e

// The fault matrix, run by `make chaos` (scripts/chaos.sh): every fault the
// invariants name, one case each, on a stack of its own (other ports, data
// in .data/chaos), so that SIGKILLing a service disturbs no other test and
// no developer's stack. Each case runs the whole pipeline — worker and
// bridge binaries, a scenario published while the fault happens — and ends
// with all five invariants checked by package check.

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/orderflow/orderflow/check"
	"github.com/orderflow/orderflow/config"
	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/internal/procs"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/scenario"
)

// Shape of one case: a scenario of faultOrders orders published over
// faultPublish; the fault starts faultAt after publishing began. A network
// cut lasts faultCut, longer than every retry window of the processes under
// test (the bridge retries a delivery for faultRetryFor, then hands it back
// and the broker redelivers it within 10 s; the worker's activities retry
// for as long as it takes).
const (
	faultOrders   = 120
	faultPublish  = 24 * time.Second
	faultAt       = 8 * time.Second
	faultCut      = 20 * time.Second
	faultDown     = 3 * time.Second // a killed service stays down this long before it is restarted
	faultRetryFor = "3s"
	faultSettle   = 4 * time.Minute
)

// faultStack is the fault matrix's own local stack: its data folder (for the
// pid files and the stack script) and the proxy every client reaches the
// broker through.
type faultStack struct {
	data string
	// broker is the proxy on the address the broker announces
	// (ORDERFLOW_CHAOS_BROKER_ANNOUNCED) to its listening address
	// (ROCKETMQ_BROKER); cutting it cuts the broker off the network.
	broker *testenv.Proxy
}

func newFaultStack(t *testing.T) *faultStack {
	t.Helper()
	data := os.Getenv("ORDERFLOW_DATA")
	announced := os.Getenv("ORDERFLOW_CHAOS_BROKER_ANNOUNCED")
	listening := os.Getenv("ROCKETMQ_BROKER")
	if data == "" || announced == "" || listening == "" {
		t.Fatal("the fault matrix runs on a stack of its own: run it with `make chaos` (scripts/chaos.sh sets ORDERFLOW_DATA, ROCKETMQ_BROKER and ORDERFLOW_CHAOS_BROKER_ANNOUNCED)")
	}
	p, err := testenv.ListenProxy(announced, listening)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return &faultStack{data: data, broker: p}
}

// pid reads the process ID of one of the stack's services from its pid file.
func (s *faultStack) pid(svc string) (int, error) {
	files := map[string]string{
		"temporal": filepath.Join(s.data, "temporal", "temporal.pid"),
		"broker":   filepath.Join(s.data, "rocketmq", "broker.pid"),
		"namesrv":  filepath.Join(s.data, "rocketmq", "namesrv.pid"),
		"postgres": filepath.Join(s.data, "postgres", "postmaster.pid"),
	}
	return readPid(files[svc])
}

// readPid reads a process ID from the first line of a pid file.
func readPid(file string) (int, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, fmt.Errorf("pid file: %w", err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		return 0, fmt.Errorf("pid in %s: %w", file, err)
	}
	return pid, nil
}

// kill SIGKILLs a service and waits until its process is gone.
func (s *faultStack) kill(svc string) error {
	pid, err := s.pid(svc)
	if err != nil {
		return err
	}
	return killPid(pid)
}

// killPid SIGKILLs a process and waits until it is gone.
func killPid(pid int) error {
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill -9 %d: %w", pid, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			return fmt.Errorf("pid %d still runs 30 s after SIGKILL", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// up starts the stack's services that are not running (the stack script
// waits until they are healthy).
func (s *faultStack) up(ctx context.Context, svc string) error {
	cmd := exec.CommandContext(ctx, stackScript, "up", svc)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("scripts/stack.sh up %s: %w\n%s", svc, err, out)
	}
	return nil
}

// killAndRestart SIGKILLs a service, leaves it down for faultDown, and
// starts it again.
func (s *faultStack) killAndRestart(ctx context.Context, svc, stackSvc string) error {
	if err := s.kill(svc); err != nil {
		return err
	}
	sleepCtx(ctx, faultDown)
	return s.up(ctx, stackSvc)
}

// faultRig is one case's pipeline: the processes, the proxies they reach
// the services through, and the stack.
type faultRig struct {
	t       *testing.T
	stack   *faultStack
	pl      *pipeline
	worker  *procs.Proc
	bridges []*procs.Proc
	names   []string // of the bridges
	bridgeE []string
	proxies map[string]*testenv.Proxy
	log     []string
}

func (r *faultRig) note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.log = append(r.log, msg)
	r.t.Log(msg)
}

// newBridge makes and starts one more bridge of the case's consumer group.
func (r *faultRig) newBridge(ctx context.Context) (*procs.Proc, error) {
	name := fmt.Sprintf("bridge%d", len(r.bridges)+1)
	b := r.proc(name, r.pl.starterBin, "ORDERFLOW_BRIDGE_METRICS_ADDR", r.bridgeE)
	r.bridges = append(r.bridges, b)
	r.names = append(r.names, name)
	return b, b.Start(ctx)
}

// proc is newProc with the log kept in the stack's log folder
// (<data>/logs/chaos/<prefix>/<name>.log), for reading after the run.
func (r *faultRig) proc(name, path, addrEnv string, env []string) *procs.Proc {
	dir := filepath.Join(r.stack.data, "logs", "chaos", r.pl.prefix)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.t.Fatal(err)
	}
	return procs.New(procs.Spec{Name: name, Path: path, Env: env, AddrEnv: addrEnv, Ready: "/healthz",
		LogPath: filepath.Join(dir, name+".log")})
}

// cut plays a network partition between the worker and the bridges and one
// service for faultCut.
func (r *faultRig) cut(ctx context.Context, svc string) error {
	p := r.proxies[svc]
	if svc == "broker" {
		p = r.stack.broker
	}
	if p == nil {
		return fmt.Errorf("no proxy in front of %s", svc)
	}
	p.Cut()
	sleepCtx(ctx, faultCut)
	p.Restore()
	return nil
}

// faultCase is one row of the matrix.
type faultCase struct {
	name string
	// via lists the services the processes reach through a proxy of their
	// own ("temporal", "postgres", "namesrv"); the broker is always behind
	// the stack's proxy.
	via []string
	// bridges is how many bridges run from the start (default 1).
	bridges int
	// fault runs faultAt after publishing began.
	fault func(ctx context.Context, r *faultRig) error
}

func faultCases() []faultCase {
	kill := func(svc, stackSvc string) func(context.Context, *faultRig) error {
		return func(ctx context.Context, r *faultRig) error {
			t0 := time.Now()
			err := r.stack.killAndRestart(ctx, svc, stackSvc)
			r.note("%s SIGKILLed, restarted and healthy again after %s", svc, time.Since(t0).Round(100*time.Millisecond))
			return err
		}
	}
	cut := func(svc string) func(context.Context, *faultRig) error {
		return func(ctx context.Context, r *faultRig) error {
			r.note("network to %s cut for %s", svc, faultCut)
			return r.cut(ctx, svc)
		}
	}
	return []faultCase{
		{name: "worker SIGKILL", fault: func(ctx context.Context, r *faultRig) error {
			for i := 0; i < 2; i++ {
				if err := r.worker.Kill(); err != nil {
					return err
				}
				sleepCtx(ctx, faultDown)
				if err := r.worker.Start(ctx); err != nil {
					return err
				}
				r.note("worker SIGKILLed and restarted (%d)", i+1)
				sleepCtx(ctx, 4*time.Second)
			}
			return nil
		}},
		{name: "two bridges SIGKILLed, a third joins", bridges: 2, fault: func(ctx context.Context, r *faultRig) error {
			if err := r.bridges[0].Kill(); err != nil {
				return err
			}
			r.note("bridge1 SIGKILLed; bridge2 takes over its queues")
			sleepCtx(ctx, 5*time.Second)
			if _, err := r.newBridge(ctx); err != nil {
				return err
			}
			r.note("bridge3 joined the consumer group")
			sleepCtx(ctx, 5*time.Second)
			if err := r.bridges[1].Kill(); err != nil {
				return err
			}
			r.note("bridge2 SIGKILLed; bridge3 takes over")
			return nil
		}},
		{name: "Temporal server SIGKILL", fault: kill("temporal", "temporal")},
		{name: "broker SIGKILL", fault: kill("broker", "rocketmq")},
		{name: "name server SIGKILL", fault: kill("namesrv", "rocketmq")},
		{name: "PostgreSQL postmaster SIGKILL", fault: kill("postgres", "postgres")},
		{name: "network cut: Temporal", via: []string{"temporal"}, fault: cut("temporal")},
		{name: "network cut: PostgreSQL", via: []string{"postgres"}, fault: cut("postgres")},
		{name: "network cut: name server", via: []string{"namesrv"}, fault: cut("namesrv")},
		{name: "network cut: broker", fault: cut("broker")},
	}
}

// TestFaultMatrix runs every case in turn and prints the matrix.
func TestFaultMatrix(t *testing.T) {
	stack := newFaultStack(t)
	workerBin, starterBin := buildBinaries(t)
	var rows []string
	for _, fc := range faultCases() {
		t.Run(strings.ReplaceAll(fc.name, " ", "_"), func(t *testing.T) {
			runFaultCase(t, stack, fc, workerBin, starterBin, func(row string) { rows = append(rows, row) })
		})
	}
	t.Logf("fault matrix:\n| fault | messages published | invariants 1-5 | result | took |\n|---|---|---|---|---|\n%s", strings.Join(rows, "\n"))
}

// runFaultCase runs one case and reports its row of the matrix, also when
// the case fails.
func runFaultCase(t *testing.T, stack *faultStack, fc faultCase, workerBin, starterBin string, report func(row string)) {
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	verdict := "not run"
	messages := 0
	invariants := "-"
	defer func() {
		if t.Failed() && verdict == "PASS" {
			verdict = "FAIL"
		}
		report(fmt.Sprintf("| %s | %d | %s | %s | %s |", fc.name, messages, invariants, verdict, time.Since(began).Round(time.Second)))
	}()

	gdb, dsn := testenv.NewDatabase(t)
	namesrv := testenv.RocketMQNamesrv(t)
	pl := newPipelineWith(t, "fault", dsn, namesrv, workerBin, starterBin)
	r := &faultRig{t: t, stack: stack, pl: pl, proxies: map[string]*testenv.Proxy{}}

	// Point the processes at proxies where the case cuts a service.
	env := pl.with()
	for _, svc := range fc.via {
		switch svc {
		case "temporal":
			p := testenv.StartProxy(t, config.FromEnv().TemporalAddress)
			r.proxies[svc] = p
			env = append(env, "TEMPORAL_ADDRESS="+p.Addr())
		case "postgres":
			u, err := url.Parse(dsn)
			if err != nil {
				t.Fatal(err)
			}
			p := testenv.StartProxy(t, u.Host)
			r.proxies[svc] = p
			u.Host = p.Addr()
			env = append(env, "DATABASE_URL="+u.String())
		case "namesrv":
			p := testenv.StartProxy(t, namesrv)
			r.proxies[svc] = p
			env = append(env, "ROCKETMQ_NAMESRV="+p.Addr())
		}
	}
	r.bridgeE = append(append([]string(nil), env...),
		"ORDERFLOW_BRIDGE_RETRY_FOR="+faultRetryFor,
		"ORDERFLOW_BRIDGE_MAX_RETRY_DELAY_LEVEL=3") // hand-backs come back within 10 s
	r.worker = r.proc("worker", pl.workerBin, "ORDERFLOW_WORKER_METRICS_ADDR", env)
	t.Cleanup(func() {
		for _, b := range r.bridges {
			stop(t, b)
		}
		stop(t, r.worker)
		if t.Failed() {
			t.Logf("logs in %s; worker log (tail):\n%s", filepath.Join(r.stack.data, "logs", "chaos", pl.prefix), r.worker.Tail(4000))
			for i, b := range r.bridges {
				t.Logf("%s log (tail):\n%s", r.names[i], b.Tail(4000))
			}
		}
	})
	if err := r.worker.Start(ctx); err != nil {
		t.Fatal(err)
	}
	n := fc.bridges
	if n == 0 {
		n = 1
	}
	for i := 0; i < n; i++ {
		if _, err := r.newBridge(ctx); err != nil {
			t.Fatal(err)
		}
	}

	seed := time.Now().UnixNano()
	s, err := scenario.Generate(scenario.Options{
		Orders: faultOrders, Seed: seed, Prefix: pl.prefix, Start: time.Now(),
		DupRate: 0.1, Reorder: 0.3, CancelRate: 0.2, OpenRate: 0.1,
		UpdateRate: 0.2, GapRate: 0.08, Conflicts: 4, Bad: 5,
	})
	if err != nil {
		t.Fatal(err)
	}
	c := s.Expected.Counts
	messages = c.Messages
	t.Logf("scenario %s (seed %d): %d orders, %d messages", pl.prefix, seed, c.Orders, c.Messages)
	producer, err := mq.NewProducer(namesrv, mq.WithProducerGroup(uniq.Name("fault-producer")))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()

	// Publish over faultPublish (retrying sends while the broker is away);
	// the fault starts faultAt in.
	pubDone := make(chan error, 1)
	go func() {
		pubDone <- scenario.Publish(ctx, producer, s.Messages, scenario.PublishOptions{
			Topic: pl.topic, Rate: float64(c.Messages) / faultPublish.Seconds(), Attempts: 60})
	}()
	sleepCtx(ctx, faultAt)
	if faultErr := fc.fault(ctx, r); faultErr != nil {
		t.Fatalf("fault: %v", faultErr)
	}
	if err := <-pubDone; err != nil {
		t.Fatalf("publish: %v", err)
	}
	pubTook := time.Since(began)

	settleStart := time.Now()
	rep, err := check.WaitSettled(ctx, gdb, &s.Expected, check.WaitOptions{
		Wait: faultSettle, Interval: 2 * time.Second, Settle: 10 * time.Second,
	})
	var out bytes.Buffer
	if rep != nil {
		rep.Write(&out)
		var parts []string
		for _, inv := range rep.Invariants {
			v := "PASS"
			if !inv.Pass() {
				v = "FAIL"
			}
			parts = append(parts, fmt.Sprintf("%d %s", inv.Number, v))
		}
		invariants = strings.Join(parts, ", ")
	}
	t.Logf("settled %s after publishing (publishing took %s):\n%s", time.Since(settleStart).Round(100*time.Millisecond), pubTook.Round(100*time.Millisecond), out.String())
	if err != nil {
		verdict = "FAIL"
		t.Fatalf("the invariants do not hold after %q: %v", fc.name, err)
	}
	verdict = "PASS"
	for i, p := range append([]*procs.Proc{r.worker}, r.bridges...) {
		if x := p.Crashes(); len(x) > 0 {
			verdict = "FAIL"
			t.Errorf("invariant 4: %s: %s", append([]string{"worker"}, r.names...)[i], strings.Join(x, "; "))
		}
	}
	// How often the surviving bridges handed a message back to the broker
	// (a delivery that failed for longer than -retry-for): evidence that
	// the fault reached the pipeline.
	var handedBack float64
	for _, b := range r.bridges {
		if b.Running() {
			v, err := metric(b, "orderflow_bridge_messages_total", `result="retry"`)
			if err != nil {
				t.Logf("bridge metrics: %v", err)
			}
			handedBack += v
		}
	}
	r.note("%.0f hand-backs by the surviving bridges", handedBack)
	if verdict == "PASS" {
		verdict = "PASS: " + strings.Join(r.log, "; ")
	}
}
