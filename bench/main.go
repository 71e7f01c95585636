// Command bench measures orderflow on the local stack (`make up`) in
// honest units, distinct events per second and publish-to-applied latency,
// what BENCHMARKS.md reports and nothing else: on each Temporal engine
// (-engines; each started afresh and stopped after its phases) the phases
// of -phases, in this order:
//
//   - e2e: the scenario's backlog drained by the real bridge and worker;
//   - floor: the same through the same broker and bridge into a workflow
//     that only receives its signals (floorWorkflow): the pipeline floor;
//   - dup: drains without duplicates and with 50%, run A B B A;
//   - hot: one order receiving 2,000 events, continuing as new;
//   - open: a capacity sweep of steady rates, for orderflow and for the
//     pipeline floor, and the cells at 0.5 and 0.9 × each capacity
//     (openloop.go);
//   - direct: the engine's direct floor (direct.go): the e2e scenario's
//     messages signalled to floorWorkflow by the benchmark's own client,
//     no broker and no bridge, copies of a key's first content left out
//     as the bridge's duplicate filter would, at most -direct-in-flight
//     signals in flight: as fast as that allows, then its capacity sweep
//     the same way, and each stage's capacity (engine; + broker and
//     bridge; + orderflow's workflow and SQL);
//   - interleave: the three stages at one rate, 0.9 × orderflow's
//     capacity, in cells run orderflow, pipeline floor, direct floor,
//     direct floor, pipeline floor, orderflow (interleave.go), and each
//     stage's CPU per event by process group at that rate;
//   - abba (an experiment, run only when named): cells A B B A at one rate,
//     B with -abba-env, and each variant's CPU per event by group
//     (-abba-sweeps: their capacity sweeps too).
//
// Every cell ends with the invariants checked (the floors': every event
// received) and, on Temporal, the engine's work per event. The run draws
// the chart, writes bench/results/<date>-<commit>.json and ends with a
// line per engine, the dev engine's last and untagged, floor being the
// direct floor's capacity:
//
//	orderflow bench [temporal=server]: e2e=<events/s> floor=<events/s> floor_ratio=<capacity/floor capacity> capacity=<events/s> p99_ms=<p99 at 0.9 x capacity> actions_per_event=<at 0.9 x capacity> pipeline_ratio=<capacity/pipeline floor capacity> own_cpu_ratio=<orderflow's own CPU per event/the engine's in the direct floor> engine_cpu_ratio=<the engine's CPU per event, orderflow/pipeline floor> cpu_ratio=<every process's, orderflow/pipeline floor>
//
// The CPU ratios come from the interleave phase, all three stages at one
// rate; orderflow's own CPU is its bridge's, its worker's and its SQL's.
//
// Run it with `make bench`.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/orderflow/orderflow/config"
	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/internal/procs"
)

// bench holds the settings and shared resources of a benchmark run; each
// engine's phases run on a copy pointed at that engine.
type bench struct {
	cfg     config.Config
	o       options
	out     io.Writer
	namesrv []string
	broker  string
	// tls is the RocketMQ TLS configuration (nil: plain TCP).
	tls                  *tls.Config
	workerBin, bridgeBin string
	logDir               string
	// bridgeMetrics is the metrics address of the current cell's bridge.
	bridgeMetrics string
	// cpu samples the machine's processes for the whole run, but for the
	// cells' measured windows (each read at its own ends: cpuWindow), so
	// that a sweep's cell can wait for the engine to be quiet.
	cpu *cpuSampler
	// e is the current engine and tc its client; floor receives the
	// current floor cell's events.
	e     *engine
	tc    client.Client
	floor *floorTracker
}

