package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// results is everything a run measured: the file it writes under
// bench/results/.
type results struct {
	Started time.Time `json:"started"`
	Took    string    `json:"took"`
	// Commit is the checkout's commit, "-dirty" when it had changes.
	Commit string `json:"commit"`
	// Machine is the cores and platform the run had.
	Machine string `json:"machine"`
	// GoMaxProcs is the worker's and the bridge's GOMAXPROCS (0: Go's
	// default).
	GoMaxProcs int            `json:"gomaxprocs"`
	Engines    []engineResult `json:"engines"`
}

// engineResult is what a run measured on one Temporal engine.
type engineResult struct {
	Name    string `json:"name"`
	Doc     string `json:"doc,omitempty"`
	Address string `json:"address,omitempty"`
	// StartedBy says how the benchmark started the engine, and
	// StartSeconds how long that took.
	StartedBy    string  `json:"started_by,omitempty"`
	StartSeconds float64 `json:"start_seconds,omitempty"`
	// Took is the time of the engine's phases, starting and stopping it
	// included.
	Took string `json:"took,omitempty"`
	// PhaseTook is how long each phase took.
	PhaseTook map[string]string `json:"phase_took,omitempty"`
	E2E       cellResult        `json:"e2e"`
	// Floor is the pipeline floor (the engine's no-op workflow behind the
	// broker and the bridge) draining the e2e backlog, and FloorRatio
	// e2e/floor.
	Floor      *cellResult `json:"floor,omitempty"`
	FloorRatio float64     `json:"ratio_e2e_floor,omitempty"`
	// NoDup and Dup are the drains without duplicates and with -dup-rate,
	// run A B B A (NoDup[0], Dup[0], Dup[1], NoDup[1]); DupRatio is the
	// mean of Dup's rates over the mean of NoDup's.
	NoDup    []cellResult `json:"no_duplicates_abba,omitempty"`
	Dup      []cellResult `json:"duplicates_abba,omitempty"`
	DupRatio float64      `json:"ratio_dup_none,omitempty"`
	// DupCPU is each variant's CPU per distinct event by process group
	// over its two drains ("dup", "none"; allGroups: every process), ms,
	// adjusted to the drains' mean speed (speedAdjustedCPU), and
	// DupCPURatio every process's, dup over none: what the duplicates
	// cost, which the drains' short windows hide from their rates.
	DupCPU      map[string]map[string]float64 `json:"dup_cpu_ms_per_event,omitempty"`
	DupCPURatio float64                       `json:"ratio_dup_none_cpu,omitempty"`
	Hot         *cellResult                   `json:"hot_order,omitempty"`
	// Sweep and FloorSweep are the capacity sweeps of orderflow and of
	// the pipeline floor, and CapacityRatio orderflow's capacity over the
	// pipeline floor's.
	Sweep         *sweepResult `json:"sweep,omitempty"`
	FloorSweep    *sweepResult `json:"floor_sweep,omitempty"`
	CapacityRatio float64      `json:"ratio_capacity_floor,omitempty"`
	// DirectSweep is the capacity sweep of the engine's direct floor (the
	// no-op workflow signalled by the benchmark's client, no broker, no
	// bridge) with the e2e scenario; DirectRatio is
	// orderflow's capacity over the direct floor's (the last line's
	// floor_ratio) and PipelineRatio the pipeline floor's over it.
	DirectSweep   *sweepResult `json:"direct_floor_sweep,omitempty"`
	DirectRatio   float64      `json:"ratio_capacity_direct_floor,omitempty"`
	PipelineRatio float64      `json:"ratio_pipeline_direct_floor,omitempty"`
	// Interleaved is the three stages at one common rate, their cells
	// interleaved (phase interleave).
	Interleaved *interleaveResult `json:"interleaved,omitempty"`
	// ABBA is an experiment's four sweeps (phase abba).
	ABBA *abbaResult `json:"abba,omitempty"`
}

