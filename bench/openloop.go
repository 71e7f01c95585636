package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/scenario"
)

// The open loop finds each engine's capacity, for orderflow and for the
// engine's floor: steady rates rising in steps, each a cell of its own,
// until one fails the goal; then the cells at 0.5 and 0.9 × the capacity.
const (
	// goalP99 is the latency goal: p99 from publish to applied.
	goalP99 = time.Second
	// minAchieved is the share of the offered rate a step must achieve,
	// and maxTail how long after the last publish its last event may be
	// applied: beyond either its backlog grew.
	minAchieved = 0.95
	maxTail     = 2 * time.Second
)

// sweepPlan is how a capacity sweep steps: from Start × the drain rate,
// times Factor until a step fails, then between the highest pass and the
// lowest fail (their geometric mean) until the lowest fail is within
// Within (a share) of the highest pass, at most MaxSteps steps of Step
// each; the cells at 0.5 and 0.9 × the capacity last Cell each. The
// capacity it finds is the highest pass, within Within of the rate where
// the goal starts to fail.
//
// A step must be long enough to see a backlog grow: offered a share x
// over what the consumers keep up with, a backlog of x × Step seconds of
// events builds up, and the last keys' latency with it, so a step fails
// p99 <= goalP99 from x = goalP99/Step on (overloadSeen), 3.3% for the
// default 30 s, within the default Within of 5%.
type sweepPlan struct {
	Start, Factor float64
	MaxSteps      int
	Within        float64
	Step, Cell    time.Duration
}

// overloadSeen is the least share over the consumers' capacity that a
// step of the plan fails by its backlog: goalP99 of latency built up over
// the step.
func (p sweepPlan) overloadSeen() float64 {
	if p.Step <= 0 {
		return 0
	}
	return goalP99.Seconds() / p.Step.Seconds()
}

// sweepPoint is a step's offered rate and whether it passed.
type sweepPoint struct {
	Offered float64
	Pass    bool
}

// bounds are the capacity, the highest passing rate below the lowest
// failing one (0: none passed), and the lowest failing rate (0: none).
func bounds(pts []sweepPoint) (pass, fail float64) {
	for _, p := range pts {
		if !p.Pass && (fail == 0 || p.Offered < fail) {
			fail = p.Offered
		}
	}
	for _, p := range pts {
		if p.Pass && p.Offered > pass && (fail == 0 || p.Offered < fail) {
			pass = p.Offered
		}
	}
	return pass, fail
}

// next is the rate of the sweep's next step from start, or 0 when the
// sweep is done: up by Factor while every step passed, down by it while
// none did, then between the highest pass and the lowest fail until they
// are within Within of each other.
func (p sweepPlan) next(start float64, pts []sweepPoint) float64 {
	if len(pts) >= p.MaxSteps {
		return 0
	}
	if len(pts) == 0 {
		return start
	}
	pass, fail := bounds(pts)
	switch {
	case fail == 0:
		return pts[len(pts)-1].Offered * p.Factor
	case pass == 0:
		return fail / p.Factor
	case fail > pass*(1+p.Within)*(1+1e-9):
		return math.Sqrt(pass * fail)
	}
	return 0
}

// judge is "" when an open-loop cell met the goal with its backlog not
// growing, else why not.
func judge(r cellResult) string {
	switch {
	case r.P99 > goalP99:
		return fmt.Sprintf("fail: p99 %s > %s", ms(r.P99), ms(goalP99))
	case r.Rate < minAchieved*r.Config.Offered:
		return fmt.Sprintf("fail: achieved %.1f < %.2f × offered", r.Rate, minAchieved)
	case r.Tail > maxTail:
		return fmt.Sprintf("fail: last event applied %.1fs after the last publish", r.Tail.Seconds())
	}
	return ""
}

