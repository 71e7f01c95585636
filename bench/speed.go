package main

import (
	"context"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// The speed probe: on a machine shared with others, the CPU time a process
// needs for the same work varies with what the neighbours do (the cores'
// clock, their caches), and a comparison of CPU per event between cells
// carries that drift. The probe repeats one fixed unit of work (sorting and
// map inserts, branchy and memory-bound like the measured programs) every
// probeEvery on a thread of its own and counts the thread's CPU time for
// it; a window's CPU ns per unit says how fast the machine ran then, and a
// ratio of CPU per event between cells is adjusted by the ratio of their
// units (speedAdjustedCPU).

// probeEvery is the probe's period: at about 0.5 ms a unit it costs the
// bench process about 1% of a core.
const probeEvery = 50 * time.Millisecond

// speedProbe holds the probe's running totals: units done and the CPU
// nanoseconds they took.
type speedProbe struct {
	units, ns atomic.Int64
}

// probeTotals is the probe's totals at one moment.
type probeTotals struct {
	Units, NS int64
}

// totals reads p's totals; a nil probe has none.
func (p *speedProbe) totals() probeTotals {
	if p == nil {
		return probeTotals{}
	}
	return probeTotals{Units: p.units.Load(), NS: p.ns.Load()}
}

// startSpeedProbe runs the probe until ctx ends.
func startSpeedProbe(ctx context.Context) *speedProbe {
	p := &speedProbe{}
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		u := newProbeUnit()
		t := time.NewTicker(probeEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			before, ok := threadCPU()
			u.run()
			after, ok2 := threadCPU()
			if ok && ok2 && after > before {
				p.units.Add(1)
				p.ns.Add(after - before)
			}
		}
	}()
	return p
}

// threadCPU is the calling thread's CPU time in nanoseconds.
func threadCPU() (int64, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0, false
	}
	return ts.Nano(), true
}

// probeUnit is the fixed work: the same random keys, every time, sorted
// and counted in a map.
type probeUnit struct {
	keys, buf []uint64
	seen      map[uint64]int
	sink      int
}

func newProbeUnit() *probeUnit {
	r := rand.New(rand.NewPCG(1, 2))
	u := &probeUnit{keys: make([]uint64, 4096), buf: make([]uint64, 4096), seen: make(map[uint64]int, 4096)}
	for i := range u.keys {
		u.keys[i] = r.Uint64() % 3000
	}
	return u
}

func (u *probeUnit) run() {
	copy(u.buf, u.keys)
	slices.Sort(u.buf)
	clear(u.seen)
	for _, k := range u.buf {
		u.seen[k]++
	}
	u.sink += len(u.seen)
}

// probeNS is the CPU ns per unit between two totals, 0 without a unit.
func probeNS(a, b probeTotals) float64 {
	if b.Units <= a.Units {
		return 0
	}
	return float64(b.NS-a.NS) / float64(b.Units-a.Units)
}
