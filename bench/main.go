// Command bench measures orderflow's throughput against the Temporal
// ceiling and a direct-consumer baseline, on the local stack (`make up`):
//
//   - ceiling: trivial workflows started with SignalWithStart and completed,
//     on a worker with orderflow's worker settings (no database, no broker);
//   - e2e: a scenario (20% duplicates, reordering, gaps, conflicts, bad
//     messages) published to a fresh RocketMQ topic and consumed by the real
//     bridge and worker processes into a fresh database, until every order
//     settled and the invariants hold (check.Verify): messages per second
//     from the first publish to the last database effect, and the latency
//     from a business key's publish to its order_events row;
//   - baseline: the same scenario consumed by an in-process RocketMQ push
//     consumer running the same ApplyEvent and points transactions, without
//     Temporal;
//   - scaling: smaller e2e runs over bridge concurrency and worker processes.
//
// It draws the scaling chart as a PNG and ends with the line
//
//	orderflow bench: e2e=<events/s> ceiling=<wf/s> baseline=<events/s> ratio=<e2e/ceiling>
//
// Run it with `make bench`.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image/color"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/orderflow/orderflow/config"
	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/internal/obs"
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
}

// options are the command's flags.
type options struct {
	orders, concurrency, workers, batch int
	ceilingN, ceilingConc               int
	scaleOrders                         int
	scaleConc, scaleWorkers             []int
	seed                                int64
	chart, logDir                       string
	workerArgs, bridgeArgs              string
	skipScaling, profile                bool
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
	)
	fs.Int(&o.orders, 1100, bs("orders", "orders of the e2e and baseline scenarios (1100 orders make about 5,500 messages)"))
	fs.Int(&o.concurrency, 32, bs("concurrency", "bridge (and direct consumer) concurrency of the e2e and baseline runs"))
	fs.Int(&o.workers, 1, bs("workers", "worker processes of the e2e run"))
	fs.Int(&o.batch, 1, bs("batch-size", "messages per consumer callback"))
	fs.Int(&o.ceilingN, 1500, bs("ceiling-workflows", "trivial workflows of the ceiling run"))
	fs.Int(&o.ceilingConc, 64, bs("ceiling-concurrency", "workflows in flight in the ceiling run"))
	fs.Int(&o.scaleOrders, 160, bs("scale-orders", "orders of each scaling cell"))
	fs.String(&scaleConc, "8,32,64", bs("scale-concurrency", "bridge concurrencies of the scaling table"))
	fs.String(&scaleW, "1,2", bs("scale-workers", "worker process counts of the scaling table"))
	fs.Bool(&o.skipScaling, false, bs("skip-scaling", "skip the scaling table and the chart"))
	fs.Bool(&o.profile, true, bs("profile", "capture 15s CPU profiles of the e2e run's worker and bridge and their SDK metrics into the log directory"))
	var seed int
	fs.Int(&seed, 42, bs("seed", "scenario seed"))
	fs.String(&o.chart, "docs/bench-throughput.png", bs("chart", "PNG chart of throughput against bridge concurrency"))
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
	for name, v := range map[string]int{"orders": o.orders, "concurrency": o.concurrency, "workers": o.workers,
		"batch-size": o.batch, "ceiling-workflows": o.ceilingN, "ceiling-concurrency": o.ceilingConc, "scale-orders": o.scaleOrders} {
		if v < 1 {
			return cfg, t, o, fmt.Errorf("-%s must be >= 1, got %d", name, v)
		}
	}
	return cfg, t, o, nil
}

