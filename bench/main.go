// Command bench measures orderflow on the local stack (`make up`) in
// honest units: distinct events per second, publish-to-applied latency.
//
// It measures on each of a few Temporal engines (-engines, by default both
// of): dev, the stack's own Temporal dev server, and server, the Temporal
// server on the local PostgreSQL, which the benchmark starts beside the
// stack through scripts/stack.sh and stops when its phases are done. On
// each:
//
//   - ceiling (informational): trivial workflows started with
//     SignalWithStart and completed, on a worker with orderflow's worker
//     settings (no database, no broker), in workflows/s;
//   - e2e: a scenario (20% duplicates, reordering, gaps, conflicts, bad
//     messages) published to a fresh RocketMQ topic before any consumer
//     starts, then drained by the real bridge and worker processes into a
//     fresh database: distinct events per second from the first database
//     effect to the last; the ratio is e2e/baseline;
//   - duplicates: the e2e drain of the scenario without duplicates and with
//     50%, in distinct events per second;
//   - hot order: one order receiving 2,000 events, drained by orderflow;
//     every run of its workflow must end by continue-as-new;
//   - open loop: the e2e scenario published at a steady rate, a few shares
//     of the engine's e2e rate (half of it is the headline, offered for 60
//     s; the others for 30 s), with the p50/p95/p99 latency from a business
//     key's publish to its order_events row;
//   - scaling (-scaling): smaller e2e drains over bridge concurrency and
//     worker processes.
//
// Once, without Temporal:
//
//   - baseline: the e2e scenario, published the same way, drained by an
//     in-process RocketMQ push consumer running the same ApplyEvent and
//     points transactions.
//
// Once, on the dev engine (or the first of -engines without it):
//
//   - batching: the e2e drain and the hot order with one signal per event;
//   - flush: the broker's flush cost, on two temporary RocketMQ name
//     servers and brokers started beside the stack's, one with
//     ASYNC_FLUSH and one with SYNC_FLUSH: the producer's send rate and
//     latency with one sender and with several, and the e2e backlog drain,
//     on each (-flush=false skips it).
//
// Every run ends with the invariants checked (check.WaitSettled). It draws
// each engine's throughput and p99 against the offered rate as a PNG and
// ends with a line per engine, the dev engine's last:
//
//	orderflow bench [temporal=server]: e2e=<events/s> baseline=<events/s> ratio=<e2e/baseline> p99_ms=<steady-rate p99>
//	orderflow bench: e2e=<events/s> baseline=<events/s> ratio=<e2e/baseline> p99_ms=<steady-rate p99>
//
// With -tune it runs nothing of the above but the tuning comparisons of
// tune.go: backlog drains with the default setting and variants of each
// knob named. Run it with `make bench`.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image/color"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/orderflow/orderflow/config"
	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/internal/obs"
	"github.com/orderflow/orderflow/scenario"
)

// bench holds the settings and shared resources of a benchmark run.
type bench struct {
	cfg        config.Config
	namesrv    []string
	broker     string
	tuning     tuning
	workerBin  string
	bridgeBin  string
	workerArgs []string
	bridgeArgs []string
	logDir     string
	// engine names the Temporal engine the cells run on.
	engine     string
	settleWait time.Duration
	// metricsAddrs are the metrics addresses of the current cell's
	// processes, by name.
	metricsAddrs map[string]string
	// cpu samples the machine's processes for the whole run.
	cpu *cpuSampler
	// cleanup counts the workflows the cells terminated once measured.
	cleanup *cleanupStats
}

// options are the command's flags.
type options struct {
	orders, concurrency, workers, batch int
	ceilingN, ceilingConc               int
	scaleOrders                         int
	scaleConc, scaleWorkers             []int
	seed                                int64
	dupRate                             float64
	hotEvents, hotMaxEvents             int
	open                                openLoopPlan
	chart, logDir                       string
	// redraw, when set, is a results.json of an earlier run whose chart
	// the benchmark draws again (at chart), measuring nothing.
	redraw                    string
	workerArgs, bridgeArgs    string
	scaling, skipDup, profile bool
	// engines are the Temporal engines measured, in this order.
	engines []engineSpec
	// serverPorts are the server engine's frontend and UI ports;
	// serverShards its history shards.
	serverPorts  []int
	serverShards int
	// devPorts are the dev engine's frontend and UI ports.
	devPorts []int
	// batchCompare runs the e2e drain and the hot order again with one
	// signal per event (batch size 1), the behaviour before batching.
	batchCompare bool
	flush        flushPlan
	// tune, when enabled, makes the run the tuning comparisons only.
	tune tunePlan
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The benchmark is a module of its own (bench/): it works from the
	// repository's root, where the paths of its flags, scripts/stack.sh and
	// the packages it builds are.
	err := chdirRoot()
	if err == nil {
		err = run(ctx, os.Args[1:], os.Stdout)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

// chdirRoot makes the repository's root the working directory.
func chdirRoot() error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	return os.Chdir(root)
}

func intList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a list of positive integers", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// fractionList parses a comma-separated list of numbers in (0, 2].
func fractionList(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || !(v > 0 && v <= 2) {
			return nil, fmt.Errorf("%q is not a list of numbers in (0, 2]", s)
		}
		out = append(out, v)
	}
	return out, nil
}

