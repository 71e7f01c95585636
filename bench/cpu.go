package main

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/procfs"
)

// cpuGroups names the group of a process by its command name; any other
// process is in group "other".
var cpuGroups = map[string]string{"temporal": "temporal", "temporal-server": "temporal", "postgres": "postgres",
	"java": "rocketmq", "worker": "worker", "starter": "bridge", "bench": "bench"}

// procCPU is one process in a sample: its group, its start time (clock
// ticks after boot, which tells a reused process ID apart) and the user +
// system CPU seconds it had used.
type procCPU struct {
	Group   string
	Start   uint64
	Seconds float64
}

// cpuSample is the machine's idle seconds and its processes' CPU use at one
// moment, by process ID; a process started at or after Newest is newer.
type cpuSample struct {
	At     time.Time
	Idle   float64
	Procs  map[int]procCPU
	Newest uint64
}

// readCPU samples the /proc of fs, leaving out a process that exits while
// it reads.
func readCPU(fs procfs.FS) (cpuSample, error) {
	s := cpuSample{At: time.Now(), Procs: map[int]procCPU{}}
	st, err := fs.Stat()
	if err != nil {
		return s, fmt.Errorf("read /proc/stat: %w", err)
	}
	s.Idle = st.CPUTotal.Idle + st.CPUTotal.Iowait
	procs, err := fs.AllProcs()
	if err != nil {
		return s, fmt.Errorf("list /proc: %w", err)
	}
	for _, p := range procs {
		ps, err := p.Stat()
		if err != nil {
			continue
		}
		g := cmp.Or(cpuGroups[ps.Comm], "other")
		s.Procs[p.PID] = procCPU{Group: g, Start: ps.Starttime, Seconds: ps.CPUTime()}
		s.Newest = max(s.Newest, ps.Starttime)
	}
	return s, nil
}

// cpuShare is what each group used between two samples, in cores (1 = one
// core busy all the time), and the machine's idle cores.
type cpuShare struct {
	Seconds float64            `json:"seconds"`
	Cores   map[string]float64 `json:"cores"`
	Idle    float64            `json:"idle_cores"`
}

// shareBetween sums, by group, what the processes of b used since a: the
// delta of a process in both samples (same ID and start time), all the time
// of one that started after a (a pool's new PostgreSQL backends). The time
// of processes that exited before b is lost: a lower bound for groups of
// short-lived processes.
func shareBetween(a, b cpuSample) cpuShare {
	sh := cpuShare{Seconds: b.At.Sub(a.At).Seconds(), Cores: map[string]float64{}}
	if sh.Seconds <= 0 {
		return sh
	}
	for pid, p := range b.Procs {
		if q, ok := a.Procs[pid]; ok && q.Start == p.Start {
			sh.Cores[p.Group] += (p.Seconds - q.Seconds) / sh.Seconds
		} else if p.Start >= a.Newest {
			sh.Cores[p.Group] += p.Seconds / sh.Seconds
		}
	}
	sh.Idle = max(0, b.Idle-a.Idle) / sh.Seconds
	return sh
}

// String lists the groups that used 0.005 cores or more, busiest first,
// then the idle cores.
func (sh cpuShare) String() string {
	groups := slices.SortedFunc(maps.Keys(sh.Cores), func(x, y string) int {
		return cmp.Or(cmp.Compare(sh.Cores[y], sh.Cores[x]), strings.Compare(x, y))
	})
	var sb strings.Builder
	for _, g := range groups {
		if sh.Cores[g] >= 0.005 {
			fmt.Fprintf(&sb, "%s %.2f, ", g, sh.Cores[g])
		}
	}
	fmt.Fprintf(&sb, "idle %.2f", sh.Idle)
	return sb.String()
}

// cpuSampler samples /proc in the background, so that the CPU use of a
// window known only afterwards (a drain's first to last effect) can be read
// from the samples around it.
type cpuSampler struct {
	mu      sync.Mutex
	samples []cpuSample
	stop    func()
}

// startCPUSampler samples /proc now and every interval until Stop.
func startCPUSampler(ctx context.Context, interval time.Duration) *cpuSampler {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	c := &cpuSampler{stop: func() { cancel(); <-done }}
	fs, err := procfs.NewDefaultFS()
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for err == nil && ctx.Err() == nil {
			if s, err := readCPU(fs); err == nil {
				c.mu.Lock()
				c.samples = append(c.samples, s)
				c.mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-t.C:
			}
		}
	}()
	return c
}

// Stop ends the sampling.
func (c *cpuSampler) Stop() { c.stop() }

// Window is the CPU use from the last sample at or before from to the first
// at or after to; false when no samples enclose the window.
func (c *cpuSampler) Window(from, to time.Time) (cpuShare, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a := slices.IndexFunc(c.samples, func(s cpuSample) bool { return s.At.After(from) }) - 1
	b := slices.IndexFunc(c.samples, func(s cpuSample) bool { return !s.At.Before(to) })
	if a < 0 || b <= a {
		return cpuShare{}, false
	}
	return shareBetween(c.samples[a], c.samples[b]), true
}

// cpuCost is a cell's CPU time per distinct event, in milliseconds: the
// engine's, and that of every process on the machine together.
type cpuCost struct {
	EngineMs float64 `json:"engine_ms"`
	TotalMs  float64 `json:"total_ms"`
}

// costOf is the CPU time per distinct event of r, over the window its rate
// is measured on; false when r has no CPU sample or no rate.
func costOf(r *cellResult) (cpuCost, bool) {
	if r == nil || r.CPU == nil || r.Rate <= 0 {
		return cpuCost{}, false
	}
	var total float64
	for _, cores := range r.CPU.Cores {
		total += cores
	}
	return cpuCost{EngineMs: r.CPU.Cores["temporal"] * 1000 / r.Rate, TotalMs: total * 1000 / r.Rate}, true
}
