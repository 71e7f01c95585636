package main

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestInterleaveOrder: each stage runs twice, in an order that reads the
// same both ways (O P D D P O), so that a steady drift of the machine
// weighs on the three alike.
func TestInterleaveOrder(t *testing.T) {
	mirrored := slices.Clone(interleaveOrder)
	slices.Reverse(mirrored)
	if len(interleaveOrder) != 6 || !slices.Equal(interleaveOrder, mirrored) {
		t.Fatalf("order %v, want six cells mirrored", interleaveOrder)
	}
	for _, st := range []string{stageOrderflow, stagePipeline, stageDirect} {
		if n := strings.Count(strings.Join(interleaveOrder, "|")+"|", st+"|"); n != 2 {
			t.Errorf("%s runs %d times, want 2", st, n)
		}
	}
}

// TestInterleavedCPU: a stage's CPU per event by group is the CPU seconds
// of its cells together over their events together, worked out by hand:
// orderflow's cells of 800 events over 20 s (the engine on 0.8 cores, the
// worker on 0.2) and of 840 over 21 s (0.9 and 0.2); the direct floor's
// cell of 810 events over 20.25 s (the engine on 0.6 cores, the benchmark
// on 0.2), its other cell without a CPU reading left out; the pipeline
// floor has no reading at all, so no figure.
func TestInterleavedCPU(t *testing.T) {
	cell := func(stage string, events int, seconds float64, cores map[string]float64) stagedCell {
		c := stagedCell{Stage: stage, Cell: cellResult{Events: events}}
		if cores != nil {
			c.Cell.CPU = &cpuShare{Seconds: seconds, Cores: cores}
		}
		return c
	}
	cells := []stagedCell{
		cell(stageOrderflow, 800, 20, map[string]float64{"temporal": 0.8, "worker": 0.2}),
		cell(stagePipeline, 800, 20, nil),
		cell(stageDirect, 810, 20.25, map[string]float64{"temporal": 0.6, "bench": 0.2}),
		cell(stageDirect, 790, 20, nil),
		cell(stagePipeline, 800, 20, nil),
		cell(stageOrderflow, 840, 21, map[string]float64{"temporal": 0.9, "worker": 0.2}),
	}
	got := interleavedCPU(cells)
	// orderflow: engine (16 + 18.9) s, worker (4 + 4.2) s over 1,640
	// events; direct floor: 12.15 and 4.05 s over 810.
	want := map[string]map[string]float64{
		stageOrderflow: {"temporal": 34.9 / 1.64, "worker": 8.2 / 1.64, allGroups: 43.1 / 1.64},
		stageDirect:    {"temporal": 15, "bench": 5, allGroups: 20},
	}
	if len(got) != len(want) {
		t.Fatalf("stages %v, want %v", got, want)
	}
	for st, groups := range want {
		if len(got[st]) != len(groups) {
			t.Errorf("%s: %v, want %v", st, got[st], groups)
		}
		for g, w := range groups {
			if math.Abs(got[st][g]-w) > 1e-9 {
				t.Errorf("%s, %s: %.4f ms per event, want %.4f", st, g, got[st][g], w)
			}
		}
	}
	x := interleaveResult{Rate: 40, CPUPerEvent: got}
	lines := describeInterleaved(x)
	wantLines := []string{
		"orderflow at 40.0 events/s, CPU ms per event: temporal 21.3, worker 5.0; every process 26.3",
		"direct floor at 40.0 events/s, CPU ms per event: temporal 15.0, bench 5.0; every process 20.0",
		"at 40.0 events/s, CPU per event orderflow/direct floor: the engine's 1.42, every process's 1.31",
	}
	if !slices.Equal(lines, wantLines) {
		t.Errorf("lines\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(wantLines, "\n"))
	}
}

// TestABBACPURatios: B's CPU per event over A's, orderflow's own being the
// bridge's, the worker's and PostgreSQL's (Redis and the engine not).
func TestABBACPURatios(t *testing.T) {
	cells := []stagedCell{
		{Stage: "A", Cell: cellResult{Events: 1000, CPU: &cpuShare{Seconds: 20, Cores: map[string]float64{"bridge": 0.25, "worker": 0.25, "postgres": 0.1, "redis": 0.05, "temporal": 1}}}},
		{Stage: "B", Cell: cellResult{Events: 1000, CPU: &cpuShare{Seconds: 20, Cores: map[string]float64{"bridge": 0.2, "worker": 0.2, "postgres": 0.05, "redis": 0.05, "temporal": 0.9}}}},
		{Stage: "B", Cell: cellResult{Events: 1000, CPU: &cpuShare{Seconds: 20, Cores: map[string]float64{"bridge": 0.2, "worker": 0.2, "postgres": 0.05, "redis": 0.05, "temporal": 0.9}}}},
		{Stage: "A", Cell: cellResult{Events: 1000, CPU: &cpuShare{Seconds: 20, Cores: map[string]float64{"bridge": 0.25, "worker": 0.25, "postgres": 0.1, "redis": 0.05, "temporal": 1}}}},
	}
	per := interleavedCPU(cells)
	// A: own (0.25+0.25+0.1) cores x 20 s / 1000 events = 12 ms, B 9 ms;
	// every process 1.65 and 1.4 cores: 33 and 28 ms.
	if got := ownCPU(per["A"]); math.Abs(got-12) > 1e-9 {
		t.Fatalf("A's own CPU per event %v ms, want 12", got)
	}
	r := abbaCPURatios(per)
	if r == nil || math.Abs(r.Own-0.75) > 1e-9 || math.Abs(r.Engine-0.9) > 1e-9 || math.Abs(r.All-(28.0/33.0)) > 1e-9 {
		t.Fatalf("B/A ratios %+v, want own 0.75, engine 0.9, all %v", r, 28.0/33.0)
	}
	if abbaCPURatios(map[string]map[string]float64{"A": per["A"]}) != nil {
		t.Error("ratios without B's cells")
	}
	lines := describeABBA(abbaResult{Rate: 30, CPUPerEvent: per, CPURatios: r})
	if len(lines) != 3 || !strings.Contains(lines[2], "own 0.750") {
		t.Errorf("lines %q", lines)
	}
}

// TestInterleavedHeld: a stage held its goal when each of its cells
// passed; the stage's cells are its own, in the order they ran.
func TestInterleavedHeld(t *testing.T) {
	cell := func(p99 time.Duration) cellResult {
		return cellResult{Config: cellConfig{Offered: 30}, Rate: 30, P99: p99}
	}
	x := &interleaveResult{Cells: []stagedCell{
		{stageOrderflow, cell(300 * time.Millisecond)},
		{stagePipeline, cell(5 * time.Second)},
		{stageOrderflow, cell(900 * time.Millisecond)},
	}}
	if got := x.stageCells(stageOrderflow); len(got) != 2 || got[0].P99 != 300*time.Millisecond || got[1].P99 != 900*time.Millisecond {
		t.Fatalf("orderflow's cells: %v", got)
	}
	if !x.held(stageOrderflow) {
		t.Error("orderflow's cells at 300 and 900 ms did not hold p99 <= 1 s")
	}
	if x.held(stagePipeline) {
		t.Error("the pipeline floor's cell at 5 s held p99 <= 1 s")
	}
	if x.held(stageDirect) {
		t.Error("a stage without cells held")
	}
	x.Cells[2].Cell.P99 = 1500 * time.Millisecond
	if x.held(stageOrderflow) {
		t.Error("orderflow held with one cell at 1,500 ms")
	}
}

// dupCPU compares every process's CPU per distinct event of the drains
// with duplicates and without, each drain scaled to the drains' mean
// speed: a drain on a machine twice as slow counts half its CPU.
func TestDupCPUPerDistinctEvent(t *testing.T) {
	drain := func(events int, cores map[string]float64, seconds, probe float64) cellResult {
		return cellResult{Events: events, CPU: &cpuShare{Seconds: seconds, Cores: cores, ProbeNS: probe}}
	}
	// Without duplicates: 10 s per 1,000 events at speed 100 (10 ms per
	// event). With them: 12 ms per event at speed 100, and one drain on a
	// machine twice as slow that used twice the CPU for the same work.
	none := []cellResult{drain(1000, map[string]float64{"worker": 1}, 10, 100), drain(1000, map[string]float64{"worker": 1}, 10, 100)}
	dup := []cellResult{drain(1000, map[string]float64{"worker": 1.2}, 10, 100), drain(1000, map[string]float64{"worker": 2.4}, 10, 200)}
	cpu, ratio := dupCPU(none, dup)
	// Mean speed 125: none's drains count 1.25 × theirs (12.5 ms), dup's
	// 1.25 × and 0.625 × (15 ms each).
	if math.Abs(cpu[stageNoDup][allGroups]-12.5) > 1e-9 || math.Abs(cpu[stageDup][allGroups]-15) > 1e-9 || math.Abs(ratio-1.2) > 1e-9 {
		t.Errorf("none %.3f ms, dup %.3f ms, ratio %.4f; want 12.5, 15 and 1.2", cpu[stageNoDup][allGroups], cpu[stageDup][allGroups], ratio)
	}
	if _, ratio := dupCPU(none, []cellResult{{Events: 1000}}); ratio != 0 {
		t.Errorf("a drain without CPU readings: ratio %v, want none", ratio)
	}
}
