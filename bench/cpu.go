package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/procfs"
)

// cpuGroups names the group of a process by its command name; any other
// process is in group "other". Redis is the bridges' shared duplicate
// filter. Group "postgres" is orderflow's SQL: the server engine's
// PostgreSQL, an instance of its own, is in group "temporal" (readCPU), as
// the dev engine's SQLite is, inside its process.
var cpuGroups = map[string]string{"temporal": "temporal", "temporal-server": "temporal", "postgres": "postgres",
	"java": "rocketmq", "worker": "worker", "starter": "bridge", "bench": "bench", "redis-server": "redis"}

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
	// Probe is the speed probe's totals then.
	Probe probeTotals
}

// readCPU samples the /proc of fs, leaving out a process that exits while
// it reads. store is the postmaster of the engine's PostgreSQL (0: none):
// it and its children (backends, background workers) are in group
// "temporal".
func readCPU(fs procfs.FS, store int) (cpuSample, error) {
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
		if store > 0 && ps.Comm == "postgres" && (p.PID == store || ps.PPID == store) {
			g = "temporal"
		}
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
	// ProbeNS is the speed probe's CPU ns per unit over the window (0:
	// no unit): higher is a slower machine.
	ProbeNS float64 `json:"probe_ns,omitempty"`
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
	sh.ProbeNS = probeNS(a.Probe, b.Probe)
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

// cpuSampler samples /proc in the background, so that the engine's recent
// CPU use can be read between cells (waitQuiet). It reads nothing while a
// measured window is open (Pause), so that its own reads do not weigh on
// what the window measures.
type cpuSampler struct {
	mu      sync.Mutex
	samples []cpuSample
	paused  atomic.Int32
	stop    func()
	// store is the postmaster of the running engine's PostgreSQL, 0 when
	// it has none (SetEngineStore).
	store atomic.Int64
	// probe is the speed probe, whose totals each reading carries.
	probe *speedProbe
}

// startCPUSampler samples /proc now and every interval until Stop.
func startCPUSampler(ctx context.Context, interval time.Duration) *cpuSampler {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	c := &cpuSampler{stop: func() { cancel(); <-done }, probe: startSpeedProbe(ctx)}
	fs, err := procfs.NewDefaultFS()
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for err == nil && ctx.Err() == nil {
			if c.paused.Load() == 0 {
				if s, err := c.read(fs); err == nil {
					c.mu.Lock()
					c.samples = append(c.samples, s)
					c.mu.Unlock()
				}
			}
			select {
			case <-ctx.Done():
			case <-t.C:
			}
		}
	}()
	return c
}

// read samples the /proc of fs and the speed probe's totals.
func (c *cpuSampler) read(fs procfs.FS) (cpuSample, error) {
	s, err := readCPU(fs, c.engineStore())
	s.Probe = c.probe.totals()
	return s, err
}

// Stop ends the sampling.
func (c *cpuSampler) Stop() { c.stop() }

// SetEngineStore tells the sampler, and the windows that pause it, the
// postmaster of the running engine's PostgreSQL (0: none), whose processes
// are the engine's from then on. A nil sampler has nothing to tell.
func (c *cpuSampler) SetEngineStore(postmaster int) {
	if c != nil {
		c.store.Store(int64(postmaster))
	}
}

// engineStore is the postmaster SetEngineStore last gave (0 for a nil
// sampler).
func (c *cpuSampler) engineStore() int {
	if c == nil {
		return 0
	}
	return int(c.store.Load())
}

// Pause stops the sampling until the returned function is called (once or
// more); pauses nest. A nil sampler has nothing to pause.
func (c *cpuSampler) Pause() (resume func()) {
	if c == nil {
		return func() {}
	}
	c.paused.Add(1)
	return sync.OnceFunc(func() { c.paused.Add(-1) })
}

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

// cpuWindow reads the CPU counters of /proc at the start and at the end of
// one measured window, each the moment its caller knows it has come (Start,
// End), so that the window's CPU use is the difference of the two over
// exactly its span, however short. From Start until End (or Drop) it
// pauses the background sampler.
type cpuWindow struct {
	read  func() (cpuSample, error)
	pause func() (resume func())

	startOnce, endOnce sync.Once
	ended              chan struct{}
	mu                 sync.Mutex
	start, end         *cpuSample
	resume             func()
	dropped            bool
	err                error
}

// newCPUWindow is a window read with read, pausing with pause (nil: no
// sampler to pause).
func newCPUWindow(read func() (cpuSample, error), pause func() (resume func())) *cpuWindow {
	if pause == nil {
		pause = func() func() { return func() {} }
	}
	return &cpuWindow{read: read, pause: pause, ended: make(chan struct{})}
}

// procWindow is a window of the machine's /proc that pauses c, grouping
// processes as c does.
func procWindow(c *cpuSampler) (*cpuWindow, error) {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return nil, fmt.Errorf("open /proc: %w", err)
	}
	return newCPUWindow(func() (cpuSample, error) { return c.read(fs) }, c.Pause), nil
}

// Start reads the counters at the window's start and pauses the sampler;
// only its first call does, and none after Drop. It returns once they are
// read.
func (w *cpuWindow) Start() {
	w.startOnce.Do(func() {
		w.mu.Lock()
		if w.dropped {
			w.mu.Unlock()
			return
		}
		w.resume = w.pause()
		w.mu.Unlock()
		s, err := w.read()
		w.mu.Lock()
		defer w.mu.Unlock()
		if err != nil {
			w.err = fmt.Errorf("CPU at the window's start: %w", err)
			return
		}
		w.start = &s
	})
}

// End reads the counters at the window's end, once a Start under way has
// read its own, and resumes the sampler; only its first call does, and a
// Start after it reads nothing. It returns once they are read.
func (w *cpuWindow) End() {
	w.endOnce.Do(func() {
		defer close(w.ended)
		w.startOnce.Do(func() {})
		s, err := w.read()
		w.mu.Lock()
		defer w.mu.Unlock()
		if err != nil {
			w.err = errors.Join(w.err, fmt.Errorf("CPU at the window's end: %w", err))
		} else {
			w.end = &s
		}
		if w.resume != nil {
			w.resume()
		}
	})
}

// Drop resumes the sampler, also for a window whose end never comes (a
// cell that failed), and keeps a later Start from pausing it; a window
// that ended keeps its figures.
func (w *cpuWindow) Drop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.dropped = true
	if w.resume != nil {
		w.resume()
	}
}

// Share is the CPU use between the window's start and its end, waiting at
// most wait for an end under way; false when either reading is missing.
func (w *cpuWindow) Share(wait time.Duration) (cpuShare, bool, error) {
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-w.ended:
	case <-t.C:
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.start == nil || w.end == nil {
		return cpuShare{}, false, w.err
	}
	return shareBetween(*w.start, *w.end), true, w.err
}
