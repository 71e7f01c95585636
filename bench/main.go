// Command bench measures orderflow on the local stack (`make up`) in
// honest units: distinct events per second, publish-to-applied latency. It
// measures what BENCHMARKS.md reports, and nothing else.
//
// Once, without Temporal:
//
//   - baseline: the e2e scenario drained by an in-process RocketMQ push
//     consumer running the same ApplyEvent and points transactions.
//
// Then on each Temporal engine (-engines: dev, a Temporal dev server, and
// server, the Temporal server on the local PostgreSQL; the benchmark starts
// each afresh through scripts/stack.sh and stops it when its phases are
// done):
//
//   - e2e: a scenario (20% duplicates, reordering, gaps, conflicts, bad
//     messages) published to a fresh topic before any consumer starts, then
//     drained by the real bridge and worker processes into a fresh
//     database: distinct events per second from the first database effect
//     to the last; the ratio is e2e/baseline;
//   - floor: the engine's floor, the same stream through the same bridge
//     into a workflow of the benchmark's that only receives its signals
//     (floorWorkflow): e2e/floor is orderflow's own overhead;
//   - duplicates: the e2e drain without duplicates and with 50%;
//   - hot order: one order receiving 2,000 events; every run of its
//     workflow must end by continue-as-new;
//   - open loop: the e2e scenario published at a steady rate, a few shares
//     of the engine's e2e rate (half of it is the headline), with the
//     p50/p95/p99 latency from a business key's publish to its order_events
//     row.
//
// -phases runs some of them only. Every orderflow cell ends with the
// invariants checked (check.WaitSettled), the floor's once its workflows
// received every event; every Temporal cell with the engine's work per
// event (engineCost: the engine's action counter, a sample of histories,
// the cell database's statistics). The run draws the chart, writes its
// results to bench/results/<date>-<commit>.json and ends with a line per
// engine, the dev engine's last ("-": not measured; the capacity is not
// yet):
//
//	orderflow bench [temporal=server]: e2e=<events/s> floor=<events/s> floor_ratio=<e2e/floor> capacity=- p99_ms=<steady-rate p99> actions_per_event=<steady rate>
//	orderflow bench: e2e=<events/s> floor=<events/s> floor_ratio=<e2e/floor> capacity=- p99_ms=<steady-rate p99> actions_per_event=<steady rate>
//
// Run it with `make bench`.
package main

import (
	"context"
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
)

// bench holds the settings and shared resources of a benchmark run.
type bench struct {
	cfg                    config.Config
	namesrv                []string
	broker                 string
	workerBin, bridgeBin   string
	workerArgs, bridgeArgs []string
	logDir                 string
	settleWait             time.Duration
	// metricsAddrs are the metrics addresses of the current cell's
	// processes, by name.
	metricsAddrs map[string]string
	// cpu samples the machine's processes for the whole run.
	cpu *cpuSampler
	// cleanup counts the workflows the cells terminated once measured.
	cleanup *cleanupStats
	// tc is the current engine's client and engineMetrics its Prometheus
	// endpoint; floor receives the current floor cell's events.
	tc            client.Client
	engineMetrics string
	floor         *floorTracker
}