func parse(args []string) (config.Config, tuning, options, error) {
	var cfg config.Config
	fs := config.NewSet("bench", "Usage: go run ./bench [flags]   (the benchmark of BENCHMARKS.md)", os.Stderr)
	cfg.RegisterTemporal(fs)
	cfg.RegisterDatabase(fs)
	cfg.RegisterRocketMQ(fs)
	cfg.RegisterLog(fs)
	bs := func(name, usage string) config.Setting { return config.Own("ORDERFLOW_BENCH_", name, usage) }
	var (
		o                 options
		t                 tuning
		scaleConc, scaleW string
		fractions         string
	)
	fs.Int(&o.orders, 1100, bs("orders", "orders of the e2e, baseline and duplicate scenarios (1100 orders make about 5,500 events)"))
	fs.Int(&o.concurrency, 32, bs("concurrency", "bridge (and direct consumer) concurrency"))
	fs.Int(&o.workers, 1, bs("workers", "worker processes of the orderflow runs"))
	fs.Int(&o.batch, 16, bs("batch-size", "messages per consumer callback; the bridge sends the events of one order in a callback in one signal"))
	fs.Bool(&o.batchCompare, true, bs("batch-compare", "run the e2e drain and the hot order again with -batch-size 1 (one signal per event) and print the quotients"))
	fs.Int(&o.ceilingN, 1500, bs("ceiling-workflows", "trivial workflows of the ceiling run"))
	fs.Int(&o.ceilingConc, 64, bs("ceiling-concurrency", "workflows in flight in the ceiling run"))
	fs.Float(&o.dupRate, 0.5, bs("dup-rate", "share of the events sent twice in the duplicate scenario (compared with none)"))
	fs.Bool(&o.skipDup, false, bs("skip-dup", "skip the duplicate scenarios"))
	fs.Int(&o.hotEvents, 2000, bs("hot-events", "events of the hot order (0 skips it)"))
	fs.Int(&o.hotMaxEvents, 500, bs("hot-max-events", "the hot order's bridge continues its workflow as new after this many events (-workflow-max-events; 0: when Temporal suggests)"))
	fs.String(&fractions, "0.25,0.5,0.75", bs("open-rates", "offered rates of the open-loop runs, as shares of each engine's e2e rate"))
	fs.Float(&o.open.Steady, 0.5, bs("steady-rate", "the open-loop share of the e2e rate whose p99 the last line reports (run even when not in -open-rates)"))
	fs.Duration(&o.open.Duration, time.Minute, bs("open-duration", "how long the steady open-loop rate (-steady-rate) is offered"))
	fs.Duration(&o.open.Others, 30*time.Second, bs("open-other-duration", "how long each other open-loop rate is offered (at most -open-duration)"))
	fs.Int(&o.scaleOrders, 160, bs("scale-orders", "orders of each scaling cell"))
	fs.String(&scaleConc, "8,32,64", bs("scale-concurrency", "bridge concurrencies of the scaling table"))
	fs.String(&scaleW, "1,2", bs("scale-workers", "worker process counts of the scaling table"))
	fs.Bool(&o.scaling, false, bs("scaling", "measure the scaling table on each engine (-scale-concurrency x -scale-workers)"))
	var engines, serverPorts, devPorts string
	fs.String(&engines, "dev,server", bs("engines", "Temporal engines to measure on, in this order: "+engineNames()))
	fs.String(&serverPorts, "7333,8333", bs("server-ports", "frontend and UI ports of the server engine (it also takes the nine ports above the frontend's)"))
	fs.Int(&o.serverShards, 4, bs("server-shards", "history shards of the server engine"))
	fs.String(&devPorts, "7433,8433", bs("dev-ports", "frontend and UI ports of the dev engine"))
	var asyncPorts, syncPorts string
	fs.Bool(&o.flush.Enabled, true, bs("flush", "measure the broker's flush cost (ASYNC_FLUSH against SYNC_FLUSH) on two temporary brokers"))
	fs.Int(&o.flush.Messages, 5000, bs("flush-messages", "messages of each send measurement of the flush step, per broker"))
	fs.Int(&o.flush.Senders, 8, bs("flush-senders", "concurrent senders of the flush step's second send measurement"))
	fs.Int(&o.flush.Orders, 300, bs("flush-orders", "orders of the flush step's e2e backlog drain on each broker (smaller than -orders to keep the run short; 0: -orders)"))
	fs.String(&asyncPorts, "25876,26911", bs("flush-async-ports", "name server and broker ports of the flush step's ASYNC_FLUSH broker"))
	fs.String(&syncPorts, "25886,26921", bs("flush-sync-ports", "name server and broker ports of the flush step's SYNC_FLUSH broker"))
	fs.Bool(&o.profile, true, bs("profile", "capture 15s CPU profiles of the e2e run's worker and bridge and their SDK metrics into the log directory"))
	var seed int
	fs.Int(&seed, 42, bs("seed", "scenario seed"))
	fs.String(&o.chart, "docs/bench-throughput.png", bs("chart", "PNG chart of throughput and p99 against the offered rate"))
	fs.String(&o.redraw, "", bs("redraw", "draw the chart (-chart) again from an earlier run's results.json, measuring nothing"))
	fs.String(&o.logDir, ".data/bench", bs("log-dir", "directory of the processes' logs and the results file"))
	fs.String(&o.workerArgs, "", bs("worker-args", "extra flags for the worker processes (space-separated)"))
	fs.String(&o.bridgeArgs, "", bs("bridge-args", "extra flags for the bridge process (space-separated)"))
	fs.Int(&t.MaxActivities, 100, bs("max-concurrent-activities", "worker setting, for the ceiling and the worker processes"))
	fs.Int(&t.MaxWorkflowTasks, 100, bs("max-concurrent-workflow-tasks", "worker setting, for the ceiling and the worker processes"))
	fs.Int(&t.ActivityPollers, 4, bs("activity-pollers", "worker setting, for the ceiling and the worker processes"))
	fs.Int(&t.WorkflowPollers, 4, bs("workflow-pollers", "worker setting, for the ceiling and the worker processes"))
	registerTune(fs, bs, &o.tune)
	if err := fs.Parse(args, nil); err != nil {
		return cfg, t, o, err
	}
	if len(fs.Args()) > 0 {
		return cfg, t, o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	o.seed = int64(seed)
	var err error
	if o.scaleConc, err = intList(scaleConc); err != nil {
		return cfg, t, o, fmt.Errorf("-scale-concurrency: %w", err)
	}
	if o.scaleWorkers, err = intList(scaleW); err != nil {
		return cfg, t, o, fmt.Errorf("-scale-workers: %w", err)
	}
	if o.flush.AsyncPorts, err = intList(asyncPorts); err != nil {
		return cfg, t, o, fmt.Errorf("-flush-async-ports: %w", err)
	}
	if o.flush.SyncPorts, err = intList(syncPorts); err != nil {
		return cfg, t, o, fmt.Errorf("-flush-sync-ports: %w", err)
	}
	if err := o.flush.checkPorts(); err != nil {
		return cfg, t, o, err
	}
	if o.engines, err = parseEngines(engines); err != nil {
		return cfg, t, o, fmt.Errorf("-engines: %w", err)
	}
	if o.serverPorts, err = intList(serverPorts); err != nil {
		return cfg, t, o, fmt.Errorf("-server-ports: %w", err)
	}
	if o.devPorts, err = intList(devPorts); err != nil {
		return cfg, t, o, fmt.Errorf("-dev-ports: %w", err)
	}
	for _, e := range o.engines {
		if e.Ports != nil {
			if err := checkEnginePorts(e.Name, e.Profile, e.Ports(o), o.flush); err != nil {
				return cfg, t, o, err
			}
		}
	}
	if o.open.Fractions, err = fractionList(fractions); err != nil {
		return cfg, t, o, fmt.Errorf("-open-rates: %w", err)
	}
	if !(o.open.Steady > 0 && o.open.Steady <= 2) {
		return cfg, t, o, fmt.Errorf("-steady-rate must be within (0, 2], got %g", o.open.Steady)
	}
	if !(o.dupRate > 0 && o.dupRate <= 1) {
		return cfg, t, o, fmt.Errorf("-dup-rate must be within (0, 1], got %g", o.dupRate)
	}
	if o.open.Duration < time.Second {
		return cfg, t, o, fmt.Errorf("-open-duration must be at least 1s, got %s", o.open.Duration)
	}
	if o.open.Others < time.Second {
		return cfg, t, o, fmt.Errorf("-open-other-duration must be at least 1s, got %s", o.open.Others)
	}
	for name, v := range map[string]int{"orders": o.orders, "concurrency": o.concurrency, "workers": o.workers,
		"batch-size": o.batch, "ceiling-workflows": o.ceilingN, "ceiling-concurrency": o.ceilingConc,
		"scale-orders": o.scaleOrders, "flush-senders": o.flush.Senders, "server-shards": o.serverShards} {
		if v < 1 {
			return cfg, t, o, fmt.Errorf("-%s must be >= 1, got %d", name, v)
		}
	}
	if o.hotEvents != 0 && o.hotEvents < 5 {
		return cfg, t, o, fmt.Errorf("-hot-events must be 0 or >= 5, got %d", o.hotEvents)
	}
	if o.flush.Messages < 10 {
		return cfg, t, o, fmt.Errorf("-flush-messages must be >= 10, got %d", o.flush.Messages)
	}
	if o.flush.Orders < 0 {
		return cfg, t, o, fmt.Errorf("-flush-orders must be >= 0, got %d", o.flush.Orders)
	}
	if o.hotMaxEvents < 0 {
		return cfg, t, o, fmt.Errorf("-hot-max-events must be >= 0, got %d", o.hotMaxEvents)
	}
	if err := o.tune.resolve(); err != nil {
		return cfg, t, o, err
	}
	return cfg, t, o, nil
}

// results is everything a run measured, written as JSON next to the logs.
type results struct {
	Started time.Time `json:"started"`
	Took    string    `json:"took"`
	// Baseline is the direct consumer's drain of the e2e scenario: no
	// Temporal, measured once for every engine's ratio.
	Baseline cellResult     `json:"baseline"`
	Engines  []engineResult `json:"engines"`
	// Flush is the broker's flush cost (absent with -flush=false), on the
	// engine Primary names.
	Flush *flushResult `json:"flush,omitempty"`
	// Primary is the engine of the steps that run once with Temporal (the
	// batching compare and the flush step).
	Primary string `json:"primary_engine"`
}

// engineResult is what a run measured on one Temporal engine.
type engineResult struct {
	Name      string `json:"name"`
	Doc       string `json:"doc"`
	Address   string `json:"address"`
	Namespace string `json:"namespace"`
	// StartedBy says how the benchmark started the engine, and
	// StartSeconds how long that took (both absent for the stack's own).
	StartedBy    string  `json:"started_by,omitempty"`
	StartSeconds float64 `json:"start_seconds,omitempty"`
	// Took is the time of the engine's phases, starting and stopping it
	// included, the steps that run once (batching, flush) not.
	Took    string      `json:"took"`
	Ceiling ceilingJSON `json:"ceiling"`
	E2E     cellResult  `json:"e2e"`
	// Ratio is e2e/baseline, both in distinct events/s draining a backlog
	// of the same scenario.
	Ratio float64     `json:"ratio_e2e_baseline"`
	NoDup *cellResult `json:"no_duplicates,omitempty"`
	Dup   *cellResult `json:"duplicates,omitempty"`
	Hot   *cellResult `json:"hot_order,omitempty"`
	// E2EOne and HotOne are the e2e drain and the hot order with one
	// signal per event (the primary engine, unless -batch-compare=false).
	E2EOne    *cellResult  `json:"e2e_one_signal_per_event,omitempty"`
	HotOne    *cellResult  `json:"hot_order_one_signal_per_event,omitempty"`
	OpenLoop  []cellResult `json:"open_loop"`
	Steady    cellResult   `json:"steady"`
	SteadyP99 float64      `json:"steady_p99_ms"`
	Scaling   []cellResult `json:"scaling,omitempty"`
}

type ceilingJSON struct {
	Workflows   int     `json:"workflows"`
	Concurrency int     `json:"concurrency"`
	Seconds     float64 `json:"seconds"`
	Rate        float64 `json:"rate"`
}

func run(ctx context.Context, args []string, out io.Writer) error {
	cfg, t, o, err := parse(args)
	if err != nil {
		return err
	}
	if o.redraw != "" {
		return redrawChart(o.redraw, o.chart, out)
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	mq.UseSlog(slog.Default(), slog.LevelError)
	unlock, err := lockBench(ctx, out)
	if err != nil {
		return err
	}
	defer unlock()
	began := time.Now()

	b := &bench{cfg: cfg, tuning: t, settleWait: 8 * time.Minute,
		workerArgs: strings.Fields(o.workerArgs), bridgeArgs: strings.Fields(o.bridgeArgs)}
	for _, a := range strings.Split(cfg.RocketMQNamesrv, ",") {
		if a = strings.TrimSpace(a); a != "" {
			b.namesrv = append(b.namesrv, a)
			if err := dialCheck("RocketMQ name server", a); err != nil {
				return err
			}
		}
	}
	b.broker = os.Getenv("ROCKETMQ_BROKER")
	if b.broker == "" {
		b.broker = "127.0.0.1:10911"
	}
	if err := dialCheck("RocketMQ broker", b.broker); err != nil {
		return err
	}
	release, err := holdTemporal()
	if err != nil {
		return err
	}
	defer release()

	b.logDir = filepath.Join(o.logDir, time.Now().Format("20060102-150405"))
	if err := os.MkdirAll(b.logDir, 0o755); err != nil {
		return err
	}
	fmt.Fprintf(out, "orderflow bench: logs in %s\n", b.logDir)
	if o.tune.enabled() {
		return b.runTune(ctx, o, out)
	}

	// Before the long phases: every engine can be reached or started.
	var root string
	if o.flush.Enabled || slices.ContainsFunc(o.engines, func(e engineSpec) bool { return e.Profile != "" }) {
		if root, err = repoRoot(); err != nil {
			return err
		}
	}
	var engines []*engine
	for _, spec := range o.engines {
		e, err := newEngine(spec, o, cfg, root, b.logDir)
		if err != nil {
			return fmt.Errorf("engine %s: %w", spec.Name, err)
		}
		if e.stack != nil {
			defer e.stack.down()
			if err := e.stack.reset(ctx); err != nil {
				return err
			}
		} else if err := e.dial(ctx, cfg); err != nil {
			return err
		}
		engines = append(engines, e)
	}
	var flushBrokers [2]*flushBroker
	if o.flush.Enabled {
		// The flush step's ports must be free.
		if flushBrokers, err = prepareFlush(ctx, o.flush, b.logDir); err != nil {
			return fmt.Errorf("flush: %w", err)
		}
	}
	fmt.Fprintf(out, "building worker and bridge ...\n")
	if b.workerBin, b.bridgeBin, err = buildBinaries(ctx, b.logDir); err != nil {
		return err
	}
	fmt.Fprintf(out, "worker settings: %d workflow-task slots, %d activity slots, %d/%d workflow/activity pollers %s\n",
		t.MaxWorkflowTasks, t.MaxActivities, t.WorkflowPollers, t.ActivityPollers, strings.Join(b.workerArgs, " "))

	b.cpu = startCPUSampler(ctx, 500*time.Millisecond)
	defer b.cpu.Stop()
	primary := primaryEngine(o.engines)
	res := results{Started: began, Primary: engines[primary].Name}
	// The direct-consumer baseline draining the e2e backlog, one message per
	// callback as the seed articles consume: no Temporal, once.
	base, err := b.runCell(ctx, cellConfig{Name: "baseline", Orders: o.orders, Concurrency: o.concurrency,
		BatchSize: 1, Direct: true, Seed: o.seed, DupRate: 0.2})
	if err != nil {
		return fmt.Errorf("baseline: %w", err)
	}
	res.Baseline = base
	fmt.Fprintf(out, "baseline: %s\n", describeDrain(base))
	if base.CPU != nil {
		fmt.Fprintf(out, "cpu:      %s\n", describeCPU(base))
	}

	for i, e := range engines {
		er, err := b.runEngine(ctx, e, o, base, i == primary, flushBrokers, &res, out)
		if err != nil {
			return fmt.Errorf("[%s] %w", e.Name, err)
		}
		res.Engines = append(res.Engines, er)
	}

	if err := drawOpenLoopChart(o.chart, res); err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	fmt.Fprintf(out, "chart:    %s\n", o.chart)
	res.Took = time.Since(began).Round(time.Second).String()
	if data, err := json.MarshalIndent(res, "", "  "); err == nil {
		_ = os.WriteFile(filepath.Join(b.logDir, "results.json"), data, 0o644)
	}
	var tooks []string
	for _, er := range res.Engines {
		tooks = append(tooks, fmt.Sprintf("%s %s", er.Name, er.Took))
	}
	fmt.Fprintf(out, "took %s (engines: %s); every run settled with all invariants holding (check.Verify)\n",
		res.Took, strings.Join(tooks, ", "))
	for _, l := range summaryLines(res) {
		fmt.Fprintln(out, l)
	}
	return nil
}

// summaryLines are the last lines of a run: each engine's ceiling
// (informational), then each engine's figures, the reference engine's last
// and untagged, the others tagged with their name.
func summaryLines(res results) []string {
	var ceilings, figures []string
	var last string
	for _, er := range res.Engines {
		ceilings = append(ceilings, "["+er.Name+"] "+ceilingLine(er))
		tag := ""
		if er.Name != referenceEngine {
			tag = " [temporal=" + er.Name + "]"
		}
		l := fmt.Sprintf("orderflow bench%s: e2e=%.1f baseline=%.1f ratio=%.2f p99_ms=%.0f",
			tag, er.E2E.Rate, res.Baseline.Rate, er.Ratio, er.SteadyP99)
		if er.Name == referenceEngine {
			last = l
		} else {
			figures = append(figures, l)
		}
	}
	out := append(ceilings, figures...)
	if last != "" {
		out = append(out, last)
	}
	return out
}

// ceilingLine is the ceiling's line of an engine.
func ceilingLine(er engineResult) string {
	c := er.Ceiling
	return fmt.Sprintf("ceiling:  %d trivial signal-started workflows (%d in flight) in %.1fs = %.1f wf/s (informational: Temporal alone, not comparable with events/s)",
		c.Workflows, c.Concurrency, c.Seconds, c.Rate)
}

// dial checks that the engine's frontend answers.
func (e *engine) dial(ctx context.Context, cfg config.Config) error {
	cfg.TemporalAddress, cfg.TemporalNamespace = e.Address, e.Namespace
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	tc, err := obs.NewTemporalClient(dctx, cfg, slog.Default(), nil)
	if err != nil {
		return fmt.Errorf("engine %s: %w; %s", e.Name, err, makeUp)
	}
	tc.Close()
	return nil
}

// runEngine runs the phases of one engine, starting it first and stopping
// it at the end when the benchmark starts it. On the primary engine it also
// runs the batching compare and the flush step.
func (b *bench) runEngine(ctx context.Context, e *engine, o options, base cellResult, primary bool,
	fbs [2]*flushBroker, res *results, out io.Writer) (engineResult, error) {
	began := time.Now()
	var once time.Duration // the steps that run once, timed apart
	tag := e.tag()
	er := engineResult{Name: e.Name, Doc: e.Doc, Address: e.Address, Namespace: e.Namespace}
	if e.stack != nil {
		d, err := e.stack.up(ctx)
		if err != nil {
			return er, err
		}
		defer e.stack.down()
		er.StartedBy, er.StartSeconds = e.stack.describe(), d.Seconds()
		fmt.Fprintf(out, "%sTemporal: %s, started in %.1fs (%s)\n", tag, e.Doc, d.Seconds(), er.StartedBy)
	} else {
		fmt.Fprintf(out, "%sTemporal: %s at %s, namespace %s\n", tag, e.Doc, e.Address, e.Namespace)
	}
	eb := *b
	eb.cfg.TemporalAddress, eb.cfg.TemporalNamespace = e.Address, e.Namespace
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	tc, err := obs.NewTemporalClient(dctx, eb.cfg, slog.Default(), nil)
	cancel()
	if err != nil {
		return er, err
	}
	closeClient := sync.OnceFunc(tc.Close)
	defer closeClient()
	eb.engine = e.Name
	eb.cleanup = &cleanupStats{}
	name := func(s string) string { return e.Name + "-" + s }

	// 1. Ceiling (informational: workflows/s is not events/s).
	cr, err := runCeiling(ctx, tc, eb.tuning, o.ceilingN, o.ceilingConc)
	if err != nil {
		return er, fmt.Errorf("ceiling: %w", err)
	}
	er.Ceiling = ceilingJSON{cr.Workflows, o.ceilingConc, cr.Elapsed.Seconds(), cr.Rate}
	fmt.Fprintf(out, "%s%s\n", tag, ceilingLine(er))

	// 2. orderflow draining a backlog.
	e2e, err := eb.runCell(ctx, cellConfig{Name: name("e2e"), Orders: o.orders, Concurrency: o.concurrency,
		BatchSize: o.batch, Workers: o.workers, Seed: o.seed, DupRate: 0.2, Profile: o.profile})
	if err != nil {
		return er, fmt.Errorf("e2e: %w", err)
	}
	er.E2E = e2e
	fmt.Fprintf(out, "%se2e:      %s\n", tag, describeDrain(e2e))
	if len(e2e.Metrics) > 0 {
		fmt.Fprintf(out, "%sprofile:  %s\n", tag, profileLine(b.logDir, e2e))
	}
	if e2e.CPU != nil {
		fmt.Fprintf(out, "%scpu:      %s\n", tag, describeCPU(e2e))
	}
	er.Ratio = e2e.Rate / base.Rate
	fmt.Fprintf(out, "%sratio:    e2e/baseline = %.2f (distinct events/s, both draining a backlog of the same scenario)\n", tag, er.Ratio)

	// 3. Duplicates: the same drain without duplicates and with dupRate.
	if !o.skipDup {
		nodup, err := eb.runCell(ctx, cellConfig{Name: name("dup0"), Orders: o.orders, Concurrency: o.concurrency,
			BatchSize: o.batch, Workers: o.workers, Seed: o.seed})
		if err != nil {
			return er, fmt.Errorf("no-duplicate scenario: %w", err)
		}
		dup, err := eb.runCell(ctx, cellConfig{Name: name(fmt.Sprintf("dup%.0f", 100*o.dupRate)), Orders: o.orders,
			Concurrency: o.concurrency, BatchSize: o.batch, Workers: o.workers, Seed: o.seed, DupRate: o.dupRate})
		if err != nil {
			return er, fmt.Errorf("duplicate scenario: %w", err)
		}
		er.NoDup, er.Dup = &nodup, &dup
		fmt.Fprintf(out, "%sno dups:  %s\n", tag, describeDrain(nodup))
		fmt.Fprintf(out, "%s%.0f%% dups: %s\n", tag, 100*o.dupRate, describeDrain(dup))
		fmt.Fprintf(out, "%sdups:     %.0f%% duplicates / none = %.2f in distinct events/s\n", tag, 100*o.dupRate, dup.Rate/nodup.Rate)
	}

	// 4. One hot order.
	runHot := func(cell string, batch int) (cellResult, error) {
		return eb.runCell(ctx, cellConfig{Name: name(cell), Orders: 1, Concurrency: o.concurrency,
			BatchSize: batch, Workers: o.workers, Seed: o.seed,
			BridgeArgs: []string{"-workflow-max-events", strconv.Itoa(o.hotMaxEvents)},
			generate: func(prefix string) (*scenario.Scenario, error) {
				return hotScenario(prefix, o.hotEvents, time.Now())
			},
			inspect: func(ctx context.Context, r *cellResult) error {
				hr, err := checkHot(ctx, tc, e.Namespace, scenario.OrderID(r.Prefix, 0))
				r.Hot = &hr
				if err == nil && o.hotMaxEvents > 0 && o.hotEvents > o.hotMaxEvents && hr.Runs < 2 {
					err = fmt.Errorf("%d events with -workflow-max-events %d made no continue-as-new: %s",
						o.hotEvents, o.hotMaxEvents, hr)
				}
				return err
			}})
	}
	describeHot := func(hot cellResult, batch int) {
		can := "when Temporal suggests"
		if o.hotMaxEvents > 0 {
			can = fmt.Sprintf("every %d events", o.hotMaxEvents)
		}
		fmt.Fprintf(out, "%shot:      %d events of one order (batch size %d) drained in %.1fs = %.1f events/s, continuing as new %s; %d signals; its workflow: %s\n",
			tag, hot.Events, batch, hot.Elapsed.Seconds(), hot.Rate, can, hot.Signals, hot.Hot)
		if o.hotMaxEvents > 0 && hot.Hot.MaxHandled > 2*o.hotMaxEvents {
			fmt.Fprintf(out, "%shot:      continue-as-new was deferred under the stream: a run handled %d events, not about %d\n",
				tag, hot.Hot.MaxHandled, o.hotMaxEvents)
		}
	}
	if o.hotEvents > 0 {
		hot, err := runHot("hot", o.batch)
		if err != nil {
			return er, fmt.Errorf("hot order: %w", err)
		}
		er.Hot = &hot
		describeHot(hot, o.batch)
	}

	// 4b. Once, on the primary engine: one signal per event, as before
	// batching.
	if primary && o.batchCompare && o.batch > 1 {
		start := time.Now()
		one, err := eb.runCell(ctx, cellConfig{Name: name("e2e-b1"), Orders: o.orders, Concurrency: o.concurrency,
			BatchSize: 1, Workers: o.workers, Seed: o.seed, DupRate: 0.2})
		if err != nil {
			return er, fmt.Errorf("e2e with batch size 1: %w", err)
		}
		er.E2EOne = &one
		fmt.Fprintf(out, "%se2e-b1:   %s\n", tag, describeDrain(one))
		line := fmt.Sprintf("batching: batch size %d / 1: e2e %.2f in distinct events/s (%d / %d signals)",
			o.batch, e2e.Rate/one.Rate, e2e.Signals, one.Signals)
		if o.hotEvents > 0 {
			hot1, err := runHot("hot-b1", 1)
			if err != nil {
				return er, fmt.Errorf("hot order with batch size 1: %w", err)
			}
			er.HotOne = &hot1
			describeHot(hot1, 1)
			line += fmt.Sprintf(", hot order %.2f (%d / %d signals)", er.Hot.Rate/hot1.Rate, er.Hot.Signals, hot1.Signals)
		}
		d := time.Since(start)
		once += d
		fmt.Fprintf(out, "%s%s; the compare took %s\n", tag, line, d.Round(time.Second))
	}

	// 5. Open loop at shares of this engine's e2e rate.
	fmt.Fprintf(out, "%sopen loop: the e2e scenario published at a steady rate, %s at %.2f x e2e (the steady rate) and %s at each other share; latency = publish -> order_events row\n",
		tag, o.open.Duration, o.open.Steady, o.open.duration(-1))
	fmt.Fprintf(out, "| offered events/s | share of e2e | offered for | achieved events/s | p50 | p95 | p99 |\n|---|---|---|---|---|---|---|\n")
	perOrder := float64(e2e.Events) / float64(e2e.Config.Orders)
	for _, f := range o.open.fractions() {
		offered, d := f*e2e.Rate, o.open.duration(f)
		r, err := eb.runCell(ctx, cellConfig{Name: name(fmt.Sprintf("open-%.2f", f)),
			Orders: ordersFor(offered, d, perOrder), Concurrency: o.concurrency, BatchSize: o.batch,
			Workers: o.workers, Seed: o.seed + int64(1000*f), DupRate: 0.2, Offered: offered, Fraction: f})
		if err != nil {
			return er, fmt.Errorf("open loop at %.2f x e2e: %w", f, err)
		}
		er.OpenLoop = append(er.OpenLoop, r)
		fmt.Fprintf(out, "| %.1f | %.2f | %s | %.1f | %s | %s | %s |\n", r.Config.Offered, f, d, r.Rate,
			ms(r.P50), ms(r.P95), ms(r.P99))
	}
	if er.Steady, err = steadyResult(er.OpenLoop, o.open.Steady); err != nil {
		return er, err
	}
	st := er.Steady
	er.SteadyP99 = float64(st.P99) / float64(time.Millisecond)
	fmt.Fprintf(out, "%ssteady:   %.2f x e2e = %.1f events/s (%.1f messages/s kept by the publisher) for %.0fs: p50 %s p95 %s p99 %s\n",
		tag, o.open.Steady, st.Config.Offered, st.PublishRate, st.Publish.Seconds(), ms(st.P50), ms(st.P95), ms(st.P99))

	// 6. Scaling table (-scaling).
	if o.scaling {
		fmt.Fprintf(out, "%sscaling (backlog of %d orders per cell, distinct events/s):\n", tag, o.scaleOrders)
		fmt.Fprintf(out, "| bridge concurrency |")
		for _, w := range o.scaleWorkers {
			fmt.Fprintf(out, " %d worker(s) |", w)
		}
		fmt.Fprintf(out, "\n|---|%s\n", strings.Repeat("---|", len(o.scaleWorkers)))
		for _, c := range o.scaleConc {
			fmt.Fprintf(out, "| %d |", c)
			for _, w := range o.scaleWorkers {
				r, err := eb.runCell(ctx, cellConfig{Name: name(fmt.Sprintf("scale-c%d-w%d", c, w)), Orders: o.scaleOrders,
					Concurrency: c, BatchSize: o.batch, Workers: w, Seed: o.seed + int64(c*10+w), DupRate: 0.2})
				if err != nil {
					fmt.Fprintln(out)
					return er, fmt.Errorf("scaling cell concurrency %d, %d workers: %w", c, w, err)
				}
				er.Scaling = append(er.Scaling, r)
				fmt.Fprintf(out, " %.1f |", r.Rate)
			}
			fmt.Fprintln(out)
		}
	}

	// 7. Once, on the primary engine: the broker's flush cost.
	if primary && o.flush.Enabled {
		start := time.Now()
		if res.Flush, err = eb.runFlush(ctx, o.flush, o, fbs, out); err != nil {
			return er, fmt.Errorf("flush: %w", err)
		}
		once += time.Since(start)
	}

	closeClient()
	if e.stack != nil {
		e.stack.down()
	}
	er.Took = (time.Since(began) - once).Round(time.Second).String()
	note := ""
	if once > 0 {
		note = fmt.Sprintf(" (and %s for the steps that run once, on this engine)", once.Round(time.Second))
	}
	c := eb.cleanup
	fmt.Fprintf(out, "%scleanup:  after each cell, its order workflows still running were terminated: %d of %d, in %.1fs over the run (not measured)\n",
		tag, c.Terminated, c.Workflows, c.Took.Seconds())
	fmt.Fprintf(out, "%stook %s%s\n", tag, er.Took, note)
	return er, nil
}

// describeCPU is the line of a drain's CPU use by process group.
func describeCPU(r cellResult) string {
	return fmt.Sprintf("%s drain, first to last effect (%.1fs sampled), cores used of %d: %s",
		r.Config.Name, r.CPU.Seconds, runtime.NumCPU(), r.CPU)
}

// ms formats d in milliseconds.
func ms(d time.Duration) string {
	return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
}

// describeDrain is the line of a cell that drained a backlog.
func describeDrain(r cellResult) string {
	signals := ""
	if r.Signals > 0 {
		signals = fmt.Sprintf("; %d signals", r.Signals)
	}
	return fmt.Sprintf("backlog of %d messages (%d distinct events, %d duplicates, %d orders) drained by %s (concurrency %d, batch size %d) in %.1fs = %.1f events/s (%.1f messages/s)%s; first effect %.1fs after the consumer started (the backlog was published in %.1fs before it started)",
		r.Messages, r.Events, r.Duplicates, r.Config.Orders, consumerName(r.Config), r.Config.Concurrency, r.Config.BatchSize,
		r.Elapsed.Seconds(), r.Rate, r.MessageRate, signals, r.Startup.Seconds(), r.Publish.Seconds())
}

func consumerName(c cellConfig) string {
	if c.Direct {
		return "the direct consumer"
	}
	return fmt.Sprintf("the bridge and %d worker process(es)", c.Workers)
}

// profileLine says where the e2e run's profiles are and gives the means of
// a few SDK metrics.
func profileLine(dir string, r cellResult) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "CPU profiles and /metrics in %s; SDK means:", dir)
	for _, m := range sdkMeans {
		k := m.process + ":" + m.metric
		if v, ok := r.Metrics[k]; ok {
			fmt.Fprintf(&sb, " %s %s=%s (n=%.0f)", m.process, metricLabel(m.metric, m.filter),
				time.Duration(v*float64(time.Second)).Round(100*time.Microsecond), r.Metrics[k+"_count"])
		}
	}
	if n := r.Metrics["worker1:temporal_workflow_task_execution_latency_seconds_count"]; n > 0 && r.Config.Workers == 1 {
		fmt.Fprintf(&sb, "; %.2f workflow tasks per message", n/float64(r.Messages))
	}
	return sb.String()
}