// options are the command's flags.
type options struct {
	orders, concurrency, batch int
	seed                       int64
	dupRate                    float64
	hotEvents, hotMaxEvents    int
	dupOrders                  int
	sweep                      sweepPlan
	chart, logDir, resultsDir  string
	// engines are the Temporal engines measured, in this order, and
	// phases the phases run on each, in this order.
	engines []string
	phases  []string
	// serverShards is the server engine's history shards.
	serverShards int
	// directInFlight bounds the direct floor's signals in flight.
	directInFlight int
	// abbaEnv is what an A B B A experiment's B adds to the worker's and
	// the bridge's environment.
	abbaEnv []string
	// abbaSweeps adds the capacity sweeps A B B A to the abba phase.
	abbaSweeps bool
	// floorFactor is the floors' sweeps' step.
	floorFactor float64
	// goMaxProcs is the worker's and the bridge's GOMAXPROCS (0: Go's
	// default).
	goMaxProcs int
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

// chdirRoot makes the nearest folder up from the working directory with
// scripts/stack.sh the working directory.
func chdirRoot() error {
	for dir, err := os.Getwd(); err == nil; dir = filepath.Dir(dir) {
		if _, serr := os.Stat(filepath.Join(dir, "scripts", "stack.sh")); serr == nil {
			return os.Chdir(dir)
		}
		if filepath.Dir(dir) == dir {
			break
		}
	}
	return errors.New("the benchmark needs the repository's scripts/stack.sh: run it from the repository (make bench)")
}

// phaseNames are the phases of an engine, in the order they run.
var phaseNames = []string{"e2e", "floor", "dup", "hot", "open", "direct", "interleave", "abba"}

// defaultPhases are the phases run when -phases is not given: all but the
// experiment.
var defaultPhases = phaseNames[:len(phaseNames)-1]

func parse(args []string) (config.Config, options, error) {
	var (
		cfg                     config.Config
		o                       options
		seed                    int
		enginesFlag, phasesFlag string
		abbaFlag                string
	)
	fs := config.NewSet("bench", "Usage: make bench BENCH_FLAGS='[flags]'   (the benchmark of BENCHMARKS.md; paths are from the repository's root)", os.Stderr)
	cfg.RegisterTemporal(fs)
	cfg.RegisterDatabase(fs)
	cfg.RegisterRocketMQ(fs)
	cfg.RegisterLog(fs)
	bs := func(name, usage string) config.Setting { return config.Own("ORDERFLOW_BENCH_", name, usage) }
	fs.Int(&o.orders, 600, bs("orders", "orders of the e2e and pipeline floor drains, whose scenario every steady cell repeats at its rate (600 orders make about 3,200 events)"))
	fs.Int(&o.concurrency, 32, bs("concurrency", "bridge concurrency"))
	fs.Int(&o.batch, 16, bs("batch-size", "messages per consumer callback; the bridge sends the events of one order in a callback in one signal"))
	fs.Float(&o.dupRate, 0.5, bs("dup-rate", "share of the events sent twice in the duplicate scenario (compared with none)"))
	fs.Int(&o.hotEvents, 2000, bs("hot-events", "events of the hot order (0 skips it)"))
	fs.Int(&o.hotMaxEvents, 500, bs("hot-max-events", "the hot order's bridge continues its workflow as new after this many events (-workflow-max-events; 0: when Temporal suggests)"))
	fs.Int(&o.dupOrders, 150, bs("dup-orders", "orders of each of the four duplicate drains (A B B A)"))
	fs.Int(&o.directInFlight, 64, bs("direct-in-flight", "SignalWithStart requests the direct floor's client has in flight at most (an order's one at a time)"))
	fs.Float(&o.sweep.Start, 0.3, bs("sweep-start", "orderflow's capacity sweep's first rate, as a share of its backlog drain's rate (the floors' start at -sweep-floor-factor x the capacity of the stage after them)"))
	fs.Float(&o.sweep.Factor, 1.45, bs("sweep-factor", "orderflow's capacity sweep's step up (or down while no step passed); from a pass and a fail 1.45 apart, three bisections reach 5%"))
	fs.Float(&o.floorFactor, 1.15, bs("sweep-floor-factor", "the floors' capacity sweeps' step up (or down), from the capacity of the stage after them"))
	fs.Int(&o.sweep.MaxSteps, 10, bs("sweep-steps", "at most this many steps per sweep"))
	fs.Float(&o.sweep.Within, 0.05, bs("sweep-within", "the sweep bisects between the highest pass and the lowest fail until the lowest fail is within this share of the highest pass (the capacity's resolution)"))
	fs.Duration(&o.sweep.Step, 20*time.Second, bs("sweep-step", "how long each step's rate is offered: a rate 1 s / sweep-step over capacity (5% at 20s, the bisection's resolution) builds a backlog that fails p99 <= 1 s within the step"))
	fs.Duration(&o.sweep.Cell, 20*time.Second, bs("sweep-cell", "how long each cell at one rate is offered (phases interleave and abba)"))
	fs.String(&enginesFlag, "dev,server", bs("engines", "Temporal engines to measure on, in this order: dev, the dev server (SQLite, ports 7433, 7442 and 8433); server, the Temporal server on a PostgreSQL of its own (7333-7343 and 8333)"))
	fs.String(&abbaFlag, "", bs("abba-env", "the abba phase's B: variables added to the worker's and the bridge's environment, KEY=VALUE separated by spaces "+
		"(ORDERFLOW_BRIDGE_CONCURRENCY and ORDERFLOW_BRIDGE_BATCH_SIZE replace -concurrency and -batch-size)"))
	fs.Bool(&o.abbaSweeps, false, bs("abba-sweeps", "the abba phase also sweeps each variant's capacity, A B B A, before its cells at one rate"))
	fs.String(&phasesFlag, strings.Join(defaultPhases, ","), bs("phases", "phases run on each engine (dup and hot on the first only), in this order whatever the flag's (open needs e2e and floor; interleave needs open and direct; abba, an experiment run only when named, needs e2e and -abba-env; direct needs none): "+strings.Join(phaseNames, ", ")))
	fs.Int(&o.goMaxProcs, 1, bs("gomaxprocs", "GOMAXPROCS of the worker and the bridge: 1, as the chart sets it from their default CPU requests (values goMaxProcs); 0: Go's default, a thread per core"))
	fs.Int(&o.serverShards, 4, bs("server-shards", "history shards of the server engine"))
	fs.Int(&seed, 42, bs("seed", "scenario seed"))
	fs.String(&o.chart, "docs/bench-throughput.png", bs("chart", "PNG chart of the sweeps' throughput and p99 against the offered rate"))
	fs.String(&o.logDir, ".data/bench", bs("log-dir", "directory of the processes' logs and metrics"))
	fs.String(&o.resultsDir, "bench/results", bs("results-dir", "directory of the results files, one per run, named by date and commit"))
	if err := fs.Parse(args, nil); err != nil {
		return cfg, o, err
	}
	if len(fs.Args()) > 0 {
		return cfg, o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.goMaxProcs < 0 {
		return cfg, o, fmt.Errorf("-gomaxprocs must be >= 0, got %d", o.goMaxProcs)
	}
	o.seed = int64(seed)
	var err error
	if o.engines, err = parseNames(enginesFlag, engineNames); err != nil {
		return cfg, o, fmt.Errorf("-engines: %w", err)
	}
	if o.phases, err = parseNames(phasesFlag, phaseNames); err != nil {
		return cfg, o, fmt.Errorf("-phases: %w", err)
	}
	// Phases run in their own order; open's sweeps start from e2e's and
	// floor's rates.
	slices.SortFunc(o.phases, func(a, b string) int { return slices.Index(phaseNames, a) - slices.Index(phaseNames, b) })
	if slices.Contains(o.phases, "open") && !(slices.Contains(o.phases, "e2e") && slices.Contains(o.phases, "floor")) {
		return cfg, o, errors.New("-phases: the open phase needs the e2e and floor phases")
	}
	if slices.Contains(o.phases, "interleave") && !(slices.Contains(o.phases, "open") && slices.Contains(o.phases, "direct")) {
		return cfg, o, errors.New("-phases: the interleave phase needs the open and direct phases")
	}
	o.abbaEnv = strings.Fields(abbaFlag)
	for _, kv := range o.abbaEnv {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return cfg, o, fmt.Errorf("-abba-env: %q is not KEY=VALUE", kv)
		}
	}
	if slices.Contains(o.phases, "abba") && (!slices.Contains(o.phases, "e2e") || len(o.abbaEnv) == 0) {
		return cfg, o, errors.New("-phases: the abba phase needs the e2e phase and -abba-env")
	}
	return cfg, o, o.check()
}

// parseNames parses a comma-separated list of known names, each named
// once.
func parseNames(s string, known []string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		name := strings.TrimSpace(f)
		switch {
		case !slices.Contains(known, name):
			return nil, fmt.Errorf("unknown name %q (known: %s)", name, strings.Join(known, ", "))
		case slices.Contains(out, name):
			return nil, fmt.Errorf("%q named twice", name)
		}
		out = append(out, name)
	}
	return out, nil
}

