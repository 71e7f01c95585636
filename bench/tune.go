package main

// The tuning mode (-tune): each performance knob against the run's default,
// in one invocation. For a knob with variants B1..Bn the same scenario's
// backlog is drained with the default setting A and each variant in the
// order A, B1, ..., Bn, Bn, ..., B1, A, so that a steady drift of the
// machine's load weighs on every setting alike; every drain is a cell of
// its own (fresh topic, group, task queue and database, processes started
// for it) and settles with all invariants holding.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/orderflow/orderflow/config"
)

// tunePlan is what -tune measures.
type tunePlan struct {
	// Spec is the -tune flag: knob names, comma-separated, or "all".
	Spec string
	// Orders is the size of every tuning drain's scenario.
	Orders int
	// Knobs are the knobs Spec names, resolved by resolve.
	Knobs []knob
}

// registerTune adds the tuning mode's flags to fs.
func registerTune(fs *config.Set, bs func(name, usage string) config.Setting, p *tunePlan) {
	fs.String(&p.Spec, "", bs("tune", "run only the tuning comparisons: e2e backlog drains with the default setting (A) and variants (B) of each knob, "+
		"in the order A B B A; knobs, comma-separated: "+strings.Join(knobNames(), ", ")+"; or all"))
	fs.Int(&p.Orders, 400, bs("tune-orders", "orders of each tuning drain's scenario (400 make about 2,100 distinct events)"))
}

// enabled says whether the run is a tuning run.
func (p tunePlan) enabled() bool { return strings.TrimSpace(p.Spec) != "" }

// resolve checks the plan and looks its knobs up.
func (p *tunePlan) resolve() error {
	if !p.enabled() {
		return nil
	}
	if p.Orders < 1 {
		return fmt.Errorf("-tune-orders must be >= 1, got %d", p.Orders)
	}
	var err error
	if p.Knobs, err = parseKnobs(p.Spec); err != nil {
		return fmt.Errorf("-tune: %w", err)
	}
	return nil
}

// knob is a setting the tuning mode compares with the run's default: a
// flag of the worker or of the bridge. Values are the flag's, as strings,
// so that a knob of the Temporal server (Side "engine": a dev server
// started with other SQLite pragmas or dynamic config, the cell's
// processes pointed at it through the bench copy's configuration) fits the
// same shape.
type knob struct {
	// Name is the flag the knob varies.
	Name string
	// Side is the process the setting belongs to: "worker" or "bridge".
	Side string
	// What says what the setting is and what the variants show.
	What string
	// current is the run's setting: A.
	current func(b *bench, o options) string
	// variants are the values of B for a run; those equal to A are left out.
	variants func(o options) []string
	// apply gives a drain the setting v: on b, the copy of the benchmark
	// that runs the drain, or on its cell. Nil for an engine knob.
	apply func(b *bench, cc *cellConfig, v string)
	// engine, for a knob of the Temporal server (Side "engine"), is the
	// engine of setting v: every setting, A included, runs on a Temporal
	// of its own that the benchmark starts afresh for the knob (so that A
	// is not the stack's long-running server with its history) and stops
	// after the knob's drains.
	engine func(v string) engineSpec
}

