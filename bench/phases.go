package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/orderflow/orderflow/config"
	"github.com/orderflow/orderflow/internal/obs"
	"github.com/orderflow/orderflow/scenario"
)

// printf prints a line of the engine's output, tagged with its name.
func (b *bench) printf(format string, args ...any) {
	fmt.Fprintf(b.out, b.e.tag()+format+"\n", args...)
}

// cell is the phase's cell config of name on this engine, with the run's
// bridge and worker settings.
func (b *bench) cell(name string, orders int, dupRate float64) cellConfig {
	return cellConfig{Name: b.e.Name + "-" + name, Orders: orders, Concurrency: b.o.concurrency,
		BatchSize: b.o.batch, Seed: b.o.seed, DupRate: dupRate}
}

// runEngine starts the engine, runs its phases on a copy of b pointed at
// it (each phase measures into the engine's result and prints its lines)
// and stops it.
func (b *bench) runEngine(ctx context.Context, e *engine, first bool) (engineResult, error) {
	began := time.Now()
	er := engineResult{Name: e.Name, Doc: e.Doc, Address: e.Address}
	err := e.stackDo(ctx, "up")
	er.StartedBy, er.StartSeconds = e.describe(), time.Since(began).Seconds()
	if err != nil {
		return er, err
	}
	// The server's PostgreSQL is the engine's in the CPU figures, so that
	// group postgres is orderflow's SQL alone.
	store, err := e.storePID()
	if err != nil {
		return er, err
	}
	b.cpu.SetEngineStore(store)
	defer b.cpu.SetEngineStore(0)
	fmt.Fprintf(b.out, "%sTemporal: %s, started in %.1fs (%s)\n", e.tag(), e.Doc, er.StartSeconds, er.StartedBy)
	eb := *b
	eb.e = e
	eb.cfg.TemporalAddress, eb.cfg.TemporalNamespace = e.Address, e.Namespace
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	eb.tc, err = obs.NewTemporalClient(dctx, eb.cfg, slog.Default(), nil)
	cancel()
	if err != nil {
		return er, err
	}
	stop := sync.OnceFunc(func() {
		eb.tc.Close()
		e.down()
	})
	defer stop()
	er.PhaseTook = map[string]string{}
	for _, name := range b.o.phases {
		if !first && slices.Contains(firstEngineOnly, name) {
			continue
		}
		t := time.Now()
		switch name {
		case "e2e", "floor":
			err = eb.drain(ctx, &er, name)
		case "dup":
			err = eb.duplicates(ctx, &er)
		case "hot":
			err = eb.hot(ctx, &er)
		case "open":
			err = eb.openLoop(ctx, &er)
		case "direct":
			err = eb.directFloor(ctx, &er)
		case "interleave":
			err = eb.interleave(ctx, &er)
		case "abba":
			err = eb.abba(ctx, &er)
		}
		if err != nil {
			return er, err
		}
		er.PhaseTook[name] = time.Since(t).Round(time.Second).String()
		eb.printf("phase %s took %s", name, er.PhaseTook[name])
	}
	stop()
	er.Took = time.Since(began).Round(time.Second).String()
	eb.printf("took %s", er.Took)
	return er, nil
}

// drain is orderflow draining the e2e backlog (phase e2e), or the
// pipeline floor draining it (phase floor): the same stream through the
// same broker and bridge into a workflow that only receives its signals,
// so that orderflow/floor is orderflow's own overhead.
func (b *bench) drain(ctx context.Context, er *engineResult, phase string) error {
	cc := b.cell(phase, b.o.orders, 0.2)
	cc.Floor = phase == "floor"
	r, err := b.runCell(ctx, cc)
	if err != nil {
		return fmt.Errorf("%s: %w", phase, err)
	}
	b.printf("%-9s %s", phase+":", describeDrain(r))
	if !cc.Floor {
		er.E2E = r
		if r.CPU != nil {
			b.printf("cpu:      %s drain, first to last effect (%.1fs, /proc read at both), cores used of %d: %s",
				r.Config.Name, r.CPU.Seconds, runtime.NumCPU(), r.CPU)
		}
		b.printf("cost:     %s", r.Cost)
		return nil
	}
	er.Floor = &r
	b.printf("cost:     %s", r.Cost)
	if er.E2E.Rate > 0 {
		er.FloorRatio = er.E2E.Rate / r.Rate
		b.printf("floor:    orderflow/pipeline floor = %.2f (distinct events/s, both draining a backlog of the same scenario)", er.FloorRatio)
	}
	return nil
}