// results is everything a run measured, written as JSON next to the logs.
type results struct {
	Started  time.Time    `json:"started"`
	Took     string       `json:"took"`
	Ceiling  ceilingJSON  `json:"ceiling"`
	E2E      cellResult   `json:"e2e"`
	Baseline cellResult   `json:"baseline"`
	Scaling  []cellResult `json:"scaling"`
	Ratio    float64      `json:"ratio_e2e_ceiling"`
	RatioB   float64      `json:"ratio_e2e_baseline"`
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
	fmt.Fprintf(out, "building worker and bridge ...\n")
	if b.workerBin, b.bridgeBin, err = buildBinaries(ctx, b.logDir); err != nil {
		return err
	}
	fmt.Fprintf(out, "worker settings: %d workflow-task slots, %d activity slots, %d/%d workflow/activity pollers %s\n",
		t.MaxWorkflowTasks, t.MaxActivities, t.WorkflowPollers, t.ActivityPollers, strings.Join(b.workerArgs, " "))

	res := results{Started: began}
	// 1. Ceiling.
	cr, err := runCeiling(ctx, tc, t, o.ceilingN, o.ceilingConc)
	if err != nil {
		return fmt.Errorf("ceiling: %w", err)
	}
	res.Ceiling = ceilingJSON{cr.Workflows, cr.Elapsed.Seconds(), cr.Rate}
	fmt.Fprintf(out, "ceiling:  %d trivial signal-started workflows (%d in flight) in %.1fs = %.1f wf/s\n",
		cr.Workflows, o.ceilingConc, cr.Elapsed.Seconds(), cr.Rate)

	// 2. orderflow end to end.
	e2e, err := b.runCell(ctx, cellConfig{Name: "e2e", Orders: o.orders, Concurrency: o.concurrency,
		BatchSize: o.batch, Workers: o.workers, Seed: o.seed, Profile: o.profile})
	if err != nil {
		return fmt.Errorf("e2e: %w", err)
	}
	res.E2E = e2e
	fmt.Fprintf(out, "e2e:      %s\n", describe(e2e))
	if len(e2e.Metrics) > 0 {
		fmt.Fprintf(out, "profile:  CPU profiles and /metrics in %s; SDK means:", b.logDir)
		for _, m := range sdkMeans {
			k := m.process + ":" + m.metric
			if v, ok := e2e.Metrics[k]; ok {
				fmt.Fprintf(out, " %s %s=%s (n=%.0f)", m.process, metricLabel(m.metric, m.filter),
					time.Duration(v*float64(time.Second)).Round(100*time.Microsecond), e2e.Metrics[k+"_count"])
			}
		}
		if n := e2e.Metrics["worker1:temporal_workflow_task_execution_latency_seconds_count"]; n > 0 && o.workers == 1 {
			fmt.Fprintf(out, "; %.2f workflow tasks per message", n/float64(e2e.Messages))
		}
		fmt.Fprintln(out)
	}

	// 3. Direct-consumer baseline.
	base, err := b.runCell(ctx, cellConfig{Name: "baseline", Orders: o.orders, Concurrency: o.concurrency,
		BatchSize: o.batch, Direct: true, Seed: o.seed})
	if err != nil {
		return fmt.Errorf("baseline: %w", err)
	}
	res.Baseline = base
	fmt.Fprintf(out, "baseline: %s\n", describe(base))

	res.Ratio = e2e.Rate / cr.Rate
	res.RatioB = e2e.Rate / base.Rate
	fmt.Fprintf(out, "ratios:   e2e/ceiling = %.2f, e2e/baseline = %.2f\n", res.Ratio, res.RatioB)

	// 4. Scaling table and chart.
	if !o.skipScaling {
		fmt.Fprintf(out, "scaling (%d orders per cell, messages/s; p50/p99 publish->applied):\n", o.scaleOrders)
		fmt.Fprintf(out, "| bridge concurrency |")
		for _, w := range o.scaleWorkers {
			fmt.Fprintf(out, " %d worker(s) |", w)
		}
		fmt.Fprintf(out, "\n|---|%s\n", strings.Repeat("---|", len(o.scaleWorkers)))
		for _, c := range o.scaleConc {
			fmt.Fprintf(out, "| %d |", c)
			for _, w := range o.scaleWorkers {
				r, err := b.runCell(ctx, cellConfig{Name: fmt.Sprintf("scale-c%d-w%d", c, w), Orders: o.scaleOrders,
					Concurrency: c, BatchSize: o.batch, Workers: w, Seed: o.seed + int64(c*10+w)})
				if err != nil {
					fmt.Fprintln(out)
					return fmt.Errorf("scaling cell concurrency %d, %d workers: %w", c, w, err)
				}
				res.Scaling = append(res.Scaling, r)
				fmt.Fprintf(out, " %.1f (%s/%s) |", r.Rate, r.P50.Round(10*time.Millisecond), r.P99.Round(10*time.Millisecond))
			}
			fmt.Fprintln(out)
		}
		if err := drawChart(o.chart, o, res); err != nil {
			return fmt.Errorf("chart: %w", err)
		}
		fmt.Fprintf(out, "chart:    %s\n", o.chart)
	}

	res.Took = time.Since(began).Round(time.Second).String()
	if data, err := json.MarshalIndent(res, "", "  "); err == nil {
		_ = os.WriteFile(filepath.Join(b.logDir, "results.json"), data, 0o644)
	}
	fmt.Fprintf(out, "took %s; every run settled with all invariants holding (check.Verify)\n", res.Took)
	fmt.Fprintf(out, "orderflow bench: e2e=%.1f ceiling=%.1f baseline=%.1f ratio=%.2f\n", e2e.Rate, cr.Rate, base.Rate, res.Ratio)
	return nil
}