// tuneKnobs are the knobs -tune knows, in the order "all" runs them.
var tuneKnobs = []knob{
	{
		Name: "workflow-pollers", Side: "worker",
		What:    "goroutines polling the task queue for workflow tasks; more pick tasks up sooner, so fewer signals share one",
		current: func(b *bench, _ options) string { return strconv.Itoa(b.tuning.WorkflowPollers) },
		variants: func(options) []string {
			return []string{"16", "2"}
		},
		apply: func(b *bench, _ *cellConfig, v string) { b.tuning.WorkflowPollers = atoi(v) },
	},
	{
		Name: "max-concurrent-workflow-tasks", Side: "worker",
		What:    "workflow tasks the worker runs at once (slots)",
		current: func(b *bench, _ options) string { return strconv.Itoa(b.tuning.MaxWorkflowTasks) },
		variants: func(options) []string {
			return []string{"20", "400"}
		},
		apply: func(b *bench, _ *cellConfig, v string) { b.tuning.MaxWorkflowTasks = atoi(v) },
	},
	{
		Name: "sticky-cache-size", Side: "worker",
		What: "workflow executions kept in the worker's sticky cache (0: the SDK's 10,000); the variant holds a quarter of " +
			"the scenario's orders' workflows, and an evicted one replays its whole history on its next task (sticky cache misses)",
		current: func(b *bench, _ options) string { return workerFlag(b.workerArgs, "sticky-cache-size", "0") },
		variants: func(o options) []string {
			return []string{strconv.Itoa(max(1, o.tune.Orders/4))}
		},
		apply: func(b *bench, _ *cellConfig, v string) {
			b.workerArgs = append(slices.Clone(b.workerArgs), "-sticky-cache-size", v)
		},
	},
	{
		Name: "concurrency", Side: "bridge",
		What:    "messages the bridge handles at once",
		current: func(_ *bench, o options) string { return strconv.Itoa(o.concurrency) },
		variants: func(options) []string {
			return []string{"64"}
		},
		apply: func(_ *bench, cc *cellConfig, v string) { cc.Concurrency = atoi(v) },
	},
	{
		Name: "batch-size", Side: "bridge",
		What: "messages per consumer callback, an order's events of one callback going in one signal " +
			"(batch size 1 is the batching phase of the full run)",
		current: func(_ *bench, o options) string { return strconv.Itoa(o.batch) },
		variants: func(options) []string {
			return []string{"32"}
		},
		apply: func(_ *bench, cc *cellConfig, v string) { cc.BatchSize = atoi(v) },
	},
	{
		Name: "dev-sqlite-synchronous", Side: "engine",
		What: "the dev server's SQLite synchronous pragma (journal_mode WAL in both): NORMAL syncs the write-ahead log at checkpoints, " +
			"OFF never, leaving the flush to the operating system (a power loss may lose the last commits of Temporal's state)",
		current:  func(*bench, options) string { return "NORMAL" },
		variants: func(options) []string { return []string{"OFF"} },
		engine: func(v string) engineSpec {
			return devEngineVariant("dev-sync-"+strings.ToLower(v), "journal_mode=wal synchronous="+v, "")
		},
	},
	{
		Name: "dev-task-queue-partitions", Side: "engine",
		What: "partitions of each task queue on the dev server (dynamic config matching.numTaskqueueRead/WritePartitions; " +
			"Temporal's default 4): a task queued in one partition waits for a poll on that partition, a poll of an empty one waits up to a minute",
		current:  func(*bench, options) string { return "4" },
		variants: func(options) []string { return []string{"1"} },
		engine: func(v string) engineSpec {
			return devEngineVariant("dev-partitions-"+v, "", "--dynamic-config-value matching.numTaskqueueReadPartitions="+v+
				" --dynamic-config-value matching.numTaskqueueWritePartitions="+v)
		},
	},
	{
		Name: "db-max-open-conns", Side: "worker",
		What:    "the worker's PostgreSQL pool",
		current: func(b *bench, _ options) string { return workerFlag(b.workerArgs, "db-max-open-conns", "20") },
		variants: func(options) []string {
			return []string{"5", "50"}
		},
		apply: func(b *bench, _ *cellConfig, v string) {
			b.workerArgs = append(slices.Clone(b.workerArgs), "-db-max-open-conns", v)
		},
	},
}

// tuneEnginePorts are the frontend and UI ports of the dev servers an engine
// knob starts, A's first.
var tuneEnginePorts = [][]int{{7533, 8533}, {7633, 8633}, {7733, 8733}}

// devEngineVariant is a dev server (scripts/stack.sh profile dev) with the
// SQLite pragmas (empty: the stack's) and further start-dev arguments given.
func devEngineVariant(name, pragmas, args string) engineSpec {
	var env []string
	if pragmas != "" {
		env = append(env, "ORDERFLOW_TEMPORAL_SQLITE_PRAGMAS="+pragmas)
	}
	if args != "" {
		env = append(env, "ORDERFLOW_TEMPORAL_DEV_ARGS="+args)
	}
	return engineSpec{Name: name, Profile: "dev",
		Doc: "a dev server started by the benchmark for the knob (" + strings.Join(env, ", ") + ")",
		Env: func(options) []string { return env }}
}