// duplicates is the drain without duplicates (A) and with -dup-rate (B),
// -dup-orders each, run A B B A so that a store growing from cell to cell
// weighs on both alike; the ratio is of the means of each pair.
func (b *bench) duplicates(ctx context.Context, er *engineResult) error {
	for i, rate := range []float64{0, b.o.dupRate, b.o.dupRate, 0} {
		r, err := b.runCell(ctx, b.cell(fmt.Sprintf("dup%.0f-%d", 100*rate, i+1), b.o.dupOrders, rate))
		if err != nil {
			return fmt.Errorf("duplicates, cell %d of A B B A: %w", i+1, err)
		}
		if rate == 0 {
			er.NoDup = append(er.NoDup, r)
		} else {
			er.Dup = append(er.Dup, r)
		}
		b.printf("%-9s %s", fmt.Sprintf("%.0f%% dups:", 100*rate), describeDrain(r))
		b.printf("cost:     %.0f%% dups %s", 100*rate, r.Cost)
	}
	mean := func(rs []cellResult) float64 { return (rs[0].Rate + rs[1].Rate) / 2 }
	er.DupRatio = mean(er.Dup) / mean(er.NoDup)
	b.printf("dups:     %.0f%% duplicates / none = %.2f in distinct events/s (means of A B B A: %.1f / %.1f)",
		100*b.o.dupRate, er.DupRatio, mean(er.Dup), mean(er.NoDup))
	er.DupCPU, er.DupCPURatio = dupCPU(er.NoDup, er.Dup)
	if er.DupCPURatio > 0 {
		b.printf("dups:     %.0f%% duplicates / none = %.2f in every process's CPU per distinct event, adjusted to the drains' speed (%.1f / %.1f ms; orderflow's own %.1f / %.1f)",
			100*b.o.dupRate, er.DupCPURatio, er.DupCPU[stageDup][allGroups], er.DupCPU[stageNoDup][allGroups],
			ownCPU(er.DupCPU[stageDup]), ownCPU(er.DupCPU[stageNoDup]))
	}
	return nil
}

// The variants of the duplicates' drains, as dupCPU names them.
const (
	stageDup   = "dup"
	stageNoDup = "none"
)

// dupCPU is the duplicates' drains' CPU per distinct event by variant,
// adjusted to their mean speed, and every process's, dup over none (0
// when a variant has no CPU reading).
func dupCPU(none, dup []cellResult) (map[string]map[string]float64, float64) {
	var cells []stagedCell
	for _, r := range none {
		cells = append(cells, stagedCell{Stage: stageNoDup, Cell: r})
	}
	for _, r := range dup {
		cells = append(cells, stagedCell{Stage: stageDup, Cell: r})
	}
	cpu := speedAdjustedCPU(cells)
	if cpu == nil {
		return nil, 0
	}
	if d, n := cpu[stageDup][allGroups], cpu[stageNoDup][allGroups]; d > 0 && n > 0 {
		return cpu, d / n
	}
	return cpu, 0
}

