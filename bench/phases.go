package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strconv"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/orderflow/orderflow/internal/obs"
	"github.com/orderflow/orderflow/scenario"
)

// enginePhases runs the phases of one engine: each method measures one
// phase into the engine's result and prints its lines.
type enginePhases struct {
	b   *bench // pointed at the engine
	e   *engine
	tc  client.Client
	o   options
	out io.Writer
}

// printf prints a line of the engine's output, tagged with its name.
func (p *enginePhases) printf(format string, args ...any) {
	fmt.Fprintf(p.out, p.e.tag()+format+"\n", args...)
}

// cell is the phase's cell config of name on this engine, with the run's
// bridge and worker settings.
func (p *enginePhases) cell(name string, orders int, dupRate float64) cellConfig {
	return cellConfig{Name: p.e.Name + "-" + name, Orders: orders, Concurrency: p.o.concurrency,
		BatchSize: p.o.batch, Workers: p.o.workers, Seed: p.o.seed, DupRate: dupRate}
}

// runEngine starts the engine, runs its phases and stops it.
func (b *bench) runEngine(ctx context.Context, e *engine, o options, base cellResult, out io.Writer) (engineResult, error) {
	began := time.Now()
	er := engineResult{Name: e.Name, Doc: e.Doc, Address: e.Address}
	p, stop, err := b.startEngine(ctx, e, o, &er, out)
	if err != nil {
		return er, err
	}
	defer stop()
	phases := map[string]func(context.Context, *engineResult) error{
		"e2e":   func(ctx context.Context, er *engineResult) error { return p.e2e(ctx, er, base) },
		"floor": p.floor, "dup": p.duplicates, "hot": p.hot, "open": p.openLoop,
	}
	for _, name := range o.phases {
		if err := phases[name](ctx, &er); err != nil {
			return er, err
		}
	}
	stop()
	er.Took = time.Since(began).Round(time.Second).String()
	c := p.b.cleanup
	p.printf("cleanup:  after each cell, its order workflows still running were terminated: %d of %d, in %.1fs over the run (not measured)",
		c.Terminated, c.Workflows, c.Took.Seconds())
	p.printf("took %s", er.Took)
	return er, nil
}

// startEngine starts the engine and connects to it; the returned function
// closes the client and stops the engine, once.
func (b *bench) startEngine(ctx context.Context, e *engine, o options, er *engineResult, out io.Writer) (*enginePhases, func(), error) {
	d, err := e.stack.up(ctx)
	if err != nil {
		return nil, nil, err
	}
	er.StartedBy, er.StartSeconds = e.stack.describe(), d.Seconds()
	fmt.Fprintf(out, "%sTemporal: %s, started in %.1fs (%s)\n", e.tag(), e.Doc, d.Seconds(), er.StartedBy)
	eb := *b
	eb.cfg.TemporalAddress, eb.cfg.TemporalNamespace = e.Address, e.Namespace
	eb.cleanup = &cleanupStats{}
	eb.engineMetrics = e.Metrics
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	tc, err := obs.NewTemporalClient(dctx, eb.cfg, slog.Default(), nil)
	cancel()
	if err != nil {
		e.stack.down()
		return nil, nil, err
	}
	eb.tc = tc
	stop := sync.OnceFunc(func() {
		tc.Close()
		e.stack.down()
	})
	return &enginePhases{b: &eb, e: e, tc: tc, o: o, out: out}, stop, nil
}

// e2e is orderflow draining the e2e backlog, and its ratio to the
// baseline.
func (p *enginePhases) e2e(ctx context.Context, er *engineResult, base cellResult) error {
	e2e, err := p.b.runCell(ctx, p.cell("e2e", p.o.orders, 0.2))
	if err != nil {
		return fmt.Errorf("e2e: %w", err)
	}
	er.E2E = e2e
	p.printf("e2e:      %s", describeDrain(e2e))
	if e2e.CPU != nil {
		p.printf("cpu:      %s", describeCPU(e2e))
	}
	p.printf("cost:     %s", e2e.Cost)
	er.Ratio = e2e.Rate / base.Rate
	p.printf("ratio:    e2e/baseline = %.2f (distinct events/s, both draining a backlog of the same scenario)", er.Ratio)
	return nil
}

