package main

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The interleaved stages (phase interleave): the three stages at one
// common rate, 0.9 × orderflow's capacity, each in two steady cells run
// mirrored, orderflow, pipeline floor, direct floor, direct floor,
// pipeline floor, orderflow, so that a drift of the machine's speed over
// the phase weighs on each stage alike and their CPU per event compares
// the same work at the same rate.

// interleaveOrder is the stage of each of the phase's cells, in the order
// they run.
var interleaveOrder = []string{stageOrderflow, stagePipeline, stageDirect, stageDirect, stagePipeline, stageOrderflow}

// interleaveShare is the common rate as a share of orderflow's capacity.
const interleaveShare = 0.9

// allGroups is the key of every process group together in a stage's CPU
// per event.
const allGroups = "all"

// interleaveResult is the interleaved phase: its common rate (offered
// distinct events/s), its cells in the order they ran with their stages,
// and each stage's CPU time per distinct event by process group
// (allGroups: every process), in milliseconds.
type interleaveResult struct {
	Rate        float64                       `json:"rate"`
	Cells       []stagedCell                  `json:"cells"`
	CPUPerEvent map[string]map[string]float64 `json:"cpu_ms_per_event,omitempty"`
	// Adjusted is CPUPerEvent adjusted to the cells' mean speed
	// (speedAdjustedCPU).
	Adjusted map[string]map[string]float64 `json:"cpu_ms_per_event_speed_adjusted,omitempty"`
}

// stagedCell is one cell of the interleaved phase and its stage.
type stagedCell struct {
	Stage string     `json:"stage"`
	Cell  cellResult `json:"cell"`
}

// interleavedCPU is each stage's CPU time per distinct event by process
// group, in milliseconds: the CPU seconds of the stage's cells together
// over their events together. A cell without a CPU reading is left out,
// and a stage without any has no figure.
func interleavedCPU(cells []stagedCell) map[string]map[string]float64 {
	return perEventCPU(cells, func(stagedCell) float64 { return 1 })
}

// speedAdjustedCPU is interleavedCPU with each cell's CPU seconds scaled
// to the cells' mean speed: by the mean of their probe's CPU ns per unit
// over the cell's own (a cell that ran on a machine 10% slower counts 10%
// less). Nil unless every cell with a CPU reading has a probe figure.
func speedAdjustedCPU(cells []stagedCell) map[string]map[string]float64 {
	var sum float64
	var n int
	for _, c := range cells {
		if c.Cell.CPU == nil {
			continue
		}
		if c.Cell.CPU.ProbeNS <= 0 {
			return nil
		}
		sum += c.Cell.CPU.ProbeNS
		n++
	}
	if n == 0 {
		return nil
	}
	mean := sum / float64(n)
	return perEventCPU(cells, func(c stagedCell) float64 { return mean / c.Cell.CPU.ProbeNS })
}

// perEventCPU is interleavedCPU with each cell's CPU seconds weighted.
func perEventCPU(cells []stagedCell, weight func(stagedCell) float64) map[string]map[string]float64 {
	seconds := map[string]map[string]float64{}
	events := map[string]int{}
	for _, c := range cells {
		sh := c.Cell.CPU
		if sh == nil || sh.Seconds <= 0 || c.Cell.Events <= 0 {
			continue
		}
		if seconds[c.Stage] == nil {
			seconds[c.Stage] = map[string]float64{}
		}
		w := weight(c)
		for g, cores := range sh.Cores {
			seconds[c.Stage][g] += w * cores * sh.Seconds
			seconds[c.Stage][allGroups] += w * cores * sh.Seconds
		}
		events[c.Stage] += c.Cell.Events
	}
	out := map[string]map[string]float64{}
	for st, groups := range seconds {
		out[st] = map[string]float64{}
		for g, s := range groups {
			out[st][g] = s * 1000 / float64(events[st])
		}
	}
	return out
}

// speedLine lists each cell's probe figure, in µs per unit.
func speedLine(cells []stagedCell) string {
	var parts []string
	for i, c := range cells {
		if c.Cell.CPU != nil && c.Cell.CPU.ProbeNS > 0 {
			parts = append(parts, fmt.Sprintf("%d %s %.1f", i+1, c.Stage, c.Cell.CPU.ProbeNS/1000))
		}
	}
	return strings.Join(parts, ", ")
}