// hot is one order receiving -hot-events events; every run of its workflow
// must end by continue-as-new.
func (b *bench) hot(ctx context.Context, er *engineResult) error {
	o := b.o
	if o.hotEvents == 0 {
		return nil
	}
	cc := b.cell("hot", 1, 0)
	cc.BridgeArgs = []string{"-workflow-max-events", strconv.Itoa(o.hotMaxEvents)}
	cc.generate = func(prefix string) (*scenario.Scenario, error) { return hotScenario(prefix, o.hotEvents, time.Now()) }
	cc.inspect = func(ctx context.Context, r *cellResult) error {
		hr, err := checkHot(ctx, b.tc, b.e.Namespace, scenario.OrderID(r.Prefix, 0))
		r.Hot = &hr
		if err == nil && o.hotMaxEvents > 0 && o.hotEvents > o.hotMaxEvents && hr.Runs < 2 {
			err = fmt.Errorf("%d events with -workflow-max-events %d made no continue-as-new: %s", o.hotEvents, o.hotMaxEvents, hr)
		}
		return err
	}
	hot, err := b.runCell(ctx, cc)
	if err != nil {
		return fmt.Errorf("hot order: %w", err)
	}
	er.Hot = &hot
	b.printf("hot:      %d events of one order (batch size %d) drained in %.1fs = %.1f events/s, continuing as new every %d events; %d signals; its workflow: %s",
		hot.Events, o.batch, hot.Elapsed.Seconds(), hot.Rate, o.hotMaxEvents, hot.Signals, hot.Hot)
	b.printf("cost:     hot order %s", hot.Cost)
	return nil
}

// firstEngineOnly are the phases run on the first engine only: how
// orderflow handles duplicates and a hot order, which the engine does not
// change, so that a run of both engines stays short.
var firstEngineOnly = []string{"dup", "hot"}

// openLoop is the capacity sweep of orderflow, from -sweep-start × its
// drain's rate, then of the pipeline floor from orderflow's capacity (it
// does less work), and the goal of capacities.
func (b *bench) openLoop(ctx context.Context, er *engineResult) error {
	var err error
	if er.Sweep, err = b.sweep(ctx, stageOrderflow, er.E2E, b.o.sweep.Start*er.E2E.Rate); err != nil {
		return err
	}
	// The pipeline floor does less work than orderflow: its first step is
	// one step above orderflow's capacity.
	start := cmp.Or(er.Sweep.Capacity*b.o.floorFactor, b.o.sweep.Start*er.Floor.Rate)
	if er.FloorSweep, err = b.floorSweep(ctx, stagePipeline, *er.Floor, start); err != nil {
		return err
	}
	er.stageRatios()
	b.printf("goal:     orderflow's capacity >= 0.9 x the pipeline floor's: %s (%s)", verdict(er.CapacityRatio >= 0.9), figure(er.CapacityRatio, 3))
	return nil
}

// directTemplate is the direct floor's cell as the sweeps and the
// interleaved phase run it: the e2e scenario (its events per order from
// the e2e drain), signalled by the benchmark's own client.
func (b *bench) directTemplate(er *engineResult) cellResult {
	return cellResult{Config: directCell(b.cell("direct", b.o.orders, 0.2), b.o.directInFlight), Events: er.E2E.Events}
}

// directFloor is the engine's direct floor (direct.go): the e2e scenario
// signalled by the benchmark's own client, no broker and no bridge, in a
// capacity sweep from floorFactor × the pipeline floor's capacity when the
// open phase found one (it does less work), else from orderflow's; then
// each stage's capacity.
func (b *bench) directFloor(ctx context.Context, er *engineResult) error {
	start := b.o.floorFactor * cmp.Or(capacity(er.FloorSweep), capacity(er.Sweep))
	if start == 0 {
		b.printf("direct:   not run: it starts from the pipeline floor's or orderflow's capacity (phase open)")
		return nil
	}
	var err error
	if er.DirectSweep, err = b.floorSweep(ctx, stageDirect, b.directTemplate(er), start); err != nil {
		return err
	}
	er.stageRatios()
	b.printf("floor:    %s", describeStages(*er))
	if er.DirectRatio > 0 {
		b.printf("goal:     orderflow's capacity >= 0.9 x the engine's direct floor's: %s (%s)", verdict(er.DirectRatio >= 0.9), figure(er.DirectRatio, 3))
	}
	return nil
}

