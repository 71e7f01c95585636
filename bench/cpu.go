package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// clockTicks is USER_HZ, the unit of the CPU times in /proc: 100 on every
// Linux architecture Go runs on.
const clockTicks = 100

// cpuSample is the CPU time the machine's processes had used at one moment,
// by process ID, the machine's idle time and its uptime, in clock ticks.
type cpuSample struct {
	At    time.Time
	Procs map[int]procCPU
	Idle  uint64
	// Uptime is the time since boot when the sample began, the clock
	// of procCPU.Start: a process started at or after it is new since the
	// sample.
	Uptime uint64
}

// procCPU is one process in a sample: its group (see cpuGroup), when it
// started (clock ticks after boot, which tells a reused process ID apart)
// and the user + system CPU time it had used.
type procCPU struct {
	Group string
	Start uint64
	Ticks uint64
}

// cpuGroup names the group of a process by its command name (comm, at most
// 15 characters): the services of the stack, orderflow's processes and the
// benchmark itself; everything else is "other".
func cpuGroup(comm string) string {
	switch {
	case comm == "temporal" || comm == "temporal-server":
		return "temporal"
	case strings.HasPrefix(comm, "temporal-ui"):
		return "temporal-ui"
	case comm == "postgres":
		return "postgres"
	case comm == "java":
		return "rocketmq"
	case strings.HasPrefix(comm, "redis"):
		return "redis"
	case comm == "worker":
		return "worker"
	case comm == "starter":
		return "bridge"
	case comm == "bench":
		return "bench"
	}
	return "other"
}

// parseProcStat returns the command name, the start time (clock ticks
// after boot) and the user + system CPU time (clock ticks) of a
// /proc/<pid>/stat line.
func parseProcStat(line []byte) (comm string, start, ticks uint64, err error) {
	// The command name is in parentheses and may hold spaces and ")".
	open, closing := bytes.IndexByte(line, '('), bytes.LastIndexByte(line, ')')
	if open < 0 || closing < open {
		return "", 0, 0, fmt.Errorf("no command name in %q", line)
	}
	comm = string(line[open+1 : closing])
	// After the name: state (field 3) ... utime (14), stime (15) ...
	// starttime (22).
	f := strings.Fields(string(line[closing+1:]))
	if len(f) < 20 {
		return "", 0, 0, fmt.Errorf("short stat line %q", line)
	}
	var n [3]uint64
	for i, field := range []int{14, 15, 22} {
		if n[i], err = strconv.ParseUint(f[field-3], 10, 64); err != nil {
			return "", 0, 0, fmt.Errorf("field %d of %q: %w", field, line, err)
		}
	}
	return comm, n[2], n[0] + n[1], nil
}

// parseUptime returns the time since boot (clock ticks) from /proc/uptime.
func parseUptime(b []byte) (uint64, error) {
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, fmt.Errorf("empty uptime")
	}
	secs, err := strconv.ParseFloat(f[0], 64)
	if err != nil || secs < 0 {
		return 0, fmt.Errorf("bad uptime %q", b)
	}
	return uint64(secs * clockTicks), nil
}

// parseIdle returns the idle time (idle + iowait, clock ticks) of the
// machine from /proc/stat.
func parseIdle(stat []byte) (uint64, error) {
	for _, line := range strings.Split(string(stat), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || f[0] != "cpu" {
			continue
		}
		idle, err1 := strconv.ParseUint(f[4], 10, 64)
		iowait, err2 := strconv.ParseUint(f[5], 10, 64)
		if err1 != nil || err2 != nil {
			return 0, fmt.Errorf("bad cpu line %q", line)
		}
		return idle + iowait, nil
	}
	return 0, fmt.Errorf("no cpu line in /proc/stat")
}

// readCPU samples /proc: the uptime first, then the idle time, then every
// process. A process that exits between the listing and the read is
// skipped.
func readCPU(proc string) (cpuSample, error) {
	s := cpuSample{At: time.Now(), Procs: map[int]procCPU{}}
	up, err := os.ReadFile(filepath.Join(proc, "uptime"))
	if err != nil {
		return s, err
	}
	if s.Uptime, err = parseUptime(up); err != nil {
		return s, err
	}
	stat, err := os.ReadFile(filepath.Join(proc, "stat"))
	if err != nil {
		return s, err
	}
	if s.Idle, err = parseIdle(stat); err != nil {
		return s, err
	}
	dirs, err := os.ReadDir(proc)
	if err != nil {
		return s, err
	}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		line, err := os.ReadFile(filepath.Join(proc, d.Name(), "stat"))
		if err != nil {
			continue // exited
		}
		comm, start, ticks, err := parseProcStat(line)
		if err != nil {
			continue
		}
		s.Procs[pid] = procCPU{Group: cpuGroup(comm), Start: start, Ticks: ticks}
	}
	return s, nil
}