// floor is the engine's floor draining the e2e backlog: the same stream
// through the same bridge into a workflow that only receives its signals;
// orderflow/floor is orderflow's own overhead.
func (p *enginePhases) floor(ctx context.Context, er *engineResult) error {
	cc := p.cell("floor", p.o.orders, 0.2)
	cc.Floor = true
	r, err := p.b.runCell(ctx, cc)
	if err != nil {
		return fmt.Errorf("floor: %w", err)
	}
	er.Floor = &r
	p.printf("floor:    %s", describeDrain(r))
	p.printf("cost:     %s", r.Cost)
	if er.E2E.Rate > 0 {
		er.FloorRatio = er.E2E.Rate / r.Rate
		p.printf("floor:    orderflow/floor = %.2f (distinct events/s, both draining a backlog of the same scenario)", er.FloorRatio)
	}
	return nil
}

// duplicates is the e2e drain without duplicates and with -dup-rate.
func (p *enginePhases) duplicates(ctx context.Context, er *engineResult) error {
	nodup, err := p.b.runCell(ctx, p.cell("dup0", p.o.orders, 0))
	if err != nil {
		return fmt.Errorf("no-duplicate scenario: %w", err)
	}
	dup, err := p.b.runCell(ctx, p.cell(fmt.Sprintf("dup%.0f", 100*p.o.dupRate), p.o.orders, p.o.dupRate))
	if err != nil {
		return fmt.Errorf("duplicate scenario: %w", err)
	}
	er.NoDup, er.Dup = &nodup, &dup
	p.printf("no dups:  %s", describeDrain(nodup))
	p.printf("%.0f%% dups: %s", 100*p.o.dupRate, describeDrain(dup))
	p.printf("cost:     no dups %s", nodup.Cost)
	p.printf("cost:     %.0f%% dups %s", 100*p.o.dupRate, dup.Cost)
	p.printf("dups:     %.0f%% duplicates / none = %.2f in distinct events/s", 100*p.o.dupRate, dup.Rate/nodup.Rate)
	return nil
}

// hot is one order receiving -hot-events events; every run of its workflow
// must end by continue-as-new.
func (p *enginePhases) hot(ctx context.Context, er *engineResult) error {
	o := p.o
	if o.hotEvents == 0 {
		return nil
	}
	cc := p.cell("hot", 1, 0)
	cc.BridgeArgs = []string{"-workflow-max-events", strconv.Itoa(o.hotMaxEvents)}
	cc.generate = func(prefix string) (*scenario.Scenario, error) { return hotScenario(prefix, o.hotEvents, time.Now()) }
	cc.inspect = func(ctx context.Context, r *cellResult) error {
		hr, err := checkHot(ctx, p.tc, p.e.Namespace, scenario.OrderID(r.Prefix, 0))
		r.Hot = &hr
		if err == nil && o.hotMaxEvents > 0 && o.hotEvents > o.hotMaxEvents && hr.Runs < 2 {
			err = fmt.Errorf("%d events with -workflow-max-events %d made no continue-as-new: %s", o.hotEvents, o.hotMaxEvents, hr)
		}
		return err
	}
	hot, err := p.b.runCell(ctx, cc)
	if err != nil {
		return fmt.Errorf("hot order: %w", err)
	}
	er.Hot = &hot
	p.printf("hot:      %d events of one order (batch size %d) drained in %.1fs = %.1f events/s, continuing as new every %d events; %d signals; its workflow: %s",
		hot.Events, o.batch, hot.Elapsed.Seconds(), hot.Rate, o.hotMaxEvents, hot.Signals, hot.Hot)
	p.printf("cost:     hot order %s", hot.Cost)
	if o.hotMaxEvents > 0 && hot.Hot.MaxHandled > 2*o.hotMaxEvents {
		p.printf("hot:      continue-as-new was deferred under the stream: a run handled %d events, not about %d",
			hot.Hot.MaxHandled, o.hotMaxEvents)
	}
	return nil
}