// abba runs an A B B A experiment, B with -abba-env in the worker's and the
// bridge's environment: steady cells A, B, B, A at one rate, 0.9 ×
// orderflow's capacity (the open phase's, or a sweep of A's), with each
// variant's CPU per event by process group over its two cells and B's over
// A's; with -abba-sweeps, also four capacity sweeps A, B, B, A.
func (b *bench) abba(ctx context.Context, er *engineResult) error {
	x := &abbaResult{Env: shownEnv(b.o.abbaEnv)}
	variant := func(v string) cellResult {
		drain := er.E2E
		drain.Config.Env = nil
		if v == "B" {
			drain.Config.Env = b.o.abbaEnv
		}
		return drain
	}
	abba := []string{"A", "B", "B", "A"}
	capSweep := er.Sweep
	if b.o.abbaSweeps {
		for i, v := range abba {
			s, err := b.sweep(ctx, fmt.Sprintf("abba-%d%s", i+1, v), variant(v), b.o.sweep.Start*er.E2E.Rate)
			if err != nil {
				return err
			}
			if v == "A" {
				x.A = append(x.A, s)
			} else {
				x.B = append(x.B, s)
			}
		}
		mean := func(ss []*sweepResult) float64 { return (capacity(ss[0]) + capacity(ss[1])) / 2 }
		if a := mean(x.A); a > 0 {
			x.Ratio = mean(x.B) / a
		}
		b.printf("abba:     %s: capacity A %s, B %s, B %s, A %s events/s; B/A %s (means of the pairs)",
			strings.Join(x.Env, " "), figure(capacity(x.A[0]), 1), figure(capacity(x.B[0]), 1), figure(capacity(x.B[1]), 1),
			figure(capacity(x.A[1]), 1), figure(x.Ratio, 2))
		capSweep = x.A[0]
	}
	if capacity(capSweep) == 0 {
		s, err := b.sweep(ctx, "abba-A", variant("A"), b.o.sweep.Start*er.E2E.Rate)
		if err != nil {
			return err
		}
		capSweep = s
	}
	if capacity(capSweep) == 0 {
		er.ABBA = x
		b.printf("abba:     no capacity for A: the cells at one rate were not run")
		return nil
	}
	x.Rate = interleaveShare * capSweep.Capacity
	b.printf("abba:     %s: cells A B B A at one rate, %.1f events/s (%.1f x A's capacity), %s each",
		strings.Join(x.Env, " "), x.Rate, interleaveShare, b.o.sweep.Cell)
	fmt.Fprintf(b.out, "| variant | cell | offered events/s | achieved events/s | p50 | p99 | tail | verdict |\n|---|---|---|---|---|---|---|---|\n")
	for i, v := range abba {
		r, err := b.steady(ctx, v, fmt.Sprintf("abba-cell%d", i+1), variant(v), x.Rate, b.o.sweep.Cell, true)
		if err != nil {
			return fmt.Errorf("abba cell %d (%s): %w", i+1, v, err)
		}
		x.Cells = append(x.Cells, stagedCell{Stage: v, Cell: r})
		b.printf("cost:     abba %s, cell %d: %s", v, i+1, r.Cost)
	}
	x.CPUPerEvent, x.Adjusted = interleavedCPU(x.Cells), speedAdjustedCPU(x.Cells)
	x.CPURatios, x.AdjustedRatios = abbaCPURatios(x.CPUPerEvent), abbaCPURatios(x.Adjusted)
	er.ABBA = x
	b.printf("speed:    the probe's CPU µs per unit by cell (higher: a slower machine): %s", speedLine(x.Cells))
	for _, l := range describeABBA(*x) {
		b.printf("abba:     %s", l)
	}
	return nil
}