// procTicks is the CPU time process pid (p in a later sample b) used since
// sample a: the difference when a holds the same process (same ID and
// start time), all of it when the process started after a began, and false
// otherwise (a process a missed: its share is unknown). A process that
// exited before b is not in b: the time it used after a is lost, so the
// figures are a lower bound for groups of short-lived processes
// (PostgreSQL backends of closed connections). A process that exits does
// not take the time of the others of its group with it.
func procTicks(a cpuSample, pid int, p procCPU) (uint64, bool) {
	q, inA := a.Procs[pid]
	switch {
	case inA && q.Start == p.Start:
		if p.Ticks < q.Ticks {
			return 0, false
		}
		return p.Ticks - q.Ticks, true
	case p.Start >= a.Uptime:
		return p.Ticks, true
	}
	return 0, false
}

// pidSeconds is the CPU time, in seconds, process pid used between samples
// a and b; false when b does not hold it or a's share is unknown.
func pidSeconds(a, b cpuSample, pid int) (float64, bool) {
	p, ok := b.Procs[pid]
	if !ok {
		return 0, false
	}
	t, ok := procTicks(a, pid, p)
	return float64(t) / clockTicks, ok
}

// cpuShare is what each group used between two samples, in cores (1 = one
// core busy all the time), and the machine's idle cores.
type cpuShare struct {
	Seconds float64            `json:"seconds"`
	Cores   map[string]float64 `json:"cores"`
	Idle    float64            `json:"idle_cores"`
}

// shareBetween is the CPU use between samples a and b, the sum over the
// processes of b of what each used since a (procTicks).
func shareBetween(a, b cpuSample) cpuShare {
	secs := b.At.Sub(a.At).Seconds()
	sh := cpuShare{Seconds: secs, Cores: map[string]float64{}}
	if secs <= 0 {
		return sh
	}
	for pid, p := range b.Procs {
		if t, ok := procTicks(a, pid, p); ok {
			sh.Cores[p.Group] += float64(t) / clockTicks / secs
		}
	}
	if b.Idle >= a.Idle {
		sh.Idle = float64(b.Idle-a.Idle) / clockTicks / secs
	}
	return sh
}

// String lists the groups, busiest first, then the idle cores.
func (sh cpuShare) String() string {
	groups := make([]string, 0, len(sh.Cores))
	for g := range sh.Cores {
		groups = append(groups, g)
	}
	slices.SortFunc(groups, func(a, b string) int {
		if sh.Cores[a] != sh.Cores[b] {
			if sh.Cores[a] > sh.Cores[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	var sb strings.Builder
	for _, g := range groups {
		if sh.Cores[g] < 0.005 {
			continue
		}
		fmt.Fprintf(&sb, "%s %.2f, ", g, sh.Cores[g])
	}
	fmt.Fprintf(&sb, "idle %.2f", sh.Idle)
	return sb.String()
}

// cpuSampler samples /proc in the background so that the CPU use of a
// window known only afterwards (a drain's first to last effect) can be
// read from the samples around it.
type cpuSampler struct {
	mu      sync.Mutex
	samples []cpuSample
	stop    context.CancelFunc
	done    chan struct{}
}

// startCPUSampler samples every interval until Stop.
func startCPUSampler(ctx context.Context, interval time.Duration) *cpuSampler {
	ctx, cancel := context.WithCancel(ctx)
	c := &cpuSampler{stop: cancel, done: make(chan struct{})}
	take := func() {
		if s, err := readCPU("/proc"); err == nil {
			c.mu.Lock()
			c.samples = append(c.samples, s)
			c.mu.Unlock()
		}
	}
	take()
	go func() {
		defer close(c.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				take()
				return
			case <-t.C:
				take()
			}
		}
	}()
	return c
}

// Stop takes a last sample and ends the sampling.
func (c *cpuSampler) Stop() {
	c.stop()
	<-c.done
}

// Window is the CPU use from the last sample at or before from to the first
// at or after to (the window's samples enclose it); false when the samples
// do not enclose it.
func (c *cpuSampler) Window(from, to time.Time) (cpuShare, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return windowOf(c.samples, from, to)
}

func windowOf(samples []cpuSample, from, to time.Time) (cpuShare, bool) {
	a, b, ok := enclosingSamples(samples, from, to)
	if !ok {
		return cpuShare{}, false
	}
	return shareBetween(a, b), true
}

// enclosingSamples returns the last sample at or before from and the first
// at or after to.
func enclosingSamples(samples []cpuSample, from, to time.Time) (cpuSample, cpuSample, bool) {
	a, b := -1, -1
	for i, s := range samples {
		if !s.At.After(from) {
			a = i
		}
		if b < 0 && !s.At.Before(to) {
			b = i
		}
	}
	if a < 0 || b < 0 || b <= a {
		return cpuSample{}, cpuSample{}, false
	}
	return samples[a], samples[b], true
}