// check rejects values out of range.
func (o options) check() error {
	if !(o.sweep.Start > 0 && o.sweep.Factor > 1 && o.floorFactor > 1) {
		return fmt.Errorf("-sweep-start must be > 0, -sweep-factor and -sweep-floor-factor > 1, got %g, %g and %g",
			o.sweep.Start, o.sweep.Factor, o.floorFactor)
	}
	if !(o.sweep.Within > 0 && o.sweep.Within < 1) {
		return fmt.Errorf("-sweep-within must be within (0, 1), got %g", o.sweep.Within)
	}
	if !(o.dupRate > 0 && o.dupRate <= 1) {
		return fmt.Errorf("-dup-rate must be within (0, 1], got %g", o.dupRate)
	}
	if o.sweep.Step < time.Second || o.sweep.Cell < time.Second {
		return fmt.Errorf("-sweep-step and -sweep-cell must be at least 1s, got %s and %s", o.sweep.Step, o.sweep.Cell)
	}
	for name, v := range map[string]int{"orders": o.orders, "concurrency": o.concurrency,
		"batch-size": o.batch, "server-shards": o.serverShards, "dup-orders": o.dupOrders, "sweep-steps": o.sweep.MaxSteps,
		"direct-in-flight": o.directInFlight} {
		if v < 1 {
			return fmt.Errorf("-%s must be >= 1, got %d", name, v)
		}
	}
	if o.hotEvents != 0 && o.hotEvents < 5 {
		return fmt.Errorf("-hot-events must be 0 or >= 5, got %d", o.hotEvents)
	}
	if o.hotMaxEvents < 0 {
		return fmt.Errorf("-hot-max-events must be >= 0, got %d", o.hotMaxEvents)
	}
	return nil
}