// redrawChart draws the chart of the run whose results file is from into
// path, as that run would with this benchmark's drawing.
func redrawChart(from, path string, out io.Writer) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return fmt.Errorf("-redraw: %w", err)
	}
	var res results
	if err := json.Unmarshal(data, &res); err != nil {
		return fmt.Errorf("-redraw: %s is not a results file: %w", from, err)
	}
	if err := drawOpenLoopChart(path, res); err != nil {
		return fmt.Errorf("-redraw %s: %w", from, err)
	}
	fmt.Fprintf(out, "chart:    %s, drawn from %s (run started %s)\n", path, from, res.Started.UTC().Format(time.RFC3339))
	return nil
}

// drawOpenLoopChart plots, against the offered rate, the throughput each
// engine's open-loop runs achieved (solid, in the engine's colour; the
// offered rate itself and each engine's e2e backlog rate dashed) above their
// p99 (solid) and p50 (dashed) latency on a log scale, with the 1 s goal.
func drawOpenLoopChart(path string, res results) error {
	var xs []float64
	var thr, lat []series
	for i, er := range res.Engines {
		if len(er.OpenLoop) == 0 {
			return fmt.Errorf("no open-loop results of engine %s", er.Name)
		}
		col := engineColours[i%len(engineColours)]
		achieved := series{Label: er.Name + " achieved", Color: col}
		p99 := series{Label: er.Name + " p99", Color: col}
		p50 := series{Label: er.Name + " p50", Color: col, Dashed: true}
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, r := range er.OpenLoop {
			x := math.Round(r.Config.Offered*10) / 10
			xs = append(xs, x)
			lo, hi = math.Min(lo, x), math.Max(hi, x)
			achieved.Points = append(achieved.Points, [2]float64{x, r.Rate})
			p99.Points = append(p99.Points, [2]float64{x, float64(r.P99) / float64(time.Millisecond)})
			p50.Points = append(p50.Points, [2]float64{x, float64(r.P50) / float64(time.Millisecond)})
		}
		thr = append(thr, achieved, series{Label: er.Name + " e2e backlog drain", Color: col, Dashed: true,
			Points: [][2]float64{{lo, er.E2E.Rate}, {hi, er.E2E.Rate}}})
		lat = append(lat, p99, p50)
	}
	if len(xs) == 0 {
		return errors.New("no open-loop results")
	}
	ticks := chartTicks(xs)
	lo, hi := slices.Min(xs), slices.Max(xs)
	thr = append(thr, series{Label: "offered", Color: colBlack, Dashed: true, Points: [][2]float64{{lo, lo}, {hi, hi}}})
	lat = append(lat, series{Label: "1 s goal", Color: colBlack, Dashed: true, Points: [][2]float64{{lo, 1000}, {hi, 1000}}})
	top := chart{
		Title:  fmt.Sprintf("orderflow open loop by Temporal engine (direct-consumer baseline: %.0f events/s)", res.Baseline.Rate),
		XLabel: "offered events/s", YLabel: "achieved events/s", XTicks: ticks, Series: thr,
	}
	bottom := chart{
		Title:  "latency from publish to order_events row",
		XLabel: "offered events/s", YLabel: "ms (log scale)", XTicks: ticks, Series: lat, LogY: true,
	}
	return writeCharts(path, 860, 720, top, bottom)
}

