// Command bench measures orderflow on the local stack (`make up`) in
// honest units: distinct events per second, publish-to-applied latency.
//
//   - ceiling (informational): trivial workflows started with
//     SignalWithStart and completed, on a worker with orderflow's worker
//     settings (no database, no broker), in workflows/s;
//   - e2e: a scenario (20% duplicates, reordering, gaps, conflicts, bad
//     messages) published to a fresh RocketMQ topic before any consumer
//     starts, then drained by the real bridge and worker processes into a
//     fresh database: distinct events per second from the first database
//     effect to the last;
//   - baseline: the same scenario, the same way, drained by an in-process
//     RocketMQ push consumer running the same ApplyEvent and points
//     transactions without Temporal; the ratio is e2e/baseline;
//   - duplicates: the e2e drain of the scenario without duplicates and with
//     50%, in distinct events per second;
//   - hot order: one order receiving 2,000 events, drained by orderflow;
//     every run of its workflow must end by continue-as-new;
//   - open loop: the e2e scenario published at a steady rate, a few shares
//     of the e2e rate (half of it is the headline), for 60 s each, with the
//     p50/p95/p99 latency from a business key's publish to its
//     order_events row;
//   - scaling: smaller e2e drains over bridge concurrency and worker
//     processes;
//   - flush: the broker's flush cost, on two temporary RocketMQ name
//     servers and brokers started beside the stack's, one with
//     ASYNC_FLUSH and one with SYNC_FLUSH: the producer's send rate and
//     latency with one sender and with several, and the e2e backlog drain,
//     on each (-flush=false skips it).
//
// Every run ends with the invariants checked (check.WaitSettled). It draws
// throughput and p99 against the offered rate as a PNG and ends with the
// line
//
//	orderflow bench: e2e=<events/s> baseline=<events/s> ratio=<e2e/baseline> p99_ms=<steady-rate p99>
//
// Run it with `make bench`.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
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
	settleWait time.Duration
	// metricsAddrs are the metrics addresses of the current cell's
	// processes, by name.
	metricsAddrs map[string]string
	// cpu samples the machine's processes for the whole run.
	cpu *cpuSampler
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
	workerArgs, bridgeArgs              string
	skipScaling, skipDup, profile       bool
	// batchCompare runs the e2e drain and the hot order again with one
	// signal per event (batch size 1), the behaviour before batching.
	batchCompare bool
	flush        flushPlan
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
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
	fs.String(&fractions, "0.25,0.5,0.75", bs("open-rates", "offered rates of the open-loop runs, as shares of the e2e rate"))
	fs.Float(&o.open.Steady, 0.5, bs("steady-rate", "the open-loop share of the e2e rate whose p99 the last line reports (run even when not in -open-rates)"))
	fs.Duration(&o.open.Duration, time.Minute, bs("open-duration", "how long each open-loop rate is offered"))
	fs.Int(&o.scaleOrders, 160, bs("scale-orders", "orders of each scaling cell"))
	fs.String(&scaleConc, "8,32,64", bs("scale-concurrency", "bridge concurrencies of the scaling table"))
	fs.String(&scaleW, "1,2", bs("scale-workers", "worker process counts of the scaling table"))
	fs.Bool(&o.skipScaling, false, bs("skip-scaling", "skip the scaling table"))
	var asyncPorts, syncPorts string
	fs.Bool(&o.flush.Enabled, true, bs("flush", "measure the broker's flush cost (ASYNC_FLUSH against SYNC_FLUSH) on two temporary brokers"))
	fs.Int(&o.flush.Messages, 5000, bs("flush-messages", "messages of each send measurement of the flush step, per broker"))
	fs.Int(&o.flush.Senders, 8, bs("flush-senders", "concurrent senders of the flush step's second send measurement"))
	fs.Int(&o.flush.Orders, 300, bs("flush-orders", "orders of the flush step's e2e backlog drain on each broker (smaller than -orders to keep the run short; 0: -orders)"))
	fs.String(&asyncPorts, "39876,40911", bs("flush-async-ports", "name server and broker ports of the flush step's ASYNC_FLUSH broker"))
	fs.String(&syncPorts, "39886,40921", bs("flush-sync-ports", "name server and broker ports of the flush step's SYNC_FLUSH broker"))
	fs.Bool(&o.profile, true, bs("profile", "capture 15s CPU profiles of the e2e run's worker and bridge and their SDK metrics into the log directory"))
	var seed int
	fs.Int(&seed, 42, bs("seed", "scenario seed"))
	fs.String(&o.chart, "docs/bench-throughput.png", bs("chart", "PNG chart of throughput and p99 against the offered rate"))
	fs.String(&o.logDir, ".data/bench", bs("log-dir", "directory of the processes' logs and the results file"))
	fs.String(&o.workerArgs, "", bs("worker-args", "extra flags for the worker processes (space-separated)"))
	fs.String(&o.bridgeArgs, "", bs("bridge-args", "extra flags for the bridge process (space-separated)"))
	fs.Int(&t.MaxActivities, 100, bs("max-concurrent-activities", "worker setting, for the ceiling and the worker processes"))
	fs.Int(&t.MaxWorkflowTasks, 100, bs("max-concurrent-workflow-tasks", "worker setting, for the ceiling and the worker processes"))
	fs.Int(&t.ActivityPollers, 4, bs("activity-pollers", "worker setting, for the ceiling and the worker processes"))
	fs.Int(&t.WorkflowPollers, 4, bs("workflow-pollers", "worker setting, for the ceiling and the worker processes"))
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
	for name, v := range map[string]int{"orders": o.orders, "concurrency": o.concurrency, "workers": o.workers,
		"batch-size": o.batch, "ceiling-workflows": o.ceilingN, "ceiling-concurrency": o.ceilingConc,
		"scale-orders": o.scaleOrders, "flush-senders": o.flush.Senders} {
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
	return cfg, t, o, nil
}