// openLoop publishes the e2e scenario at shares of this engine's e2e rate
// and measures the latency from publish to applied.
func (p *enginePhases) openLoop(ctx context.Context, er *engineResult) error {
	plan := p.o.open
	p.printf("open loop: the e2e scenario published at a steady rate, %s at %.2f x e2e (the steady rate) and %s at each other share; latency = publish -> order_events row",
		plan.Duration, plan.Steady, plan.duration(-1))
	fmt.Fprintf(p.out, "| offered events/s | share of e2e | offered for | achieved events/s | p50 | p95 | p99 |\n|---|---|---|---|---|---|---|\n")
	perOrder := float64(er.E2E.Events) / float64(er.E2E.Config.Orders)
	for _, f := range plan.fractions() {
		offered, d := f*er.E2E.Rate, plan.duration(f)
		cc := p.cell(fmt.Sprintf("open-%.2f", f), ordersFor(offered, d, perOrder), 0.2)
		cc.Seed += int64(1000 * f)
		cc.Offered, cc.Fraction = offered, f
		r, err := p.b.runCell(ctx, cc)
		if err != nil {
			return fmt.Errorf("open loop at %.2f x e2e: %w", f, err)
		}
		er.OpenLoop = append(er.OpenLoop, r)
		fmt.Fprintf(p.out, "| %.1f | %.2f | %s | %.1f | %s | %s | %s |\n", offered, f, d, r.Rate, ms(r.P50), ms(r.P95), ms(r.P99))
	}
	st, err := steadyResult(er.OpenLoop, plan.Steady)
	if err != nil {
		return err
	}
	er.SteadyP99 = float64(st.P99) / float64(time.Millisecond)
	if st.Cost != nil {
		er.SteadyActions = st.Cost.Actions
	}
	for _, r := range er.OpenLoop {
		p.printf("cost:     %.2f x e2e %s", r.Config.Fraction, r.Cost)
	}
	p.printf("steady:   %.2f x e2e = %.1f events/s (%.1f messages/s kept by the publisher) for %.0fs: p50 %s p95 %s p99 %s",
		plan.Steady, st.Config.Offered, st.PublishRate, st.Publish.Seconds(), ms(st.P50), ms(st.P95), ms(st.P99))
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
	signals, consumer := "", "the direct consumer"
	switch {
	case r.Config.Floor:
		signals = fmt.Sprintf("; %d signals", r.Signals)
		consumer = "the bridge and the floor's no-op workflow worker"
	case !r.Config.Direct:
		signals = fmt.Sprintf("; %d signals, %d workflow tasks (%.2f per message)", r.Signals, r.WorkflowTasks,
			float64(r.WorkflowTasks)/float64(max(r.Messages, 1)))
		consumer = fmt.Sprintf("the bridge and %d worker process(es)", r.Config.Workers)
	}
	return fmt.Sprintf("backlog of %d messages (%d distinct events, %d duplicates, %d orders) drained by %s (concurrency %d, batch size %d) in %.1fs = %.1f events/s (%.1f messages/s)%s; first effect %.1fs after the consumer started (the backlog was published in %.1fs before it started)",
		r.Messages, r.Events, r.Duplicates, r.Config.Orders, consumer, r.Config.Concurrency, r.Config.BatchSize,
		r.Elapsed.Seconds(), r.Rate, r.MessageRate, signals, r.Startup.Seconds(), r.Publish.Seconds())
}
