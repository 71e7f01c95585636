package main

import (
	"context"
	"math"
	"testing"
	"time"
)

// TestSpeedProbeCounts: the probe does units on its own thread and counts
// their CPU time, a positive figure per unit.
func TestSpeedProbeCounts(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := startSpeedProbe(ctx)
	a := p.totals()
	time.Sleep(10 * probeEvery)
	b := p.totals()
	if b.Units-a.Units < 3 || probeNS(a, b) <= 0 {
		t.Fatalf("after %s: %d units, %.0f ns each", 10*probeEvery, b.Units-a.Units, probeNS(a, b))
	}
	if probeNS(b, b) != 0 || (*speedProbe)(nil).totals() != (probeTotals{}) {
		t.Error("no unit should give no figure")
	}
}

// TestSpeedAdjustedCPU: a cell whose probe units took twice the CPU time
// (a machine twice as slow) counts its CPU at the cells' mean speed.
func TestSpeedAdjustedCPU(t *testing.T) {
	cell := func(stage string, cores, probe float64) stagedCell {
		return stagedCell{Stage: stage, Cell: cellResult{Events: 1000,
			CPU: &cpuShare{Seconds: 10, Cores: map[string]float64{"worker": cores}, ProbeNS: probe}}}
	}
	// A used 1 core at speed 100 ns/unit; B 2 cores at 200 ns/unit, which
	// is the same work on a machine twice as slow.
	cells := []stagedCell{cell("A", 1, 100), cell("B", 2, 200)}
	raw := interleavedCPU(cells)
	adj := speedAdjustedCPU(cells)
	if raw["B"]["worker"] != 2*raw["A"]["worker"] {
		t.Fatalf("raw: %v", raw)
	}
	// Mean speed 150: A counts 1.5 x 10 ms, B 0.75 x 20 ms: both 15.
	if math.Abs(adj["A"]["worker"]-15) > 1e-9 || math.Abs(adj["B"]["worker"]-15) > 1e-9 {
		t.Errorf("adjusted: %v, want 15 ms each", adj)
	}
	cells[1].Cell.CPU.ProbeNS = 0
	if speedAdjustedCPU(cells) != nil {
		t.Error("a cell without a probe figure was adjusted")
	}
}