// results is everything a run measured, written as JSON next to the logs.
type results struct {
	Started  time.Time   `json:"started"`
	Took     string      `json:"took"`
	Ceiling  ceilingJSON `json:"ceiling"`
	E2E      cellResult  `json:"e2e"`
	Baseline cellResult  `json:"baseline"`
	// Ratio is e2e/baseline, both in distinct events/s draining a backlog
	// of the same scenario.
	Ratio float64     `json:"ratio_e2e_baseline"`
	NoDup *cellResult `json:"no_duplicates,omitempty"`
	Dup   *cellResult `json:"duplicates,omitempty"`
	Hot   *cellResult `json:"hot_order,omitempty"`
	// E2EOne and HotOne are the e2e drain and the hot order with one
	// signal per event (absent with -batch-compare=false).
	E2EOne    *cellResult  `json:"e2e_one_signal_per_event,omitempty"`
	HotOne    *cellResult  `json:"hot_order_one_signal_per_event,omitempty"`
	OpenLoop  []cellResult `json:"open_loop"`
	Steady    cellResult   `json:"steady"`
	Scaling   []cellResult `json:"scaling,omitempty"`
	SteadyP99 float64      `json:"steady_p99_ms"`
	// Flush is the broker's flush cost (absent with -flush=false).
	Flush *flushResult `json:"flush,omitempty"`
}

type ceilingJSON struct {
	Workflows int     `json:"workflows"`
	Seconds   float64 `json:"seconds"`
	Rate      float64 `json:"rate"`
}

