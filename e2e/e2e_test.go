package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
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

// Shape of the run. The publishing rate is chosen so that publishing lasts
// about publishFor, the window in which the processes are killed.
const (
	e2eOrders  = 500
	publishFor = 80 * time.Second
	settleWait = 4 * time.Minute
)

// stackScript is the local stack's control script, relative to this package.
var stackScript = filepath.Join("..", "scripts", "stack.sh")

// chaosAction is one disruption of the run.
type chaosAction struct {
	at     time.Duration // since the start of publishing
	what   string
	keys   int // business keys recorded when it happened
	downed time.Duration
}

func TestExactlyOnceUnderChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run of several minutes; skipped with -short")
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
	defer cancel()

	// Services, each checked up front with a clear message.
	gdb, dsn := testenv.NewDatabase(t)
	db, err := gdb.DB()
	if err != nil {
		t.Fatal(err)
	}
	// Not testenv.RequireTemporal: that would keep this test from
	// restarting the server (see testenv.ExclusiveTemporal).
	if conn, err := net.DialTimeout("tcp", config.FromEnv().TemporalAddress, 3*time.Second); err != nil {
		t.Fatalf("Temporal at %s is unreachable: %v; start the local stack with `make up`", config.FromEnv().TemporalAddress, err)
	} else {
		conn.Close()
	}
	namesrv := testenv.RocketMQNamesrv(t)
	temporalData, err := temporalDataDir()
	if err != nil {
		t.Fatal(err)
	}

	pl := newPipeline(t, "e2e", dsn, namesrv)
	prefix := pl.prefix
	worker, bridge := pl.procs(t, pl.env, pl.with(
		// Messages handed back to the broker come back within 10s.
		"ORDERFLOW_BRIDGE_MAX_RETRY_DELAY_LEVEL=3"))
	for _, p := range []*procs.Proc{worker, bridge} {
		if err := p.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// The scenario.
	seed := time.Now().UnixNano()
	s, err := scenario.Generate(scenario.Options{
		Orders: e2eOrders, Seed: seed, Prefix: prefix, Start: time.Now(),
		DupRate: 0.1, Reorder: 0.3, CancelRate: 0.2, OpenRate: 0.1,
		UpdateRate: 0.2, GapRate: 0.08, UserChangeRate: 0.5, Conflicts: 10, Bad: 12,
		Illegal: 15, LateConflicts: 10, LateRate: 0.1,
	})
	if err != nil {
		t.Fatal(err)
	}
	c := s.Expected.Counts
	first := len(s.Messages)
	t.Logf("scenario %s (seed %d): %d orders, %d messages: %d events, %d duplicates, %d conflicts, %d bad; %d reordered orders, %d lost events, %d user changes; late phase %d messages (%d illegal)",
		prefix, seed, c.Orders, c.Messages, c.Events, c.Duplicates, c.Conflicts, c.Bad, c.Reordered, c.Lost, c.UserChanges, c.Late, c.Illegal)

	producer, err := mq.NewProducer(namesrv, mq.WithProducerGroup(uniq.Name("e2e-producer")))
	if err != nil {
		t.Fatalf("producer: %v; start the stack with `make up`", err)
	}
	defer producer.Close()

	// Publish and, meanwhile, disrupt.
	rate := float64(first) / publishFor.Seconds()
	pubStart := time.Now()
	pubDone := make(chan error, 1)
	go func() {
		pubDone <- scenario.Publish(ctx, producer, s.Messages, scenario.PublishOptions{Topic: pl.topic, Rate: rate})
	}()

	rng := rand.New(rand.NewPCG(uint64(seed), 77))
	recorded := func() int {
		var n int
		_ = db.QueryRowContext(ctx, `SELECT count(*) FROM order_events`).Scan(&n)
		return n
	}
	var actions []chaosAction
	var mu sync.Mutex
	do := func(what string) {
		a := chaosAction{at: time.Since(pubStart), what: what, keys: recorded()}
		t0 := time.Now()
		var err error
		switch what {
		case "kill bridge", "kill worker":
			p := bridge
			if what == "kill worker" {
				p = worker
			}
			if err = p.Kill(); err == nil {
				sleepCtx(ctx, time.Duration(500+rng.IntN(2500))*time.Millisecond)
				err = p.Start(ctx)
			}
		case "restart temporal":
			err = restartTemporal(ctx, temporalData)
		}
		a.downed = time.Since(t0)
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
		mu.Lock()
		actions = append(actions, a)
		mu.Unlock()
		t.Logf("chaos: %s at +%s (%d business keys recorded), back after %s",
			what, a.at.Round(100*time.Millisecond), a.keys, a.downed.Round(100*time.Millisecond))
	}
	// At least two kills of each process and one Temporal restart, in a
	// random order, at random moments; more kills while publishing lasts.
	plan := []string{"kill bridge", "kill worker", "kill bridge", "kill worker"}
	rng.Shuffle(len(plan), func(a, b int) { plan[a], plan[b] = plan[b], plan[a] })
	at := 1 + rng.IntN(len(plan)-1)
	plan = append(plan[:at], append([]string{"restart temporal"}, plan[at:]...)...)
	var pubErr error
	published := false
	waitPub := (<-chan error)(pubDone)
	for i := 0; !published || i < len(plan); i++ {
		wait := time.Duration(4000+rng.IntN(9000)) * time.Millisecond
		select {
		case pubErr = <-waitPub:
			published, waitPub = true, nil
			if i >= len(plan) {
				continue
			}
			sleepCtx(ctx, wait)
		case <-time.After(wait):
		case <-ctx.Done():
			t.Fatalf("timed out during the chaos phase: %v", ctx.Err())
		}
		what := []string{"kill bridge", "kill worker"}[rng.IntN(2)]
		if i < len(plan) {
			what = plan[i]
		}
		do(what)
	}
	pubTook := time.Since(pubStart)
	if pubErr != nil {
		t.Fatalf("publish: %v", pubErr)
	}
	t.Logf("published %d messages in %s (%.0f/s)", first, pubTook.Round(100*time.Millisecond), float64(first)/pubTook.Seconds())
	for _, p := range []*procs.Proc{worker, bridge} {
		if !p.Running() {
			if err := p.Start(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}

	// Wait until the first phase settles; then every invariant must hold.
	settleStart := time.Now()
	settle := func(exp *scenario.Expected, what string) {
		t.Helper()
		began, last := time.Now(), time.Now()
		keys := len(exp.PublishedKeys())
		r, err := check.WaitSettled(ctx, gdb, exp, check.WaitOptions{
			Wait: settleWait, Interval: 2 * time.Second, Settle: 10 * time.Second,
			Progress: func(r *check.Report) {
				if time.Since(last) > 20*time.Second {
					last = time.Now()
					n := 0
					for _, v := range r.EventsByOutcome {
						n += v
					}
					t.Logf("settling: %s, %d of %d business keys recorded, %d invariant(s) not holding yet",
						time.Since(began).Round(time.Second), n, keys, len(r.Failed()))
				}
			},
		})
		var out bytes.Buffer
		if r != nil {
			r.Write(&out)
		}
		t.Logf("settled in %s after %s:\n%s", time.Since(began).Round(100*time.Millisecond), what, out.String())
		if err != nil {
			t.Fatalf("the invariants do not hold after %s: %v", what, err)
		}
	}
	settle(s.Expected.FirstPhase(), "publishing the first phase")

	// The late phase, once the run has settled and the workflows of
	// terminal orders have closed (grace period 10s, see newPipeline): its
	// events reach fresh runs that rehydrate from PostgreSQL, and must
	// change nothing but the audit and the dead letters.
	sleepCtx(ctx, 15*time.Second)
	if err := scenario.Publish(ctx, producer, s.Late, scenario.PublishOptions{Topic: pl.topic}); err != nil {
		t.Fatalf("publish the late phase: %v", err)
	}
	settle(&s.Expected, fmt.Sprintf("publishing the late phase (%d messages)", len(s.Late)))

	// Nothing crashed on bad input or anything else.
	for _, p := range []*procs.Proc{worker, bridge} {
		if x := p.Crashes(); len(x) > 0 {
			t.Errorf("invariant 4: %s", strings.Join(x, "; "))
		}
	}
	kills := map[string]int{}
	for _, a := range actions {
		kills[a.what]++
	}
	if kills["kill bridge"] < 2 || kills["kill worker"] < 2 || kills["restart temporal"] < 1 {
		t.Fatalf("chaos incomplete: %v", kills)
	}
	t.Logf("figures: %d messages (%d orders, %d duplicates, %d conflicts, %d bad, %d lost events, %d illegal, %d late), bridge killed %d times, worker killed %d times, Temporal restarted %d time(s); publish %s, settle %s, total %s",
		c.Messages, c.Orders, c.Duplicates, c.Conflicts, c.Bad, c.Lost, c.Illegal, c.Late,
		kills["kill bridge"], kills["kill worker"], kills["restart temporal"],
		pubTook.Round(time.Second), time.Since(settleStart).Round(time.Second), time.Since(began).Round(time.Second))
}

// pipeline is one fault test's own pipeline on the shared services: a
// fresh database, topic (8 queues), consumer group, task queue and order-ID
// prefix, the worker and bridge binaries, and their environment.
type pipeline struct {
	dsn, namesrv                    string
	topic, group, taskQueue, prefix string
	env                             []string
	workerBin, starterBin           string
}

func newPipeline(t *testing.T, name, dsn, namesrv string) *pipeline {
	t.Helper()
	workerBin, starterBin := buildBinaries(t)
	return newPipelineWith(t, name, dsn, namesrv, workerBin, starterBin)
}

// newPipelineWith is newPipeline with binaries already built.
func newPipelineWith(t *testing.T, name, dsn, namesrv, workerBin, starterBin string) *pipeline {
	t.Helper()
	pl := &pipeline{dsn: dsn, namesrv: namesrv, topic: uniq.Name(name + "-events"), group: uniq.Name(name + "-bridge"),
		taskQueue: uniq.Name(name + "-tq"), prefix: uniq.Name(name)}
	testenv.CreateTopic(t, pl.topic, 8)
	pl.workerBin, pl.starterBin = workerBin, starterBin
	pl.env = []string{
		"DATABASE_URL=" + dsn,
		"ORDERFLOW_TOPIC=" + pl.topic,
		"ORDERFLOW_CONSUMER_GROUP=" + pl.group,
		"ORDERFLOW_TASK_QUEUE=" + pl.taskQueue,
		"ROCKETMQ_NAMESRV=" + namesrv,
		// Short workflow lifetimes, so that late events also reach closed
		// workflows and fresh runs rehydrate from PostgreSQL.
		"ORDERFLOW_WORKFLOW_GRACE_PERIOD=10s",
		"ORDERFLOW_WORKFLOW_IDLE_TIMEOUT=30s",
	}
	return pl
}

// with returns the pipeline's environment with more variables.
func (pl *pipeline) with(vars ...string) []string {
	return append(append([]string(nil), pl.env...), vars...)
}

// procs makes the worker and the bridge processes with their environments,
// stopped (and their logs shown on failure) when the test ends; the test
// starts them.
func (pl *pipeline) procs(t *testing.T, workerEnv, bridgeEnv []string) (worker, bridge *procs.Proc) {
	t.Helper()
	worker = newProc(t, "worker", pl.workerBin, "ORDERFLOW_WORKER_METRICS_ADDR", workerEnv)
	bridge = newProc(t, "bridge", pl.starterBin, "ORDERFLOW_BRIDGE_METRICS_ADDR", bridgeEnv)
	t.Cleanup(func() {
		stop(t, bridge)
		stop(t, worker)
		if t.Failed() {
			t.Logf("worker log (tail):\n%s", worker.Tail(6000))
			t.Logf("bridge log (tail):\n%s", bridge.Tail(6000))
		}
	})
	return worker, bridge
}

// buildBinaries builds the worker and the bridge (the starter) into a
// temporary directory.
func buildBinaries(t *testing.T) (worker, starter string) {
	t.Helper()
	dir := t.TempDir()
	var err error
	if worker, err = procs.Build(context.Background(), "github.com/orderflow/orderflow/worker", dir); err != nil {
		t.Fatal(err)
	}
	if starter, err = procs.Build(context.Background(), "github.com/orderflow/orderflow/starter", dir); err != nil {
		t.Fatal(err)
	}
	return worker, starter
}

// newProc returns the program at path as a process under test, which the
// test may SIGKILL and start again: each start listens on a free address
// passed through addrEnv and is ready when its /healthz answers; its output
// is appended to a log file.
func newProc(t *testing.T, name, path, addrEnv string, env []string) *procs.Proc {
	return procs.New(procs.Spec{Name: name, Path: path, Env: env, AddrEnv: addrEnv, Ready: "/healthz",
		LogPath: filepath.Join(t.TempDir(), name+".log")})
}

// stop sends SIGTERM and waits up to 45s, then SIGKILL.
func stop(t *testing.T, p *procs.Proc) {
	if _, _, err := p.Stop(45 * time.Second); err != nil {
		t.Log(err)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// temporalDataDir finds the local Temporal dev server process that serves
// TEMPORAL_ADDRESS and returns the stack data directory it runs from (its
// SQLite file is <data>/temporal/temporal.db), so that the stack script of
// this clone can restart it even when another clone's `make up` started it.
func temporalDataDir() (string, error) {
	addr := config.FromEnv().TemporalAddress
	host, port, err := net.SplitHostPort(addr)
	if err != nil || (host != "127.0.0.1" && host != "localhost") {
		return "", fmt.Errorf("TEMPORAL_ADDRESS is %s, not the local dev server this test restarts; run `make up`", addr)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range procs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if !slices.Contains(args, "start-dev") {
			continue
		}
		var db string
		portOK := false
		for i := 0; i+1 < len(args); i++ {
			switch args[i] {
			case "--port", "-p":
				portOK = args[i+1] == port
			case "--db-filename", "-f":
				db = args[i+1]
			}
		}
		if portOK && db != "" {
			return filepath.Dir(filepath.Dir(db)), nil
		}
	}
	return "", fmt.Errorf("no local `temporal server start-dev` process with a database file serves port %s; this test restarts it, so start the stack with `make up`", port)
}

// restartTemporal stops the local Temporal dev server and starts it again
// with the stack script, which waits until it is healthy.
func restartTemporal(ctx context.Context, data string) error {
	run := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, stackScript, args...)
		cmd.Env = append(os.Environ(), "ORDERFLOW_DATA="+data)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return string(out), fmt.Errorf("scripts/stack.sh %s: %w\n%s", strings.Join(args, " "), err, out)
		}
		return string(out), nil
	}
	// Wait until no other test uses Temporal, and keep new ones waiting
	// while it restarts.
	lockCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	release, err := testenv.ExclusiveTemporal(lockCtx)
	cancel()
	if err != nil {
		return err
	}
	defer release()
	if _, err := run("down", "temporal"); err != nil {
		return err
	}
	if _, err := temporalDataDir(); err == nil {
		return errors.New("Temporal still runs after scripts/stack.sh down temporal")
	}
	sleepCtx(ctx, 2*time.Second)
	_, err = run("up", "temporal")
	return err
}