func run(ctx context.Context, args []string, out io.Writer) error {
	cfg, o, err := parse(args)
	if err != nil {
		return err
	}
	// The benchmark, a module of its own (bench/), works from the
	// repository's root, where its flags' paths and scripts/stack.sh are.
	if err := chdirRoot(); err != nil {
		return err
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	mq.UseSlog(slog.Default(), slog.LevelError)
	// The commit before the run writes its chart, a tracked file.
	res := results{Started: time.Now(), Commit: gitCommit("."), GoMaxProcs: o.goMaxProcs}
	b, err := newBench(cfg, o, out)
	if err != nil {
		return err
	}
	engines, err := prepareEngines(ctx, o, cfg, b.logDir)
	defer func() {
		for _, e := range engines {
			e.down()
		}
	}()
	if err != nil {
		return err
	}
	if err := b.build(ctx); err != nil {
		return err
	}
	b.cpu = startCPUSampler(ctx, 500*time.Millisecond)
	defer b.cpu.Stop()
	for i, e := range engines {
		er, err := b.runEngine(ctx, e, i == 0)
		if err != nil {
			return fmt.Errorf("[%s] %w", e.Name, err)
		}
		res.Engines = append(res.Engines, er)
	}
	return finish(res, o, out)
}

// build builds the worker and the bridge when a phase runs them: every
// phase but direct.
func (b *bench) build(ctx context.Context) error {
	if !slices.ContainsFunc(b.o.phases, func(p string) bool { return p != "direct" }) {
		return nil
	}
	fmt.Fprintf(b.out, "building worker and bridge ...\n")
	var err error
	if b.workerBin, err = procs.Build(ctx, "github.com/orderflow/orderflow/worker", b.logDir); err != nil {
		return err
	}
	b.bridgeBin, err = procs.Build(ctx, "github.com/orderflow/orderflow/starter", b.logDir)
	return err
}

// newBench checks that the stack's broker answers and makes the run's log
// directory.
func newBench(cfg config.Config, o options, out io.Writer) (*bench, error) {
	b := &bench{cfg: cfg, o: o, out: out}
	var err error
	if b.tls, err = cfg.RocketMQTLSConfig(); err != nil {
		return nil, err
	}
	for _, a := range strings.Split(cfg.RocketMQNamesrv, ",") {
		if a = strings.TrimSpace(a); a != "" {
			b.namesrv = append(b.namesrv, a)
			if err := dialCheck("RocketMQ name server", a); err != nil {
				return nil, err
			}
		}
	}
	b.broker = os.Getenv("ROCKETMQ_BROKER")
	if b.broker == "" {
		b.broker = "127.0.0.1:10911"
	}
	if err := dialCheck("RocketMQ broker", b.broker); err != nil {
		return nil, err
	}
	b.logDir = filepath.Join(o.logDir, time.Now().Format("20060102-150405"))
	if err := os.MkdirAll(b.logDir, 0o755); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "orderflow bench: logs in %s\n", b.logDir)
	return b, nil
}