// options are the command's flags.
type options struct {
	orders, concurrency, workers, batch int
	seed                                int64
	dupRate                             float64
	hotEvents, hotMaxEvents             int
	open                                openLoopPlan
	chart, logDir, resultsDir           string
	// redraw, when set, is a results file of an earlier run whose chart
	// the benchmark draws again (at chart), measuring nothing.
	redraw                 string
	workerArgs, bridgeArgs string
	// engines are the Temporal engines measured, in this order, and
	// phases the phases run on each, in this order.
	engines []engineSpec
	phases  []string
	// serverPorts and devPorts are the engines' frontend and UI ports;
	// serverShards the server engine's history shards.
	serverPorts, devPorts []int
	serverShards          int
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

// intList parses a comma-separated list of positive integers.
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

// lists are the flags given as comma-separated lists, parsed after the
// flag set.
type lists struct{ fractions, engines, phases, serverPorts, devPorts string }

// phaseNames are the phases of an engine, in the order they run.
var phaseNames = []string{"e2e", "floor", "dup", "hot", "open"}

func parse(args []string) (config.Config, options, error) {
	var (
		cfg  config.Config
		o    options
		l    lists
		seed int
	)
	fs := config.NewSet("bench", "Usage: make bench BENCH_FLAGS='[flags]'   (the benchmark of BENCHMARKS.md; paths are from the repository's root)", os.Stderr)
	cfg.RegisterTemporal(fs)
	cfg.RegisterDatabase(fs)
	cfg.RegisterRocketMQ(fs)
	cfg.RegisterLog(fs)
	bs := func(name, usage string) config.Setting { return config.Own("ORDERFLOW_BENCH_", name, usage) }
	fs.Int(&o.orders, 1100, bs("orders", "orders of the e2e, baseline and duplicate scenarios (1100 orders make about 5,500 events)"))
	fs.Int(&o.concurrency, 32, bs("concurrency", "bridge (and direct consumer) concurrency"))
	fs.Int(&o.workers, 1, bs("workers", "worker processes of the orderflow runs"))
	fs.Int(&o.batch, 16, bs("batch-size", "messages per consumer callback; the bridge sends the events of one order in a callback in one signal"))
	fs.Float(&o.dupRate, 0.5, bs("dup-rate", "share of the events sent twice in the duplicate scenario (compared with none)"))
	fs.Int(&o.hotEvents, 2000, bs("hot-events", "events of the hot order (0 skips it)"))
	fs.Int(&o.hotMaxEvents, 500, bs("hot-max-events", "the hot order's bridge continues its workflow as new after this many events (-workflow-max-events; 0: when Temporal suggests)"))
	fs.String(&l.fractions, "0.25,0.5,0.75", bs("open-rates", "offered rates of the open-loop runs, as shares of each engine's e2e rate"))
	fs.Float(&o.open.Steady, 0.5, bs("steady-rate", "the open-loop share of the e2e rate whose p99 the last line reports (run even when not in -open-rates)"))
	fs.Duration(&o.open.Duration, time.Minute, bs("open-duration", "how long the steady open-loop rate (-steady-rate) is offered"))
	fs.Duration(&o.open.Others, 30*time.Second, bs("open-other-duration", "how long each other open-loop rate is offered (at most -open-duration)"))
	fs.String(&l.engines, "dev,server", bs("engines", "Temporal engines to measure on, in this order: "+engineNames()))
	fs.String(&l.phases, strings.Join(phaseNames, ","), bs("phases", "phases run on each engine (open needs e2e): "+strings.Join(phaseNames, ", ")))
	fs.String(&l.serverPorts, "7333,8333", bs("server-ports", "frontend and UI ports of the server engine (it also takes the nine ports above the frontend's)"))
	fs.Int(&o.serverShards, 4, bs("server-shards", "history shards of the server engine"))
	fs.String(&l.devPorts, "7433,8433", bs("dev-ports", "frontend and UI ports of the dev engine"))
	fs.Int(&seed, 42, bs("seed", "scenario seed"))
	fs.String(&o.chart, "docs/bench-throughput.png", bs("chart", "PNG chart of throughput and latency against the offered rate"))
	fs.String(&o.redraw, "", bs("redraw", "draw the chart (-chart) again from an earlier run's results file, measuring nothing"))
	fs.String(&o.logDir, ".data/bench", bs("log-dir", "directory of the processes' logs and metrics"))
	fs.String(&o.resultsDir, "bench/results", bs("results-dir", "directory of the results files, one per run, named by date and commit"))
	fs.String(&o.workerArgs, "", bs("worker-args", "extra flags for the worker processes (space-separated)"))
	fs.String(&o.bridgeArgs, "", bs("bridge-args", "extra flags for the bridge process (space-separated)"))
	if err := fs.Parse(args, nil); err != nil {
		return cfg, o, err
	}
	if len(fs.Args()) > 0 {
		return cfg, o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	o.seed = int64(seed)
	if err := o.parseLists(l); err != nil {
		return cfg, o, err
	}
	return cfg, o, o.check()
}

// parseLists fills the options given as lists.
func (o *options) parseLists(l lists) error {
	var err error
	if o.engines, err = parseEngines(l.engines); err != nil {
		return fmt.Errorf("-engines: %w", err)
	}
	if o.phases, err = parsePhases(l.phases); err != nil {
		return fmt.Errorf("-phases: %w", err)
	}
	if o.serverPorts, err = intList(l.serverPorts); err != nil {
		return fmt.Errorf("-server-ports: %w", err)
	}
	if o.devPorts, err = intList(l.devPorts); err != nil {
		return fmt.Errorf("-dev-ports: %w", err)
	}
	for _, e := range o.engines {
		if err := checkEnginePorts(e.Name, e.Profile, e.Ports(*o)); err != nil {
			return err
		}
	}
	if o.open.Fractions, err = fractionList(l.fractions); err != nil {
		return fmt.Errorf("-open-rates: %w", err)
	}
	return nil
}

// parsePhases parses -phases: known names, each once, run in phaseNames'
// order; open needs e2e (its rates are shares of it).
func parsePhases(s string) ([]string, error) {
	want := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		name := strings.TrimSpace(f)
		if !slices.Contains(phaseNames, name) {
			return nil, fmt.Errorf("unknown phase %q (known: %s)", name, strings.Join(phaseNames, ", "))
		}
		want[name] = true
	}
	if want["open"] && !want["e2e"] {
		return nil, errors.New("the open phase needs the e2e phase")
	}
	var out []string
	for _, name := range phaseNames {
		if want[name] {
			out = append(out, name)
		}
	}
	return out, nil
}

// check rejects values out of range.
func (o options) check() error {
	if !(o.open.Steady > 0 && o.open.Steady <= 2) {
		return fmt.Errorf("-steady-rate must be within (0, 2], got %g", o.open.Steady)
	}
	if !(o.dupRate > 0 && o.dupRate <= 1) {
		return fmt.Errorf("-dup-rate must be within (0, 1], got %g", o.dupRate)
	}
	if o.open.Duration < time.Second || o.open.Others < time.Second {
		return fmt.Errorf("-open-duration and -open-other-duration must be at least 1s, got %s and %s", o.open.Duration, o.open.Others)
	}
	for name, v := range map[string]int{"orders": o.orders, "concurrency": o.concurrency, "workers": o.workers,
		"batch-size": o.batch, "server-shards": o.serverShards} {
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
	// The commit before the run writes its chart, a tracked file.
	res := results{Started: time.Now(), Commit: gitCommit(".")}
	b, err := newBench(cfg, o, out)
	if err != nil {
		return err
	}
	engines, err := prepareEngines(ctx, o, cfg, b.logDir)
	defer func() {
		for _, e := range engines {
			e.stack.down()
		}
	}()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "building worker and bridge ...\n")
	if b.workerBin, b.bridgeBin, err = buildBinaries(ctx, b.logDir); err != nil {
		return err
	}
	b.cpu = startCPUSampler(ctx, 500*time.Millisecond)
	defer b.cpu.Stop()
	if res.Baseline, err = b.runBaseline(ctx, o, out); err != nil {
		return err
	}
	for _, e := range engines {
		er, err := b.runEngine(ctx, e, o, res.Baseline, out)
		if err != nil {
			return fmt.Errorf("[%s] %w", e.Name, err)
		}
		res.Engines = append(res.Engines, er)
	}
	return finish(res, o, out)
}

// newBench checks that the stack's broker answers and makes the run's log
// directory.
func newBench(cfg config.Config, o options, out io.Writer) (*bench, error) {
	b := &bench{cfg: cfg, settleWait: 8 * time.Minute,
		workerArgs: strings.Fields(o.workerArgs), bridgeArgs: strings.Fields(o.bridgeArgs)}
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

// runBaseline is the direct consumer draining the e2e backlog, one
// message per callback as the seed articles consume: no Temporal, once.
func (b *bench) runBaseline(ctx context.Context, o options, out io.Writer) (cellResult, error) {
	base, err := b.runCell(ctx, cellConfig{Name: "baseline", Orders: o.orders, Concurrency: o.concurrency,
		BatchSize: 1, Direct: true, Seed: o.seed, DupRate: 0.2})
	if err != nil {
		return base, fmt.Errorf("baseline: %w", err)
	}
	fmt.Fprintf(out, "baseline: %s\n", describeDrain(base))
	if base.CPU != nil {
		fmt.Fprintf(out, "cpu:      %s\n", describeCPU(base))
	}
	return base, nil
}

// finish draws the chart, writes the results file and prints the last
// lines.
func finish(res results, o options, out io.Writer) error {
	if slices.Contains(o.phases, "open") {
		if err := drawOpenLoopChart(o.chart, res); err != nil {
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
func summaryLines(res results) []string {
	var out []string
	var last string
	for _, er := range res.Engines {
		tag := ""
		if er.Name != referenceEngine {
			tag = " [temporal=" + er.Name + "]"
		}
		floor := 0.0
		if er.Floor != nil {
			floor = er.Floor.Rate
		}
		// The capacity sweep is not measured yet: "-".
		l := fmt.Sprintf("orderflow bench%s: e2e=%s floor=%s floor_ratio=%s capacity=- p99_ms=%s actions_per_event=%s",
			tag, figure(er.E2E.Rate, 1), figure(floor, 1), figure(er.FloorRatio, 2), figure(er.SteadyP99, 0), figure(er.SteadyActions, 2))
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