// interleave runs the interleaved phase from orderflow's capacity and the
// drains of the three stages (their scenarios and consumers), and prints
// each stage's CPU per event by group and the ratios between the stages.
func (b *bench) interleave(ctx context.Context, er *engineResult) error {
	if capacity(er.Sweep) == 0 || er.Floor == nil {
		b.printf("interleave: not run: it needs orderflow's capacity and the pipeline floor's drain")
		return nil
	}
	drains := map[string]cellResult{stageOrderflow: er.E2E, stagePipeline: *er.Floor, stageDirect: b.directTemplate(er)}
	x := &interleaveResult{Rate: interleaveShare * er.Sweep.Capacity}
	b.printf("interleave: the stages at one rate, %.1f events/s (%.1f x orderflow's capacity), %s each, in the order %s",
		x.Rate, interleaveShare, b.o.sweep.Cell, strings.Join(interleaveOrder, ", "))
	fmt.Fprintf(b.out, "| stage | cell | offered events/s | achieved events/s | p50 | p99 | tail | verdict |\n|---|---|---|---|---|---|---|---|\n")
	for i, st := range interleaveOrder {
		r, err := b.steady(ctx, st, fmt.Sprintf("interleave%d", i+1), drains[st], x.Rate, b.o.sweep.Cell, true)
		if err != nil {
			return fmt.Errorf("interleaved %s, cell %d: %w", st, i+1, err)
		}
		x.Cells = append(x.Cells, stagedCell{Stage: st, Cell: r})
		b.printf("cost:     interleaved %s, cell %d: %s", st, i+1, r.Cost)
	}
	x.CPUPerEvent, x.Adjusted = interleavedCPU(x.Cells), speedAdjustedCPU(x.Cells)
	er.Interleaved = x
	b.nearCapacity(er.Sweep, x)
	b.printf("speed:    the probe's CPU µs per unit by cell (higher: a slower machine): %s", speedLine(x.Cells))
	for _, l := range describeInterleaved(*x) {
		b.printf("cpu:      %s", l)
	}
	if x.Adjusted != nil {
		r := stageCPURatios(x.Adjusted)
		b.printf("cpu:      adjusted to the cells' mean speed: own_cpu_ratio %s, engine_cpu_ratio %s, cpu_ratio %s",
			figure(r.OwnEngine, 2), figure(r.Engine, 2), figure(r.All, 2))
	}
	return nil
}

// nearCapacity makes orderflow's interleaved cell with the higher p99 its
// sweep's cell at 0.9 × capacity (the last line's p99 and actions per
// event), and prints both cells' latency, the stages of that one and the
// goal of latency.
func (b *bench) nearCapacity(s *sweepResult, x *interleaveResult) {
	cells := x.stageCells(stageOrderflow)
	if len(cells) == 0 {
		return
	}
	s.Near = slices.MaxFunc(cells, func(a, b *cellResult) int { return cmp.Compare(a.P99, b.P99) })
	var lat []string
	for _, c := range cells {
		lat = append(lat, fmt.Sprintf("p50 %s p99 %s", ms(c.P50), ms(c.P99)))
	}
	b.printf("capacity: orderflow %.1f events/s; at 0.9 x, its interleaved cells: %s", s.Capacity, strings.Join(lat, "; "))
	b.printf("cost:     orderflow at 0.9 x capacity %s", s.Near.Cost)
	b.printStages(stageOrderflow, "0.9 x capacity (its interleaved cell with the higher p99)", s.Near)
	b.printf("goal:     orderflow p99 <= %s up to 0.9 x capacity (its %d interleaved cells): %s", ms(goalP99), len(cells), verdict(x.held(stageOrderflow)))
}

// stageCells are the cells of stage st, in the order they ran.
func (x *interleaveResult) stageCells(st string) []*cellResult {
	var out []*cellResult
	for i := range x.Cells {
		if x.Cells[i].Stage == st {
			out = append(out, &x.Cells[i].Cell)
		}
	}
	return out
}

// held reports whether stage st ran and each of its cells passed judge.
func (x *interleaveResult) held(st string) bool {
	cells := x.stageCells(st)
	for _, c := range cells {
		if judge(*c) != "" {
			return false
		}
	}
	return len(cells) > 0
}

// describeInterleaved is a line per stage of its CPU ms per event by
// group at the common rate, busiest first, every process's last, then a
// line of the ratios of the engine's and every process's: orderflow over
// each floor, and the pipeline floor over the direct floor.
func describeInterleaved(x interleaveResult) []string {
	var lines []string
	for _, st := range []string{stageOrderflow, stagePipeline, stageDirect} {
		c, ok := x.CPUPerEvent[st]
		if !ok {
			continue
		}
		lines = append(lines, fmt.Sprintf("%s at %.1f events/s, CPU ms per event: %s; every process %.1f",
			st, x.Rate, groupList(c), c[allGroups]))
	}
	var ratios []string
	for _, p := range [][2]string{{stageOrderflow, stagePipeline}, {stageOrderflow, stageDirect}, {stagePipeline, stageDirect}} {
		a, b := x.CPUPerEvent[p[0]], x.CPUPerEvent[p[1]]
		if a == nil || b == nil || b["temporal"] <= 0 || b[allGroups] <= 0 {
			continue
		}
		ratios = append(ratios, fmt.Sprintf("%s/%s: the engine's %.2f, every process's %.2f",
			p[0], p[1], a["temporal"]/b["temporal"], a[allGroups]/b[allGroups]))
	}
	if len(ratios) > 0 {
		lines = append(lines, fmt.Sprintf("at %.1f events/s, CPU per event %s", x.Rate, strings.Join(ratios, "; ")))
	}
	return lines
}