func describe(r cellResult) string {
	return fmt.Sprintf("%d messages (%d distinct events, %d orders; concurrency %d, %s) in %.1fs = %.1f events/s; publish->applied p50 %s p99 %s (publishing took %.1fs)",
		r.Messages, r.Events, r.Config.Orders, r.Config.Concurrency, consumerName(r.Config), r.Elapsed.Seconds(), r.Rate,
		r.P50.Round(time.Millisecond), r.P99.Round(time.Millisecond), r.Publish.Seconds())
}

func consumerName(c cellConfig) string {
	if c.Direct {
		return "direct consumer"
	}
	return fmt.Sprintf("%d worker process(es)", c.Workers)
}

// drawChart plots messages/s against bridge concurrency, one line per worker
// count, with the ceiling and the baseline as dashed lines.
func drawChart(path string, o options, res results) error {
	if len(res.Scaling) == 0 {
		return errors.New("no scaling results")
	}
	var ticks []float64
	for _, c := range o.scaleConc {
		ticks = append(ticks, float64(c))
	}
	colors := []color.RGBA{colBlue, colOrng, colRed}
	var ss []series
	for i, w := range o.scaleWorkers {
		s := series{Label: fmt.Sprintf("%d worker(s)", w), Color: colors[i%len(colors)]}
		for _, r := range res.Scaling {
			if r.Config.Workers == w {
				s.Points = append(s.Points, [2]float64{float64(r.Config.Concurrency), r.Rate})
			}
		}
		ss = append(ss, s)
	}
	lo, hi := ticks[0], ticks[len(ticks)-1]
	ss = append(ss, series{Label: "Temporal ceiling", Color: colGreen, Dashed: true,
		Points: [][2]float64{{lo, res.Ceiling.Rate}, {hi, res.Ceiling.Rate}}})
	ss = append(ss, series{Label: "0.6 x ceiling", Color: colGrid, Dashed: true,
		Points: [][2]float64{{lo, 0.6 * res.Ceiling.Rate}, {hi, 0.6 * res.Ceiling.Rate}}})
	ss[len(ss)-1].Color = colBlack
	c := chart{
		Title:  fmt.Sprintf("orderflow throughput (direct-consumer baseline: %.0f events/s)", res.Baseline.Rate),
		XLabel: "bridge concurrency", YLabel: "events/s (wf/s for the ceiling)",
		XTicks: ticks, Series: ss, W: 760, H: 420,
	}
	return c.WritePNG(path)
}

// metricLabel is a short name of an SDK metric for the profile line.
func metricLabel(metric, filter string) string {
	l := strings.TrimSuffix(strings.TrimPrefix(metric, "temporal_"), "_seconds")
	if _, op, ok := strings.Cut(filter, `operation="`); ok {
		l = strings.TrimSuffix(op, `"`)
	}
	return l
}
