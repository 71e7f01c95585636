package main

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orderflow/orderflow/scenario"
)

func TestQuantile(t *testing.T) {
	var lat []time.Duration
	for i := 1; i <= 100; i++ {
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	for q, want := range map[float64]time.Duration{0.5: 50 * time.Millisecond, 0.99: 99 * time.Millisecond,
		1: 100 * time.Millisecond, 0: time.Millisecond} {
		if got := quantile(lat, q); got != want {
			t.Errorf("quantile(1..100 ms, %v) = %v, want %v", q, got, want)
		}
	}
	if got := quantile(nil, 0.99); got != 0 {
		t.Errorf("quantile of nothing = %v", got)
	}
}

// TestSweepSteps walks sweeps whose verdicts are given by a capacity: a
// step passes when its rate is at most cap. Each case lists the rates the
// plan asks for, in order, and the capacity the sweep reports: up (or
// down) by 2, then bisections until the lowest fail is within 5% of the
// highest pass.
func TestSweepSteps(t *testing.T) {
	plan := sweepPlan{Start: 0.25, Factor: 2, Within: 0.05}
	for _, c := range []struct {
		name     string
		cap      float64 // the highest rate that passes
		maxSteps int
		rates    []float64
		capacity float64
	}{
		// Up from 10 by 2 until 80 fails, then between 40 and 80 until
		// 61.69 fails within 5% of 59.07's pass (1.044).
		{"up, refine passes", 60, 10, []float64{10, 20, 40, 80, 56.5685, 67.2717, 61.6884, 59.0730}, 59.0730},
		{"up, refine fails", 50, 10, []float64{10, 20, 40, 80, 56.5685, 47.5683, 51.8736, 49.6743}, 49.6743},
		// The first step fails: down by 2 until one passes, then between.
		{"down", 4, 10, []float64{10, 5, 2.5, 3.5355, 4.2045, 3.8555, 4.0262}, 3.8555},
		// The step limit ends the bisections early.
		{"limit while bisecting", 60, 6, []float64{10, 20, 40, 80, 56.5685, 67.2717}, 56.5685},
		// Nothing fails within the step limit: the capacity is a lower bound.
		{"limit", 1000, 3, []float64{10, 20, 40}, 40},
		// Nothing passes within the limit.
		{"none", 1, 3, []float64{10, 5, 2.5}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := plan
			p.MaxSteps = c.maxSteps
			pts := walkSweep(t, p, 10, c.cap)
			if len(pts) != len(c.rates) {
				t.Fatalf("steps %v, want rates %v", pts, c.rates)
			}
			for i, want := range c.rates {
				if d := pts[i].Offered - want; d > 0.001 || d < -0.001 {
					t.Errorf("step %d at %.4f, want %.4f (steps %v)", i+1, pts[i].Offered, want, pts)
				}
			}
			if got, _ := bounds(pts); got-c.capacity > 0.001 || c.capacity-got > 0.001 {
				t.Errorf("capacity %.4f, want %.4f", got, c.capacity)
			}
		})
	}
}

// walkSweep runs plan's sweep from start against a capacity of cap and
// returns its steps.
func walkSweep(t *testing.T, plan sweepPlan, start, cap float64) []sweepPoint {
	t.Helper()
	var pts []sweepPoint
	for r := plan.next(start, nil); r > 0; r = plan.next(start, pts) {
		pts = append(pts, sweepPoint{Offered: r, Pass: r <= cap})
		if len(pts) > 100 {
			t.Fatal("the sweep does not end")
		}
	}
	return pts
}

// TestSweepResolution: whatever the capacity and the start, a sweep with
// room for its steps ends with the capacity at or below the true one and
// the lowest fail above it, within 5% of each other, in at most the
// steps of the bisection it needs (log2 of ln 1.5 / ln 1.05, rounded up:
// 4) beyond those up or down to the first pair.
func TestSweepResolution(t *testing.T) {
	plan := sweepPlan{Factor: 1.5, Within: 0.05, MaxSteps: 40}
	for _, cap := range []float64{3.7, 12, 33.3, 41, 44.5, 45.5, 60, 97, 250} {
		for _, start := range []float64{5, 30, 45, 100} {
			pts := walkSweep(t, plan, start, cap)
			pass, fail := bounds(pts)
			if pass == 0 || fail == 0 || pass > cap || fail <= cap || fail > pass*1.05*(1+1e-9) {
				t.Errorf("capacity %.1f from %.1f: pass %.3f, fail %.3f (%.3f apart) after %v", cap, start, pass, fail, fail/pass, pts)
			}
			first := slices.IndexFunc(pts, func(p sweepPoint) bool { return p.Pass != pts[0].Pass })
			if bisections := len(pts) - first - 1; first < 0 || bisections > 4 {
				t.Errorf("capacity %.1f from %.1f: %d steps after the first pass and fail, want at most 4: %v", cap, start, bisections, pts)
			}
		}
	}
}