// Before each cell of a sweep the engine must be quiet: a step that
// overloaded it leaves queued tasks and terminations behind, which would
// slow the steps after it. quietCores is the engine's CPU, in cores over
// quietWindow, below which it is quiet; a wait longer than quietWait is
// noted in the cell's result and the cell runs anyway.
const (
	quietCores  = 0.25
	quietWindow = 2 * time.Second
	quietWait   = 3 * time.Minute
)

// engineQuiet reports whether the engine used at most quietCores over the
// quietWindow that ends at the newest sample, and what it used; false too
// when the samples do not cover the window yet.
func engineQuiet(c *cpuSampler, now time.Time) (bool, float64) {
	to := now.Add(-time.Second) // the sampler's newest sample is at most its interval old
	sh, ok := c.Window(to.Add(-quietWindow), to)
	if !ok {
		return false, 0
	}
	return sh.Cores["temporal"] <= quietCores, sh.Cores["temporal"]
}

// waitQuiet waits until the engine is quiet, at most quietWait, and
// returns how long it waited.
func (b *bench) waitQuiet(ctx context.Context, cell string) (time.Duration, error) {
	start := time.Now()
	for {
		quiet, cores := engineQuiet(b.cpu, time.Now())
		waited := time.Since(start)
		switch {
		case quiet:
			if waited > 5*time.Second {
				b.printf("quiet:    %s waited %s for the engine to use at most %.2f cores", cell, waited.Round(time.Second), quietCores)
			}
			return waited, nil
		case waited > quietWait:
			b.printf("quiet:    %s: the engine still used %.2f cores after %s; the cell runs anyway", cell, cores, quietWait)
			return waited, nil
		}
		select {
		case <-ctx.Done():
			return waited, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// ordersFor is how many orders a scenario needs so that offering rate
// events/s lasts d, at eventsPerOrder events per order.
func ordersFor(rate float64, d time.Duration, eventsPerOrder float64) int {
	if eventsPerOrder <= 0 {
		eventsPerOrder = 1
	}
	return max(1, int(math.Ceil(rate*d.Seconds()/eventsPerOrder)))
}

// warmUpWait bounds the wait for the warm-up event.
const warmUpWait = 2 * time.Minute

// warmUp sends one event of an order outside the scenario with send (its
// publish, or its signal) and waits until it arrived, so that an open-loop
// cell does not time the start.
func (b *bench) warmUp(ctx context.Context, send func(context.Context, fsm.Event) error, floor bool, db *database) error {
	id := uniq.Name("warm")
	e := fsm.Event{EventID: id + "-v1", OrderID: id, UserID: 1, Status: fsm.Created, Version: 1,
		AmountCents: 100, OccurredAt: time.Now().UTC().Truncate(time.Microsecond)}
	if err := send(ctx, e); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	for deadline := time.Now().Add(warmUpWait); time.Now().Before(deadline); {
		ids, err := b.cellOrders(ctx, floor, db)
		if err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
		if slices.Contains(ids, id) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("warm-up: event %s not applied after %s", e.Key(), warmUpWait)
}

// latencies returns, sorted, the time from each business key's first
// publish (the producer's send returned) to when it was applied (same
// host's clock), and the last time a key was applied.
func latencies(msgs []scenario.Message, sent []time.Time, applied map[scenario.Key]time.Time) ([]time.Duration, time.Time, error) {
	published := make(map[scenario.Key]time.Time, len(msgs))
	for i, m := range msgs {
		if m.Kind == scenario.KindBad {
			continue
		}
		k := m.Event.Key()
		if t, ok := published[k]; !ok || sent[i].Before(t) {
			published[k] = sent[i]
		}
	}
	var (
		lat  []time.Duration
		last time.Time
	)
	for k, p := range published {
		t, ok := applied[k]
		if !ok {
			return nil, last, fmt.Errorf("%s published but not applied", k)
		}
		lat = append(lat, max(t.Sub(p), 0))
		if t.After(last) {
			last = t
		}
	}
	slices.Sort(lat)
	return lat, last, nil
}

// quantile returns the q-quantile (nearest rank) of sorted, 0 when empty.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
