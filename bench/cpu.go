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
// by process group (see cpuGroup), and the machine's idle time, in clock
// ticks.
type cpuSample struct {
	At     time.Time
	Groups map[string]uint64
	Idle   uint64
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

// parseProcStat returns the command name and the user + system CPU time
// (clock ticks) of a /proc/<pid>/stat line.
func parseProcStat(line []byte) (comm string, ticks uint64, err error) {
	// The command name is in parentheses and may hold spaces and ")".
	open, closing := bytes.IndexByte(line, '('), bytes.LastIndexByte(line, ')')
	if open < 0 || closing < open {
		return "", 0, fmt.Errorf("no command name in %q", line)
	}
	comm = string(line[open+1 : closing])
	// After the name: state (field 3) ... utime (14), stime (15).
	f := strings.Fields(string(line[closing+1:]))
	if len(f) < 13 {
		return "", 0, fmt.Errorf("short stat line %q", line)
	}
	u, err := strconv.ParseUint(f[11], 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("utime of %q: %w", line, err)
	}
	s, err := strconv.ParseUint(f[12], 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("stime of %q: %w", line, err)
	}
	return comm, u + s, nil
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

// readCPU samples /proc. A process that exits between the listing and the
// read is skipped, and a process that exited since the last sample takes
// its CPU time with it: the figures are a lower bound for groups of
// short-lived processes (PostgreSQL backends of closed connections).
func readCPU(proc string) (cpuSample, error) {
	s := cpuSample{At: time.Now(), Groups: map[string]uint64{}}
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
		if _, err := strconv.Atoi(d.Name()); err != nil {
			continue
		}
		line, err := os.ReadFile(filepath.Join(proc, d.Name(), "stat"))
		if err != nil {
			continue // exited
		}
		comm, ticks, err := parseProcStat(line)
		if err != nil {
			continue
		}
		s.Groups[cpuGroup(comm)] += ticks
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

// shareBetween is the CPU use between samples a and b.
func shareBetween(a, b cpuSample) cpuShare {
	secs := b.At.Sub(a.At).Seconds()
	sh := cpuShare{Seconds: secs, Cores: map[string]float64{}}
	if secs <= 0 {
		return sh
	}
	for g, t := range b.Groups {
		if t0 := a.Groups[g]; t >= t0 {
			sh.Cores[g] = float64(t-t0) / clockTicks / secs
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
		return cpuShare{}, false
	}
	return shareBetween(samples[a], samples[b]), true
}