// TestCapacityBelowTheLowestFail: a pass above a fail (noise) is not the
// capacity; the highest pass below the lowest fail is, and the sweep
// bisects between them while they are further apart than its resolution.
func TestCapacityBelowTheLowestFail(t *testing.T) {
	pts := []sweepPoint{{10, true}, {20, false}, {15, true}, {30, true}}
	if got, _ := bounds(pts); got != 15 {
		t.Errorf("capacity %v, want 15", got)
	}
	// 20 is within 50% of 15: no further step; not within 5%: halfway.
	if got := (sweepPlan{Factor: 2, MaxSteps: 9, Within: 0.5}).next(10, pts); got != 0 {
		t.Errorf("next step at %v after the refinement, want none", got)
	}
	if got := (sweepPlan{Factor: 2, MaxSteps: 9, Within: 0.05}).next(10, pts); math.Abs(got-math.Sqrt(300)) > 1e-9 {
		t.Errorf("next step at %v, want %v", got, math.Sqrt(300))
	}
}

// TestJudge: a step passes with p99 within 1 s, at least 0.95 of the
// offered rate achieved and its last event applied within 2 s of the last
// publish; each failure says why.
func TestJudge(t *testing.T) {
	ok := cellResult{Config: cellConfig{Offered: 100}, Rate: 96, P99: 900 * time.Millisecond, Tail: time.Second}
	if got := judge(ok); got != "" {
		t.Errorf("a passing step judged %q", got)
	}
	for _, c := range []struct {
		change func(*cellResult)
		want   string
	}{
		{func(r *cellResult) { r.P99 = 1001 * time.Millisecond }, "p99"},
		{func(r *cellResult) { r.Rate = 94 }, "achieved"},
		{func(r *cellResult) { r.Tail = 2100 * time.Millisecond }, "last event"},
	} {
		r := ok
		c.change(&r)
		if got := judge(r); !strings.Contains(got, "fail") || !strings.Contains(got, c.want) {
			t.Errorf("judge = %q, want a failure naming %q", got, c.want)
		}
	}
}

// TestLatencies: a key's latency runs from its first publish (a duplicate
// sent later does not count; a bad message has no key) to when it was
// applied; a key never applied is an error.
func TestLatencies(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	k1, k2 := scenario.Key{OrderID: "o-1", Version: 1}, scenario.Key{OrderID: "o-1", Version: 2}
	msgs := []scenario.Message{
		{Event: scenario.Event{OrderID: "o-1", Version: 1}},
		{Event: scenario.Event{OrderID: "o-1", Version: 2}},
		{Event: scenario.Event{OrderID: "o-1", Version: 1}},
		{Kind: scenario.KindBad},
	}
	sent := []time.Time{t0, t0.Add(time.Second), t0.Add(2 * time.Second), t0.Add(3 * time.Second)}
	applied := map[scenario.Key]time.Time{k1: t0.Add(300 * time.Millisecond), k2: t0.Add(1500 * time.Millisecond)}
	lat, last, err := latencies(msgs, sent, applied)
	if err != nil {
		t.Fatal(err)
	}
	if len(lat) != 2 || lat[0] != 300*time.Millisecond || lat[1] != 500*time.Millisecond || !last.Equal(t0.Add(1500*time.Millisecond)) {
		t.Errorf("latencies %v, last %v", lat, last)
	}
	delete(applied, k2)
	if _, _, err := latencies(msgs, sent, applied); err == nil || !strings.Contains(err.Error(), k2.String()) {
		t.Errorf("a key not applied: %v, want an error naming it", err)
	}
}

// TestEngineQuiet builds samples 1 s apart in which the engine uses a
// known share of a core, and checks the window (quietWindow, 2 s) ending a
// second before now: busy while the engine used more than quietCores, quiet
// once it used less, and not judged before the samples cover the window.
func TestEngineQuiet(t *testing.T) {
	var samples []cpuSample
	var used float64
	// The engine's use per second: 1.5 cores for 4 s, then 0.1.
	for i := range 10 {
		samples = append(samples, cpuSample{At: time.Unix(int64(i), 0), Procs: map[int]procCPU{7: {Group: "temporal", Start: 1, Seconds: used}}})
		if i < 4 {
			used += 1.5
		} else {
			used += 0.1
		}
	}
	c := &cpuSampler{samples: samples}
	for _, tc := range []struct {
		now   int64
		quiet bool
		cores float64
	}{
		{1, false, 0},       // the window starts before the first sample
		{4, false, 1.5},     // 1..3 s: busy
		{6, false, 1.6 / 2}, // 3..5 s: one busy second of two
		{7, true, 0.1},      // 4..6 s: quiet
		{9, true, 0.1},
	} {
		quiet, cores := engineQuiet(c, time.Unix(tc.now, 0))
		if quiet != tc.quiet || math.Abs(cores-tc.cores) > 1e-9 {
			t.Errorf("at %d s: quiet %v with %.2f cores, want %v with %.2f", tc.now, quiet, cores, tc.quiet, tc.cores)
		}
	}
}