// shownEnv is env fit to print and keep: the value of a variable whose
// name suggests a secret (a URL, a password, a key, a token) redacted.
func shownEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		for _, w := range []string{"URL", "PASSWORD", "SECRET", "KEY", "TOKEN", "CREDENTIAL"} {
			if strings.Contains(strings.ToUpper(k), w) {
				v = config.Redact(v)
				break
			}
		}
		out = append(out, k+"="+v)
	}
	return out
}

// describeStages is the line of each stage's capacity, events/s: the
// engine alone (the direct floor), with the broker and the bridge in
// front (the pipeline floor) and with orderflow's workflow and SQL
// (orderflow), each as a share of the stages before; "-" where not
// measured.
func describeStages(er engineResult) string {
	return fmt.Sprintf("direct floor capacity %s events/s (the engine alone); pipeline floor capacity %s = %s x direct (+ RocketMQ and the bridge); orderflow capacity %s = %s x pipeline floor, %s x direct floor (+ its workflow and SQL; the last line's floor_ratio)",
		figure(capacity(er.DirectSweep), 1), figure(capacity(er.FloorSweep), 1), figure(er.PipelineRatio, 2),
		figure(capacity(er.Sweep), 1), figure(er.CapacityRatio, 2), figure(er.DirectRatio, 2))
}

// verdict is a goal's word.
func verdict(reached bool) string {
	return map[bool]string{true: "reached", false: "NOT reached"}[reached]
}

// steady runs one steady cell of drain's scenario and consumer for
// stage name (label names the cell), offering rate distinct events/s for
// d, once the engine is quiet, measuring the engine's work per event when
// cost is set; it prints the cell's row and judges it.
func (b *bench) steady(ctx context.Context, name, label string, drain cellResult, offered float64, d time.Duration, cost bool) (cellResult, error) {
	perOrder := float64(drain.Events) / float64(drain.Config.Orders)
	id := strings.ReplaceAll(name, " ", "-")
	cc := b.cell(fmt.Sprintf("%s-%s-%.0f", id, label, offered), ordersFor(offered, d, perOrder), 0.2)
	if drain.Config.Direct {
		cc = directCell(cc, drain.Config.InFlight)
	}
	cc.Floor, cc.Offered, cc.noCost, cc.Env = drain.Config.Floor, offered, !cost, drain.Config.Env
	cc.breakdown = !cc.Floor
	cc.Seed += int64(offered)
	quiet, err := b.waitQuiet(ctx, cc.Name)
	if err != nil {
		return cellResult{Config: cc}, err
	}
	r, err := b.runCell(ctx, cc)
	r.QuietWait = quiet
	if err != nil {
		return r, fmt.Errorf("at %.1f events/s: %w", offered, err)
	}
	r.Verdict = cmp.Or(judge(r), "pass")
	fmt.Fprintf(b.out, "| %s | %s | %.1f | %.1f | %s | %s | %.1fs | %s |\n", name, label, offered, r.Rate, ms(r.P50), ms(r.P99), r.Tail.Seconds(), r.Verdict)
	return r, nil
}

// sweep steps a steady rate of drain's scenario and consumer from start by
// -sweep-factor until a step fails, then between the highest pass and the
// lowest fail (sweepPlan.next).
func (b *bench) sweep(ctx context.Context, name string, drain cellResult, start float64) (*sweepResult, error) {
	return b.sweepWith(ctx, name, drain, start, b.o.sweep)
}

// floorSweep is a floor's capacity sweep: from start, a capacity near
// it (floorFactor × the stage after it, which does more work), by
// -sweep-floor-factor per step.
func (b *bench) floorSweep(ctx context.Context, name string, drain cellResult, start float64) (*sweepResult, error) {
	plan := b.o.sweep
	plan.Factor = b.o.floorFactor
	return b.sweepWith(ctx, name, drain, start, plan)
}