// startKnobEngines starts the engine of each of an engine knob's settings,
// on the ports of tuneEnginePorts; the returned function stops them.
func (b *bench) startKnobEngines(ctx context.Context, o options, k knob, labels []string, out io.Writer) ([]*engine, func(), error) {
	if len(labels) > len(tuneEnginePorts) {
		return nil, nil, fmt.Errorf("knob %s: %d settings, ports for %d engines", k.Name, len(labels), len(tuneEnginePorts))
	}
	root, err := repoRoot()
	if err != nil {
		return nil, nil, err
	}
	var started []*engine
	stop := func() {
		for _, e := range started {
			e.stack.down()
		}
	}
	for i, l := range labels {
		spec := k.engine(l)
		ports := tuneEnginePorts[i]
		spec.Ports = func(options) []int { return ports }
		e, err := newEngine(spec, o, b.cfg, root, b.logDir)
		if err != nil {
			stop()
			return nil, nil, fmt.Errorf("engine %s: %w", spec.Name, err)
		}
		if err := e.stack.reset(ctx); err != nil {
			stop()
			return nil, nil, err
		}
		started = append(started, e)
		d, err := e.stack.up(ctx)
		if err != nil {
			stop()
			return nil, nil, err
		}
		fmt.Fprintf(out, "engine:   %s %s: started in %.1fs (%s)\n", settingLetter(i), l, d.Seconds(), e.stack.describe())
	}
	return started, stop, nil
}

// atoi is strconv.Atoi for the knobs' own values, which are integers.
func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

func knobNames() []string {
	var names []string
	for _, k := range tuneKnobs {
		names = append(names, k.Name)
	}
	return names
}