func run(ctx context.Context, args []string, out io.Writer) error {
	cfg, t, o, err := parse(args)
	if err != nil {
		return err
	}
	began := time.Now()
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	mq.UseSlog(slog.Default(), slog.LevelError)

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
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	tc, err := obs.NewTemporalClient(dctx, cfg, slog.Default(), nil)
	cancel()
	if err != nil {
		return fmt.Errorf("%w; %s", err, makeUp)
	}
	defer tc.Close()

	b.logDir = filepath.Join(o.logDir, time.Now().Format("20060102-150405"))
	if err := os.MkdirAll(b.logDir, 0o755); err != nil {
		return err
	}
	fmt.Fprintf(out, "orderflow bench: logs in %s\n", b.logDir)
	var flushBrokers [2]*flushBroker
	if o.flush.Enabled {
		// Before the long phases: the flush step's ports must be free.
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
	res := results{Started: began}
	// 1. Ceiling (informational: workflows/s is not events/s).
	cr, err := runCeiling(ctx, tc, t, o.ceilingN, o.ceilingConc)
	if err != nil {
		return fmt.Errorf("ceiling: %w", err)
	}
	res.Ceiling = ceilingJSON{cr.Workflows, cr.Elapsed.Seconds(), cr.Rate}
	ceilingLine := fmt.Sprintf("ceiling:  %d trivial signal-started workflows (%d in flight) in %.1fs = %.1f wf/s (informational: Temporal alone, not comparable with events/s)",
		cr.Workflows, o.ceilingConc, cr.Elapsed.Seconds(), cr.Rate)
	fmt.Fprintln(out, ceilingLine)

	// 2. orderflow draining a backlog.
	e2e, err := b.runCell(ctx, cellConfig{Name: "e2e", Orders: o.orders, Concurrency: o.concurrency,
		BatchSize: o.batch, Workers: o.workers, Seed: o.seed, DupRate: 0.2, Profile: o.profile})
	if err != nil {
		return fmt.Errorf("e2e: %w", err)
	}
	res.E2E = e2e
	fmt.Fprintf(out, "e2e:      %s\n", describeDrain(e2e))
	if len(e2e.Metrics) > 0 {
		fmt.Fprintf(out, "profile:  %s\n", profileLine(b.logDir, e2e))
	}
	if e2e.CPU != nil {
		fmt.Fprintf(out, "cpu:      %s\n", describeCPU(e2e))
	}

	// 3. The direct-consumer baseline draining the same backlog, one
	// message per callback as the seed articles consume.
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
	res.Ratio = e2e.Rate / base.Rate
	fmt.Fprintf(out, "ratio:    e2e/baseline = %.2f (distinct events/s, both draining a backlog of the same scenario)\n", res.Ratio)

	// 4. Duplicates: the same drain without duplicates and with dupRate.
	if !o.skipDup {
		nodup, err := b.runCell(ctx, cellConfig{Name: "dup0", Orders: o.orders, Concurrency: o.concurrency,
			BatchSize: o.batch, Workers: o.workers, Seed: o.seed})
		if err != nil {
			return fmt.Errorf("no-duplicate scenario: %w", err)
		}
		dup, err := b.runCell(ctx, cellConfig{Name: fmt.Sprintf("dup%.0f", 100*o.dupRate), Orders: o.orders,
			Concurrency: o.concurrency, BatchSize: o.batch, Workers: o.workers, Seed: o.seed, DupRate: o.dupRate})
		if err != nil {
			return fmt.Errorf("duplicate scenario: %w", err)
		}
		res.NoDup, res.Dup = &nodup, &dup
		fmt.Fprintf(out, "no dups:  %s\n", describeDrain(nodup))
		fmt.Fprintf(out, "%.0f%% dups: %s\n", 100*o.dupRate, describeDrain(dup))
		fmt.Fprintf(out, "dups:     %.0f%% duplicates / none = %.2f in distinct events/s\n", 100*o.dupRate, dup.Rate/nodup.Rate)
	}

	// 5. One hot order.
	runHot := func(name string, batch int) (cellResult, error) {
		return b.runCell(ctx, cellConfig{Name: name, Orders: 1, Concurrency: o.concurrency,
			BatchSize: batch, Workers: o.workers, Seed: o.seed,
			BridgeArgs: []string{"-workflow-max-events", strconv.Itoa(o.hotMaxEvents)},
			generate: func(prefix string) (*scenario.Scenario, error) {
				return hotScenario(prefix, o.hotEvents, time.Now())
			},
			inspect: func(ctx context.Context, r *cellResult) error {
				hr, err := checkHot(ctx, tc, cfg.TemporalNamespace, scenario.OrderID(r.Prefix, 0))
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
		fmt.Fprintf(out, "hot:      %d events of one order (batch size %d) drained in %.1fs = %.1f events/s, continuing as new %s; %d signals; its workflow: %s\n",
			hot.Events, batch, hot.Elapsed.Seconds(), hot.Rate, can, hot.Signals, hot.Hot)
		if o.hotMaxEvents > 0 && hot.Hot.MaxEvents > 2*o.hotMaxEvents {
			fmt.Fprintf(out, "hot:      continue-as-new was deferred under the stream: a run handled %d events, not about %d\n",
				hot.Hot.MaxEvents, o.hotMaxEvents)
		}
	}
	if o.hotEvents > 0 {
		hot, err := runHot("hot", o.batch)
		if err != nil {
			return fmt.Errorf("hot order: %w", err)
		}
		res.Hot = &hot
		describeHot(hot, o.batch)
	}

	// 5b. Before batching: one signal per event.
	if o.batchCompare && o.batch > 1 {
		one, err := b.runCell(ctx, cellConfig{Name: "e2e-b1", Orders: o.orders, Concurrency: o.concurrency,
			BatchSize: 1, Workers: o.workers, Seed: o.seed, DupRate: 0.2})
		if err != nil {
			return fmt.Errorf("e2e with batch size 1: %w", err)
		}
		res.E2EOne = &one
		fmt.Fprintf(out, "e2e-b1:   %s\n", describeDrain(one))
		line := fmt.Sprintf("batching: batch size %d / 1: e2e %.2f in distinct events/s (%d / %d signals)",
			o.batch, e2e.Rate/one.Rate, e2e.Signals, one.Signals)
		if o.hotEvents > 0 {
			hot1, err := runHot("hot-b1", 1)
			if err != nil {
				return fmt.Errorf("hot order with batch size 1: %w", err)
			}
			res.HotOne = &hot1
			describeHot(hot1, 1)
			line += fmt.Sprintf(", hot order %.2f (%d / %d signals)", res.Hot.Rate/hot1.Rate, res.Hot.Signals, hot1.Signals)
		}
		fmt.Fprintln(out, line)
	}

	// 6. Open loop at shares of the e2e rate.
	fmt.Fprintf(out, "open loop: the e2e scenario published at a steady rate for %s per rate; latency = publish -> order_events row\n", o.open.Duration)
	fmt.Fprintf(out, "| offered events/s | share of e2e | achieved events/s | p50 | p95 | p99 |\n|---|---|---|---|---|---|\n")
	perOrder := float64(e2e.Events) / float64(e2e.Config.Orders)
	for _, f := range o.open.fractions() {
		offered := f * e2e.Rate
		r, err := b.runCell(ctx, cellConfig{Name: fmt.Sprintf("open-%.2f", f),
			Orders: ordersFor(offered, o.open.Duration, perOrder), Concurrency: o.concurrency, BatchSize: o.batch,
			Workers: o.workers, Seed: o.seed + int64(1000*f), DupRate: 0.2, Offered: offered, Fraction: f})
		if err != nil {
			return fmt.Errorf("open loop at %.2f x e2e: %w", f, err)
		}
		res.OpenLoop = append(res.OpenLoop, r)
		fmt.Fprintf(out, "| %.1f | %.2f | %.1f | %s | %s | %s |\n", r.Config.Offered, f, r.Rate,
			ms(r.P50), ms(r.P95), ms(r.P99))
	}
	if res.Steady, err = steadyResult(res.OpenLoop, o.open.Steady); err != nil {
		return err
	}
	st := res.Steady
	res.SteadyP99 = float64(st.P99) / float64(time.Millisecond)
	fmt.Fprintf(out, "steady:   %.2f x e2e = %.1f events/s (%.1f messages/s kept by the publisher) for %.0fs: p50 %s p95 %s p99 %s\n",
		o.open.Steady, st.Config.Offered, st.PublishRate, st.Publish.Seconds(), ms(st.P50), ms(st.P95), ms(st.P99))
	if err := drawOpenLoopChart(o.chart, res); err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	fmt.Fprintf(out, "chart:    %s\n", o.chart)

	// 7. Scaling table.
	if !o.skipScaling {
		fmt.Fprintf(out, "scaling (backlog of %d orders per cell, distinct events/s):\n", o.scaleOrders)
		fmt.Fprintf(out, "| bridge concurrency |")
		for _, w := range o.scaleWorkers {
			fmt.Fprintf(out, " %d worker(s) |", w)
		}
		fmt.Fprintf(out, "\n|---|%s\n", strings.Repeat("---|", len(o.scaleWorkers)))
		for _, c := range o.scaleConc {
			fmt.Fprintf(out, "| %d |", c)
			for _, w := range o.scaleWorkers {
				r, err := b.runCell(ctx, cellConfig{Name: fmt.Sprintf("scale-c%d-w%d", c, w), Orders: o.scaleOrders,
					Concurrency: c, BatchSize: o.batch, Workers: w, Seed: o.seed + int64(c*10+w), DupRate: 0.2})
				if err != nil {
					fmt.Fprintln(out)
					return fmt.Errorf("scaling cell concurrency %d, %d workers: %w", c, w, err)
				}
				res.Scaling = append(res.Scaling, r)
				fmt.Fprintf(out, " %.1f |", r.Rate)
			}
			fmt.Fprintln(out)
		}
	}

	// 8. The broker's flush cost.
	if o.flush.Enabled {
		if res.Flush, err = b.runFlush(ctx, o.flush, o, flushBrokers, out); err != nil {
			return fmt.Errorf("flush: %w", err)
		}
	}

	res.Took = time.Since(began).Round(time.Second).String()
	if data, err := json.MarshalIndent(res, "", "  "); err == nil {
		_ = os.WriteFile(filepath.Join(b.logDir, "results.json"), data, 0o644)
	}
	fmt.Fprintf(out, "took %s; every run settled with all invariants holding (check.Verify)\n", res.Took)
	fmt.Fprintln(out, ceilingLine)
	fmt.Fprintf(out, "orderflow bench: e2e=%.1f baseline=%.1f ratio=%.2f p99_ms=%.0f\n", e2e.Rate, base.Rate, res.Ratio, res.SteadyP99)
	return nil
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

// drawOpenLoopChart plots, against the offered rate, the throughput the
// open-loop runs achieved (with the offered rate itself and the e2e backlog
// rate as dashed lines) above their p50 and p99 latency (with the 1 s goal).
func drawOpenLoopChart(path string, res results) error {
	if len(res.OpenLoop) == 0 {
		return errors.New("no open-loop results")
	}
	var ticks []float64
	thr := series{Label: "achieved", Color: colBlue}
	p99 := series{Label: "p99", Color: colRed}
	p50 := series{Label: "p50", Color: colOrng}
	for _, r := range res.OpenLoop {
		x := math.Round(r.Config.Offered*10) / 10
		ticks = append(ticks, x)
		thr.Points = append(thr.Points, [2]float64{x, r.Rate})
		p99.Points = append(p99.Points, [2]float64{x, float64(r.P99) / float64(time.Millisecond)})
		p50.Points = append(p50.Points, [2]float64{x, float64(r.P50) / float64(time.Millisecond)})
	}
	lo, hi := ticks[0], ticks[len(ticks)-1]
	top := chart{
		Title:  fmt.Sprintf("orderflow open loop (direct-consumer baseline: %.0f events/s)", res.Baseline.Rate),
		XLabel: "offered events/s", YLabel: "achieved events/s", XTicks: ticks,
		Series: []series{thr,
			{Label: "offered", Color: colBlack, Dashed: true, Points: [][2]float64{{lo, lo}, {hi, hi}}},
			{Label: "e2e backlog drain", Color: colGreen, Dashed: true,
				Points: [][2]float64{{lo, res.E2E.Rate}, {hi, res.E2E.Rate}}}},
	}
	bottom := chart{
		Title:  "latency from publish to order_events row",
		XLabel: "offered events/s", YLabel: "ms", XTicks: ticks,
		Series: []series{p99, p50,
			{Label: "1 s goal", Color: colBlack, Dashed: true, Points: [][2]float64{{lo, 1000}, {hi, 1000}}}},
	}
	return writeCharts(path, 760, 720, top, bottom)
}

// metricLabel is a short name of an SDK metric for the profile line.
func metricLabel(metric, filter string) string {
	l := strings.TrimSuffix(strings.TrimPrefix(metric, "temporal_"), "_seconds")
	if _, op, ok := strings.Cut(filter, `operation="`); ok {
		l = strings.TrimSuffix(op, `"`)
	}
	return l
}