// ownGroups are orderflow's own process groups: the bridge, the worker and
// its SQL (PostgreSQL holds only orderflow's databases on either engine:
// the server engine's persistence runs in an instance of its own, counted
// as the engine).
var ownGroups = []string{"bridge", "worker", "postgres"}

// cpuRatios are the last line's CPU ratios, from the interleaved phase at
// its common rate (0 where a figure is missing): OwnEngine is orderflow's
// own CPU per event over the engine's in the direct floor; Engine and All
// are the engine's and every process's CPU per event, orderflow's over
// the pipeline floor's.
type cpuRatios struct {
	OwnEngine, Engine, All float64
}

// ratios computes x's cpuRatios.
func (x *interleaveResult) ratios() cpuRatios {
	if x == nil {
		return cpuRatios{}
	}
	return stageCPURatios(x.CPUPerEvent)
}

// stageCPURatios are the cpuRatios of the stages' CPU per event by group.
func stageCPURatios(perEvent map[string]map[string]float64) cpuRatios {
	o, p, d := perEvent[stageOrderflow], perEvent[stagePipeline], perEvent[stageDirect]
	return cpuRatios{
		OwnEngine: div(ownCPU(o), d["temporal"]),
		Engine:    div(o["temporal"], p["temporal"]),
		All:       div(o[allGroups], p[allGroups]),
	}
}

// cpuRatiosBA are an A B B A experiment's CPU per event, B's over A's:
// orderflow's own (ownGroups), the engine's and every process's (0 where a
// figure is missing).
type cpuRatiosBA struct {
	Own    float64 `json:"own"`
	Engine float64 `json:"engine"`
	All    float64 `json:"all"`
}

// ownCPU is orderflow's own CPU per event in a stage's groups.
func ownCPU(groups map[string]float64) float64 {
	var own float64
	for _, g := range ownGroups {
		own += groups[g]
	}
	return own
}

// abbaCPURatios compares the variants' CPU per event, B over A.
func abbaCPURatios(perEvent map[string]map[string]float64) *cpuRatiosBA {
	a, b := perEvent["A"], perEvent["B"]
	if a == nil || b == nil {
		return nil
	}
	return &cpuRatiosBA{Own: div(ownCPU(b), ownCPU(a)), Engine: div(b["temporal"], a["temporal"]), All: div(b[allGroups], a[allGroups])}
}

// div is a/b, 0 unless both are positive.
func div(a, b float64) float64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	return a / b
}

// describeABBA is a line per variant of its CPU ms per event by group,
// then the line of B's over A's.
func describeABBA(x abbaResult) []string {
	var lines []string
	for _, v := range []string{"A", "B"} {
		c, ok := x.CPUPerEvent[v]
		if !ok {
			continue
		}
		lines = append(lines, fmt.Sprintf("%s at %.1f events/s, CPU ms per event: %s; own %.1f, every process %.1f",
			v, x.Rate, groupList(c), ownCPU(c), c[allGroups]))
	}
	if r := x.CPURatios; r != nil {
		lines = append(lines, fmt.Sprintf("B/A CPU per event at %.1f events/s: own %s, the engine's %s, every process's %s",
			x.Rate, figure(r.Own, 3), figure(r.Engine, 3), figure(r.All, 3)))
	}
	if r := x.AdjustedRatios; r != nil {
		lines = append(lines, fmt.Sprintf("B/A adjusted to the cells' mean speed: own %s, the engine's %s, every process's %s",
			figure(r.Own, 3), figure(r.Engine, 3), figure(r.All, 3)))
	}
	return lines
}

// groupList lists a stage's groups' CPU per event, busiest first, every
// process's left out.
func groupList(c map[string]float64) string {
	groups := slices.SortedFunc(maps.Keys(c), func(a, b string) int {
		return cmp.Or(cmp.Compare(c[b], c[a]), strings.Compare(a, b))
	})
	var parts []string
	for _, g := range groups {
		if g != allGroups {
			parts = append(parts, fmt.Sprintf("%s %.1f", g, c[g]))
		}
	}
	return strings.Join(parts, ", ")
}