// abbaResult is an A B B A experiment: the variables B adds (secrets
// redacted); its cells A, B, B, A at one rate with each variant's CPU
// time per distinct event by process group (ms) and B's over A's; and,
// when it ran them, the capacity sweeps of each variant in the order they
// ran and the mean of B's capacities over the mean of A's.
type abbaResult struct {
	Env         []string                      `json:"env"`
	Rate        float64                       `json:"rate,omitempty"`
	Cells       []stagedCell                  `json:"cells,omitempty"`
	CPUPerEvent map[string]map[string]float64 `json:"cpu_ms_per_event,omitempty"`
	CPURatios   *cpuRatiosBA                  `json:"cpu_ratios_b_a,omitempty"`
	// Adjusted and AdjustedRatios are the same adjusted to the cells'
	// mean speed (speedAdjustedCPU).
	Adjusted       map[string]map[string]float64 `json:"cpu_ms_per_event_speed_adjusted,omitempty"`
	AdjustedRatios *cpuRatiosBA                  `json:"cpu_ratios_b_a_speed_adjusted,omitempty"`
	A              []*sweepResult                `json:"a,omitempty"`
	B              []*sweepResult                `json:"b,omitempty"`
	Ratio          float64                       `json:"ratio_b_a,omitempty"`
}

// capacity is s's capacity, 0 when there is no sweep.
func capacity(s *sweepResult) float64 {
	if s == nil {
		return 0
	}
	return s.Capacity
}

// stageRatios sets the ratios of the capacities measured (0 where either
// is missing): orderflow's over the pipeline floor's and over the direct
// floor's, and the pipeline floor's over the direct floor's.
func (er *engineResult) stageRatios() {
	ratio := func(a, b *sweepResult) float64 {
		if capacity(a) == 0 || capacity(b) == 0 {
			return 0
		}
		return a.Capacity / b.Capacity
	}
	er.CapacityRatio = ratio(er.Sweep, er.FloorSweep)
	er.DirectRatio = ratio(er.Sweep, er.DirectSweep)
	er.PipelineRatio = ratio(er.FloorSweep, er.DirectSweep)
}

// The stages of the floor comparison, by their sweeps' names.
const (
	stageDirect    = "direct floor"
	stagePipeline  = "pipeline floor"
	stageOrderflow = "orderflow"
)

// sweepResult is a capacity sweep: its steps in the order they ran, the
// capacity (the highest offered rate that passed below the lowest that
// failed; 0: none passed) and, for orderflow's, its cell at 0.9 × the
// capacity: the interleaved phase's orderflow cell with the higher p99.
type sweepResult struct {
	Steps    []cellResult `json:"steps"`
	Capacity float64      `json:"capacity"`
	Near     *cellResult  `json:"at_0_9_capacity,omitempty"`
}

// points are every cell of the sweep, ordered by offered rate.
func (s *sweepResult) points() []cellResult {
	ps := slices.Clone(s.Steps)
	if s.Near != nil {
		ps = append(ps, *s.Near)
	}
	slices.SortFunc(ps, func(a, b cellResult) int { return cmp.Compare(a.Config.Offered, b.Config.Offered) })
	return ps
}

// writeResults writes res into dir, named by its start (UTC) and commit
// so that files sort by date and say what they measured, and returns its
// path.
func writeResults(dir string, res results) (string, error) {
	if res.Machine == "" {
		res.Machine = fmt.Sprintf("%d cores, %s/%s, %s", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
	}
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return "", fmt.Errorf("results: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("results: %w", err)
	}
	path := filepath.Join(dir, res.Started.UTC().Format("2006-01-02T150405Z")+"-"+res.Commit+".json")
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return "", fmt.Errorf("results: %w", err)
	}
	return path, nil
}

// gitCommit is the commit of the checkout at dir, abbreviated, with
// "-dirty" when tracked files changed; "unknown" outside git.
func gitCommit(dir string) string {
	out, err := exec.Command("git", "-C", dir, "describe", "--always", "--dirty", "--abbrev=7", "--exclude=*").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}