// engineColours are the engines' colours in the chart, in the order they
// ran.
var engineColours = []color.RGBA{colBlue, colOrng, colGreen, colRed, colPurple}

// chartTicks are the x ticks of offered rates xs: the rates themselves
// when no two are closer than a twelfth of their span (one engine), else
// round numbers within the span, whose labels do not run into each other.
func chartTicks(xs []float64) []float64 {
	u := slices.Clone(xs)
	slices.Sort(u)
	u = slices.Compact(u)
	if len(u) < 2 {
		return u
	}
	span := u[len(u)-1] - u[0]
	crowded := false
	for i := 1; i < len(u); i++ {
		crowded = crowded || u[i]-u[i-1] < span/12
	}
	if !crowded {
		return u
	}
	step := niceStep(span / 6)
	var out []float64
	for x := math.Ceil(u[0]/step) * step; x <= u[len(u)-1]+1e-9; x += step {
		out = append(out, math.Round(x*1e6)/1e6)
	}
	return out
}

// metricLabel is a short name of an SDK metric for the profile line.
func metricLabel(metric, filter string) string {
	l := strings.TrimSuffix(strings.TrimPrefix(metric, "temporal_"), "_seconds")
	if _, op, ok := strings.Cut(filter, `operation="`); ok {
		l = strings.TrimSuffix(op, `"`)
	}
	return l
}
