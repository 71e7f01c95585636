package main

import (
	"math"
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
// plan asks for, in order, and the capacity the sweep reports.
func TestSweepSteps(t *testing.T) {
	plan := sweepPlan{Start: 0.25, Factor: 2, MaxSteps: 6}
	for _, c := range []struct {
		name     string
		cap      float64 // the highest rate that passes
		maxSteps int
		rates    []float64
		capacity float64
	}{
		// Up from 10 by 2 until 80 fails, then once at sqrt(40*80).
		{"up, refine passes", 60, 6, []float64{10, 20, 40, 80, 56.5685}, 56.5685},
		{"up, refine fails", 50, 6, []float64{10, 20, 40, 80, 56.5685}, 40},
		// Two bisections: once more between 56.57 and 80.
		{"up, two bisections", 60, 7, []float64{10, 20, 40, 80, 56.5685, 67.2717}, 56.5685},
		// The first step fails: down by 2 until one passes, then once between.
		{"down", 4, 6, []float64{10, 5, 2.5, 3.5355}, 3.5355},
		// Nothing fails within the step limit: the capacity is a lower bound.
		{"limit", 1000, 3, []float64{10, 20, 40}, 40},
		// Nothing passes within the limit.
		{"none", 1, 3, []float64{10, 5, 2.5}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := plan
			p.MaxSteps = c.maxSteps
			if strings.Contains(c.name, "two bisections") {
				p.Bisections = 2
			}
			var pts []sweepPoint
			for r := p.next(10, nil); r > 0; r = p.next(10, pts) {
				pts = append(pts, sweepPoint{Offered: r, Pass: r <= c.cap})
				if len(pts) > 10 {
					t.Fatal("the sweep does not end")
				}
			}
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

// TestCapacityBelowTheLowestFail: a pass above a fail (noise) is not the
// capacity; the highest pass below the lowest fail is.
func TestCapacityBelowTheLowestFail(t *testing.T) {
	pts := []sweepPoint{{10, true}, {20, false}, {15, true}, {30, true}}
	if got, _ := bounds(pts); got != 15 {
		t.Errorf("capacity %v, want 15", got)
	}
	// 15 to 20 is within sqrt(2) of each other: no further step.
	if got := (sweepPlan{Factor: 2, MaxSteps: 9}).next(10, pts); got != 0 {
		t.Errorf("next step at %v after the refinement, want none", got)
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
// known share of a core, and checks the window ending a second before now:
// busy while the engine used more than quietCores, quiet once it used less,
// and not judged before the samples cover the window.
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
		{2, false, 0},       // the window starts before the first sample
		{5, false, 1.5},     // 1..4 s: busy
		{7, false, 1.7 / 3}, // 3..6 s: one busy second of three
		{8, true, 0.1},      // 4..7 s: quiet
		{9, true, 0.1},
	} {
		quiet, cores := engineQuiet(c, time.Unix(tc.now, 0))
		if quiet != tc.quiet || math.Abs(cores-tc.cores) > 1e-9 {
			t.Errorf("at %d s: quiet %v with %.2f cores, want %v with %.2f", tc.now, quiet, cores, tc.quiet, tc.cores)
		}
	}
}