// sweepWith is a sweep by plan, with the stages of its lowest failing step.
func (b *bench) sweepWith(ctx context.Context, name string, drain cellResult, start float64, plan sweepPlan) (*sweepResult, error) {
	b.printf("sweep:    %s at steady rates from %.1f events/s, x %.2f per step of %s until one fails, then between the highest pass and the lowest fail until they are within %.0f%% (at most %d steps; a rate %.1f%% over capacity fails p99 within a step); pass: p99 <= %s, achieved >= %.2f x offered, last event applied <= %s after the last publish",
		name, start, plan.Factor, plan.Step, 100*plan.Within, plan.MaxSteps, 100*plan.overloadSeen(), ms(goalP99), minAchieved, maxTail)
	fmt.Fprintf(b.out, "| sweep | cell | offered events/s | achieved events/s | p50 | p99 | tail | verdict |\n|---|---|---|---|---|---|---|---|\n")
	sr := &sweepResult{}
	var pts []sweepPoint
	for rate := plan.next(start, nil); rate > 0; rate = plan.next(start, pts) {
		r, err := b.steady(ctx, name, fmt.Sprintf("step%d", len(pts)+1), drain, rate, plan.Step, false)
		if err != nil {
			return sr, fmt.Errorf("%s sweep: %w", name, err)
		}
		sr.Steps = append(sr.Steps, r)
		pts = append(pts, sweepPoint{Offered: rate, Pass: judge(r) == ""})
	}
	var fail float64
	if sr.Capacity, fail = bounds(pts); sr.Capacity == 0 {
		b.printf("capacity: %s: no step passed", name)
		return sr, nil
	}
	b.printf("capacity: %s %.1f events/s%s", name, sr.Capacity, map[bool]string{true: " (a lower bound: no step failed)"}[fail == 0])
	for i := range sr.Steps {
		if s := &sr.Steps[i]; fail > 0 && s.Config.Offered == fail {
			b.printStages(name, fmt.Sprintf("%.1f events/s, the lowest rate that failed", fail), s)
		}
	}
	return sr, nil
}

// printStages prints the stages of cell r of stage name, when it measured
// them.
func (b *bench) printStages(name, at string, r *cellResult) {
	if len(r.Breakdown) > 0 {
		b.printf("stages:   %s at %s, from publish to row (%d keys of %d orders):%s",
			name, at, r.Breakdown[0].Keys, breakdownSampleOrders, breakdownLines(r.Breakdown))
	}
}

// ms formats d in milliseconds.
func ms(d time.Duration) string {
	return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
}

// describeDrain is the line of a cell that drained a backlog.
func describeDrain(r cellResult) string {
	if r.Config.Direct {
		return fmt.Sprintf("%d messages (%d distinct events, %d duplicates, %d orders) signalled by the benchmark's client, no broker, no bridge (at most %d signals in flight; %d copies of a key's first content left out, as the bridge's duplicate filter would), to the floor's no-op workflow worker: received in %.1fs = %.1f events/s; %d signals; first receipt %.1fs after the first signal (sending took %.1fs)",
			r.Messages, r.Events, r.Duplicates, r.Config.Orders, r.Config.InFlight, r.Filtered,
			r.Elapsed.Seconds(), r.Rate, r.Signals, r.Startup.Seconds(), r.Publish.Seconds())
	}
	consumer := "a worker process"
	if r.Config.Floor {
		consumer = "the floor's no-op workflow worker"
	}
	return fmt.Sprintf("backlog of %d messages (%d distinct events, %d duplicates, %d orders) drained by the bridge and %s (concurrency %d, batch size %d) in %.1fs = %.1f events/s; %d signals; first effect %.1fs after the bridge started (the backlog was published in %.1fs before it started)",
		r.Messages, r.Events, r.Duplicates, r.Config.Orders, consumer, r.Config.Concurrency, r.Config.BatchSize,
		r.Elapsed.Seconds(), r.Rate, r.Signals, r.Startup.Seconds(), r.Publish.Seconds())
}