// parseKnobs returns the knobs spec names (comma-separated, each once, in
// the order given), or all of them for "all".
func parseKnobs(spec string) ([]knob, error) {
	var out []knob
	seen := map[string]bool{}
	for _, f := range strings.Split(spec, ",") {
		name := strings.TrimSpace(f)
		if name == "all" {
			return slices.Clone(tuneKnobs), nil
		}
		i := slices.IndexFunc(tuneKnobs, func(k knob) bool { return k.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("unknown knob %q (knobs: %s; or all)", name, strings.Join(knobNames(), ", "))
		}
		if !seen[name] {
			seen[name] = true
			out = append(out, tuneKnobs[i])
		}
	}
	return out, nil
}

// workerFlag is the value of the worker flag name in args (the last one
// given, as the flag package takes it), or def when args do not set it.
func workerFlag(args []string, name, def string) string {
	v := def
	for i := 0; i < len(args); i++ {
		a := strings.TrimPrefix(strings.TrimPrefix(args[i], "-"), "-")
		if a == args[i] {
			continue // not a flag
		}
		if n, val, ok := strings.Cut(a, "="); ok {
			if n == name {
				v = val
			}
			continue
		}
		if a == name && i+1 < len(args) {
			v = args[i+1]
			i++
		}
	}
	return v
}

// settingsOf are the labels of a knob's settings for a run: A first, then
// the variants that differ from it.
func settingsOf(current string, variants []string) []string {
	out := []string{current}
	for _, v := range variants {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// tuneSchedule is the order of the drains of a knob with n variants, as
// indices of its settings (0 is A): A, B1, ..., Bn, Bn, ..., B1, A.
func tuneSchedule(n int) []int {
	out := make([]int, 0, 2*(n+1))
	for i := 0; i <= n; i++ {
		out = append(out, i)
	}
	for i := n; i >= 0; i-- {
		out = append(out, i)
	}
	return out
}

// tuneDrain is one drain of a knob's comparison.
type tuneDrain struct {
	// Setting indexes the knob's settings (0: A).
	Setting int
	Result  cellResult
}

// tuneSetting is what a knob's setting measured over its drains.
type tuneSetting struct {
	Label string
	// Drains are the setting's drains' places in the knob's run order
	// (1-based), Rates their distinct events/s.
	Drains []int
	Rates  []float64
	Mean   float64
	// Ratio is Mean over A's Mean.
	Ratio float64
	// Spread is (max - min) / Mean of Rates.
	Spread float64
}

// tuneKnobResult is a knob's comparison.
type tuneKnobResult struct {
	Knob     string
	Side     string
	Settings []tuneSetting
	Drains   []tuneDrain
}

// summarize aggregates a knob's drains by setting (labels[0] is A).
func summarize(labels []string, drains []tuneDrain) []tuneSetting {
	out := make([]tuneSetting, len(labels))
	for i, l := range labels {
		out[i].Label = l
	}
	for i, d := range drains {
		s := &out[d.Setting]
		s.Drains = append(s.Drains, i+1)
		s.Rates = append(s.Rates, d.Result.Rate)
	}
	for i := range out {
		s := &out[i]
		if len(s.Rates) == 0 {
			continue
		}
		s.Mean = mean(s.Rates)
		if s.Mean > 0 {
			s.Spread = (slices.Max(s.Rates) - slices.Min(s.Rates)) / s.Mean
		}
	}
	for i := range out {
		if out[0].Mean > 0 {
			out[i].Ratio = out[i].Mean / out[0].Mean
		}
	}
	return out
}

func mean(v []float64) float64 {
	var sum float64
	for _, x := range v {
		sum += x
	}
	return sum / float64(len(v))
}

// tuneResults is a tuning run, written as results.json next to the logs.
type tuneResults struct {
	Started time.Time        `json:"started"`
	Took    string           `json:"took"`
	Engine  string           `json:"engine"`
	Orders  int              `json:"orders"`
	Knobs   []tuneKnobResult `json:"knobs"`
}

// Keys of the per-drain figures in cellResult.Metrics (the SDK means as
// saveMetrics keys them; the worker's sticky cache misses, and the
// executions its cache held once the drain settled).
const (
	keySignal   = "bridge:temporal_request_latency_seconds"
	keySchedule = "worker1:temporal_workflow_task_schedule_to_start_latency_seconds"
	keyExec     = "worker1:temporal_workflow_task_execution_latency_seconds"
	keyRespond  = "worker1:temporal_request_latency_seconds"
	keyMisses   = "worker1:temporal_sticky_cache_miss_total"
	keySticky   = "worker1:temporal_sticky_cache_size"
)

// tuneFigure is one per-drain column of the table.
type tuneFigure struct {
	Head   string
	format func(r cellResult) string
}

var tuneFigures = []tuneFigure{
	{"SignalWithStart", func(r cellResult) string { return seconds(r.Metrics, keySignal) }},
	{"workflow task schedule-to-start", func(r cellResult) string { return seconds(r.Metrics, keySchedule) }},
	{"RespondWorkflowTaskCompleted", func(r cellResult) string { return seconds(r.Metrics, keyRespond) }},
	{"workflow tasks per message", func(r cellResult) string {
		n, ok := r.Metrics[keyExec+"_count"]
		if !ok || r.Messages == 0 || r.Config.Workers != 1 {
			return "–"
		}
		return fmt.Sprintf("%.2f", n/float64(r.Messages))
	}},
	{"temporal cores", func(r cellResult) string { return cores(r.CPU, "temporal") }},
	{"idle cores", func(r cellResult) string {
		if r.CPU == nil {
			return "–"
		}
		return fmt.Sprintf("%.2f", r.CPU.Idle)
	}},
	{"sticky cache misses", func(r cellResult) string {
		if _, ok := r.Metrics[keyExec+"_count"]; !ok {
			return "–" // the worker's metrics were not read
		}
		return fmt.Sprintf("%.0f", r.Metrics[keyMisses])
	}},
}

// cores formats the cores group used over a drain (cellResult.CPU).
func cores(sh *cpuShare, group string) string {
	if sh == nil {
		return "–"
	}
	return fmt.Sprintf("%.2f", sh.Cores[group])
}

// seconds formats the mean in seconds m[key]: milliseconds under a second.
func seconds(m map[string]float64, key string) string {
	v, ok := m[key]
	switch {
	case !ok:
		return "–"
	case v >= 1:
		return fmt.Sprintf("%.2f s", v)
	default:
		return fmt.Sprintf("%.1f ms", 1000*v)
	}
}

// drainFigures is a drain's figures, as on its progress line.
func drainFigures(r cellResult) string {
	var parts []string
	for _, f := range tuneFigures {
		parts = append(parts, f.Head+" "+f.format(r))
	}
	return strings.Join(parts, ", ")
}

// writeTuneTable writes the comparison of every knob as one table: a row
// per setting, its drains' events/s in run order (#: the drain's place),
// their mean and B/A, and each drain's figures in the same order.
func writeTuneTable(out io.Writer, knobs []tuneKnobResult) {
	fmt.Fprintf(out, "| knob | setting | events/s (#drain) | mean | B/A | spread |")
	for _, f := range tuneFigures {
		fmt.Fprintf(out, " %s |", f.Head)
	}
	fmt.Fprintf(out, "\n|---|---|---|---|---|---|%s\n", strings.Repeat("---|", len(tuneFigures)))
	for _, k := range knobs {
		for i, s := range k.Settings {
			name, label := "", "B "+s.Label
			if i == 0 {
				name, label = k.Knob, "A "+s.Label
			}
			var rates []string
			for j, r := range s.Rates {
				rates = append(rates, fmt.Sprintf("%.1f (#%d)", r, s.Drains[j]))
			}
			fmt.Fprintf(out, "| %s | %s | %s | %.1f | %.2f | %.0f%% |", name, label, strings.Join(rates, ", "), s.Mean, s.Ratio, 100*s.Spread)
			for _, f := range tuneFigures {
				var v []string
				for _, d := range k.Drains {
					if d.Setting == i {
						v = append(v, f.format(d.Result))
					}
				}
				fmt.Fprintf(out, " %s |", strings.Join(v, " / "))
			}
			fmt.Fprintln(out)
		}
	}
}

// defaultRates are the events/s of every drain with the default setting,
// over all knobs: the same setting measured through the run, so their
// spread is the machine's drift and noise.
func defaultRates(knobs []tuneKnobResult) []float64 {
	var out []float64
	for _, k := range knobs {
		for _, d := range k.Drains {
			if d.Setting == 0 {
				out = append(out, d.Result.Rate)
			}
		}
	}
	return out
}

// tuneEngine prepares the engine a tuning run drains on: the primary one
// of -engines (the stack's dev server, unless -engines leaves it out), up
// and answering; the returned function stops an engine the benchmark
// started.
func (b *bench) tuneEngine(ctx context.Context, o options, out io.Writer) (*engine, func(), error) {
	spec := o.engines[primaryEngine(o.engines)]
	var root string
	if spec.Profile != "" {
		var err error
		if root, err = repoRoot(); err != nil {
			return nil, nil, err
		}
	}
	e, err := newEngine(spec, o, b.cfg, root, b.logDir)
	if err != nil {
		return nil, nil, fmt.Errorf("engine %s: %w", spec.Name, err)
	}
	if e.stack == nil {
		if err := e.dial(ctx, b.cfg); err != nil {
			return nil, nil, err
		}
		fmt.Fprintf(out, "Temporal: %s at %s, namespace %s\n", e.Doc, e.Address, e.Namespace)
		return e, func() {}, nil
	}
	if err := e.stack.reset(ctx); err != nil {
		e.stack.down()
		return nil, nil, err
	}
	d, err := e.stack.up(ctx)
	if err != nil {
		e.stack.down()
		return nil, nil, err
	}
	fmt.Fprintf(out, "Temporal: %s, started in %.1fs (%s)\n", e.Doc, d.Seconds(), e.stack.describe())
	return e, e.stack.down, nil
}

// runTune runs the tuning comparisons of o.tune and prints their table.
func (b *bench) runTune(ctx context.Context, o options, out io.Writer) error {
	began := time.Now()
	e, stop, err := b.tuneEngine(ctx, o, out)
	if err != nil {
		return err
	}
	defer stop()
	b.cfg.TemporalAddress, b.cfg.TemporalNamespace, b.engine = e.Address, e.Namespace, e.Name
	fmt.Fprintf(out, "building worker and bridge ...\n")
	if b.workerBin, b.bridgeBin, err = buildBinaries(ctx, b.logDir); err != nil {
		return err
	}
	b.cpu = startCPUSampler(ctx, 500*time.Millisecond)
	b.cleanup = &cleanupStats{}
	defer b.cpu.Stop()
	t := b.tuning
	fmt.Fprintf(out, "worker settings: %d workflow-task slots, %d activity slots, %d/%d workflow/activity pollers %s\n",
		t.MaxWorkflowTasks, t.MaxActivities, t.WorkflowPollers, t.ActivityPollers, strings.Join(b.workerArgs, " "))
	fmt.Fprintf(out, "tune:     per knob, e2e backlog drains of one %d-order scenario (20%% duplicates) by the bridge (concurrency %d, batch size %d) and %d worker process(es) on the %s engine, "+
		"default setting A and variants B in the order A B.. ..B A; each drain settled with all invariants holding\n",
		o.tune.Orders, o.concurrency, o.batch, o.workers, e.Name)
	res := tuneResults{Started: began, Engine: e.Name, Orders: o.tune.Orders}
	for _, k := range o.tune.Knobs {
		labels := settingsOf(k.current(b, o), k.variants(o))
		fmt.Fprintf(out, "knob:     %s (%s): %s; A %s, B %s\n", k.Name, k.Side, k.What, labels[0], strings.Join(labels[1:], ", "))
		if len(labels) == 1 {
			fmt.Fprintf(out, "knob:     %s: every variant is the run's setting; skipped\n", k.Name)
			continue
		}
		kr := tuneKnobResult{Knob: k.Name, Side: k.Side}
		var engines []*engine
		stopEngines := func() {}
		if k.engine != nil {
			if engines, stopEngines, err = b.startKnobEngines(ctx, o, k, labels, out); err != nil {
				return fmt.Errorf("tune %s: %w", k.Name, err)
			}
			defer stopEngines() // on failure; each stops once
		}
		schedule := tuneSchedule(len(labels) - 1)
		for n, s := range schedule {
			r, err := b.tuneDrain(ctx, o, k, labels, engines, s, n+1)
			if err != nil {
				return fmt.Errorf("tune %s, drain %d (%s): %w", k.Name, n+1, labels[s], err)
			}
			kr.Drains = append(kr.Drains, tuneDrain{Setting: s, Result: r})
			fmt.Fprintf(out, "drain:    %s %d/%d, %s %s: %d distinct events (%d messages) in %.1fs = %.1f events/s; %s\n",
				k.Name, n+1, len(schedule), settingLetter(s), labels[s], r.Events, r.Messages, r.Elapsed.Seconds(), r.Rate, drainFigures(r))
			if r.CPU != nil {
				fmt.Fprintf(out, "cpu:      cores used from the first to the last effect: %s\n", r.CPU)
			}
		}
		stopEngines()
		kr.Settings = summarize(labels, kr.Drains)
		res.Knobs = append(res.Knobs, kr)
	}
	res.Took = time.Since(began).Round(time.Second).String()
	if data, err := json.MarshalIndent(res, "", "  "); err == nil {
		_ = os.WriteFile(filepath.Join(b.logDir, "results.json"), data, 0o644)
	}
	fmt.Fprintf(out, "tune:     distinct events/s of each drain (#: its place in its knob's order), their mean and B/A; spread = (max - min) / mean of a setting's drains; SDK means and counts of the worker and bridge of each drain, the cores the Temporal server used and the machine's idle cores, in the same order\n")
	writeTuneTable(out, res.Knobs)
	if a := defaultRates(res.Knobs); len(a) > 1 {
		m := mean(a)
		fmt.Fprintf(out, "default:  %d drains with the default setting over the run: mean %.1f events/s, %.1f–%.1f (%.0f%% of the mean): a B/A within that is the machine's noise\n",
			len(a), m, slices.Min(a), slices.Max(a), 100*(slices.Max(a)-slices.Min(a))/m)
	}
	fmt.Fprintf(out, "took %s; every drain settled with all invariants holding (check.Verify)\n", res.Took)
	return nil
}

func settingLetter(s int) string {
	if s == 0 {
		return "A"
	}
	return "B"
}

// tuneDrain runs one drain of knob k with setting labels[s] (s = 0: the
// run's own settings) as the n-th of its knob, on a copy of the benchmark,
// and reads its processes' SDK metrics once it settled.
func (b *bench) tuneDrain(ctx context.Context, o options, k knob, labels []string, engines []*engine, s, n int) (cellResult, error) {
	bc := *b
	cc := cellConfig{Name: fmt.Sprintf("tune-%s-%d", k.Name, n), Orders: o.tune.Orders, Concurrency: o.concurrency,
		BatchSize: o.batch, Workers: o.workers, Seed: o.seed, DupRate: 0.2}
	if engines != nil {
		bc.cfg.TemporalAddress, bc.cfg.TemporalNamespace = engines[s].Address, engines[s].Namespace
	} else if s > 0 {
		k.apply(&bc, &cc, labels[s])
	}
	cc.inspect = func(ctx context.Context, r *cellResult) error {
		r.Metrics = bc.saveMetrics(ctx)
		data, err := os.ReadFile(filepath.Join(bc.logDir, cc.Name+"-worker1.metrics.txt"))
		if err == nil {
			r.Metrics[keyMisses] = promSum(string(data), "temporal_sticky_cache_miss_total", "")
			r.Metrics[keySticky] = promSum(string(data), "temporal_sticky_cache_size", "")
		}
		return nil
	}
	return bc.runCell(ctx, cc)
}