// finish draws the chart, writes the results file and prints the last
// lines.
func finish(res results, o options, out io.Writer) error {
	if slices.Contains(o.phases, "open") {
		if err := drawSweepChart(o.chart, res); err != nil {
			return fmt.Errorf("chart: %w", err)
		}
		fmt.Fprintf(out, "chart:    %s\n", o.chart)
	} else {
		fmt.Fprintf(out, "chart:    not drawn (no open phase)\n")
	}
	res.Took = time.Since(res.Started).Round(time.Second).String()
	path, err := writeResults(o.resultsDir, res)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "results:  %s\n", path)
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

// summaryLines are the last lines of a run: each engine's figures, the
// reference engine's last and untagged, the others tagged with their name.
// Its floor is the direct floor's capacity, and floor_ratio orderflow's
// capacity over it.
func summaryLines(res results) []string {
	var out []string
	var last string
	for _, er := range res.Engines {
		tag := ""
		if er.Name != referenceEngine {
			tag = " [temporal=" + er.Name + "]"
		}
		var p99, actions float64
		if s := er.Sweep; s != nil {
			if s.Near != nil {
				p99 = float64(s.Near.P99) / float64(time.Millisecond)
				if s.Near.Cost != nil {
					actions = s.Near.Cost.Actions
				}
			}
		}
		r := er.Interleaved.ratios()
		l := fmt.Sprintf("orderflow bench%s: e2e=%s floor=%s floor_ratio=%s capacity=%s p99_ms=%s actions_per_event=%s "+
			"pipeline_ratio=%s own_cpu_ratio=%s engine_cpu_ratio=%s cpu_ratio=%s",
			tag, figure(er.E2E.Rate, 1), figure(capacity(er.DirectSweep), 1), figure(er.DirectRatio, 2), figure(capacity(er.Sweep), 1),
			figure(p99, 0), figure(actions, 2), figure(er.CapacityRatio, 2), figure(r.OwnEngine, 2), figure(r.Engine, 2), figure(r.All, 2))
		if er.Name == referenceEngine {
			last = l
		} else {
			out = append(out, l)
		}
	}
	if last != "" {
		out = append(out, last)
	}
	return out
}

// figure formats v with prec decimals, or "-" when it was not measured
// (0).
func figure(v float64, prec int) string {
	if v == 0 {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}
