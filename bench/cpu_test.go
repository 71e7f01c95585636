package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/procfs"
)

// writeProc writes a /proc into dir, replacing what was there, and samples
// it: idle ticks in /proc/stat (iowait a tenth of them) and processes by
// ID as "comm start utime stime".
func writeProc(t *testing.T, dir string, idle int, procs map[int]string) cpuSample {
	t.Helper()
	files := map[string]string{"stat": fmt.Sprintf("cpu  100 0 50 %d %d 0 5 0 0 0\nbtime 1000\n", idle, idle/10), "net/tcp": ""}
	for pid, p := range procs {
		var comm, start, utime, stime string
		fmt.Sscan(p, &comm, &start, &utime, &stime)
		// Fields 3 to 44 of proc(5): utime is 14, stime 15, starttime 22.
		files[fmt.Sprintf("%d/stat", pid)] = fmt.Sprintf("%d (%s) S%s %s %s%s %s%s\n", pid, comm,
			strings.Repeat(" 0", 10), utime, stime, strings.Repeat(" 0", 6), start, strings.Repeat(" 0", 22))
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	for name, text := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fs, err := procfs.NewFS(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := readCPU(fs)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestShareBetweenFakeProc samples a made-up /proc twice, 2 s apart, and
// checks the shares against figures worked out by hand: a process in both
// samples (same ID and start time) counts by its delta, one started after
// the first sample in full, any other not at all.
func TestShareBetweenFakeProc(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "proc")
	a := writeProc(t, dir, 7000, map[int]string{10: "worker 500 40 2", 11: "postgres 600 900 0",
		12: "java 700 50 0", 13: "postgres 800 60 0", 14: "temporal 900 100 0", 17: "bash 300 10 0"})
	if got := a.Procs[12]; got != (procCPU{"rocketmq", 700, 0.5}) {
		t.Fatalf("pid 12: %+v, want rocketmq started at 700 with 0.5 s", got)
	}
	b := writeProc(t, dir, 7300, map[int]string{
		10: "worker 500 60 12",       // +30 ticks
		12: "redis-server 9000 70 0", // a new process on a reused ID: all of it
		13: "postgres 800 70 0",      // +10 ticks; 11 exited: left out
		14: "temporal 900 300 0",     // +200 ticks
		15: "bench 9100 26 0",        // started after the first sample: all of it
		16: "(sd-pam) 850 1 0",       // started before, missed by the first sample: left out
		17: "bash 300 30 0",          // +20 ticks
	})
	a.At, b.At = time.Unix(0, 0), time.Unix(2, 0)
	sh := shareBetween(a, b)
	want := map[string]float64{"worker": 0.15, "postgres": 0.05, "temporal": 1.0, "other": 0.45, "bench": 0.13}
	if len(sh.Cores) != len(want) || math.Abs(sh.Idle-1.65) > 1e-9 || sh.Seconds != 2 {
		t.Fatalf("shares %v over %.1f s, idle %.3f; want %v over 2 s, idle 1.65", sh.Cores, sh.Seconds, sh.Idle, want)
	}
	for g, w := range want {
		if math.Abs(sh.Cores[g]-w) > 1e-9 {
			t.Errorf("%s: %.4f cores, want %.4f", g, sh.Cores[g], w)
		}
	}
	if got := sh.String(); got != "temporal 1.00, other 0.45, worker 0.15, bench 0.13, postgres 0.05, idle 1.65" {
		t.Errorf("String() = %q", got)
	}
	// The window 0.5 s .. 1.5 s is enclosed by the samples at 0 s and 2 s;
	// one starting before the first sample or ending after the last is not.
	later := b
	later.At = time.Unix(3, 0)
	sampler := &cpuSampler{samples: []cpuSample{a, b, later}}
	if w, ok := sampler.Window(time.Unix(0, 5e8), time.Unix(1, 5e8)); !ok || w.Seconds != 2 || w.Cores["temporal"] != sh.Cores["temporal"] {
		t.Errorf("window 0.5..1.5 s: %+v, %v; want the share between 0 s and 2 s", w, ok)
	}
	for _, span := range [][2]int64{{-1, 1}, {1, 4}} {
		if _, ok := sampler.Window(time.Unix(span[0], 0), time.Unix(span[1], 0)); ok {
			t.Errorf("window %v s was found", span)
		}
	}
}

// processCPU is this process's user + system CPU time from getrusage: the
// kernel's accounting, read otherwise than through /proc.
func processCPU(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestReadCPUSeesABusyProcess burns a fixed amount of CPU in this process
// between two samples of the real /proc: however loaded the machine, the
// delta of this process ID is what its own accounting says it used.
func TestReadCPUSeesABusyProcess(t *testing.T) {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		t.Fatal(err)
	}
	a, err := readCPU(fs)
	if err != nil {
		t.Fatal(err)
	}
	before := processCPU(t)
	x := 0.0
	for processCPU(t)-before < 300*time.Millisecond {
		for i := range 10_000 {
			x += math.Sqrt(float64(i))
		}
	}
	burned := processCPU(t) - before
	b, err := readCPU(fs)
	if err != nil {
		t.Fatal(err)
	}
	total := processCPU(t) - before
	p, q := a.Procs[os.Getpid()], b.Procs[os.Getpid()]
	got := q.Seconds - p.Seconds
	// /proc counts whole clock ticks (0.01 s) of user and of system time in
	// each sample; reading the first sample after this process's line
	// costs a little more.
	if q.Start != p.Start || got < burned.Seconds()-0.04 || got > total.Seconds()+0.25 || x < 0 {
		t.Fatalf("the samples saw %.2f s of CPU in this process; it burned %.2f s between them, %.2f s in all",
			got, burned.Seconds(), total.Seconds())
	}
}

// TestCPUStages: the CPU time per event of the cells at 0.9 × capacity,
// against figures worked out by hand: orderflow at 40 events/s with the
// engine on 0.8 cores and 0.4 more elsewhere is 20 ms of the engine's and
// 30 of all; the direct floor at 60 events/s with 1.2 and 0.3 cores is 20
// and 25. A sweep without a CPU sample gives no figure, and without the
// direct floor's or orderflow's there is no comparison.
func TestCPUStages(t *testing.T) {
	near := func(rate float64, cores map[string]float64) *sweepResult {
		return &sweepResult{Capacity: rate / 0.9, Near: &cellResult{Rate: rate, CPU: &cpuShare{Cores: cores}}}
	}
	er := engineResult{
		Sweep:       near(40, map[string]float64{"temporal": 0.8, "worker": 0.2, "bridge": 0.2}),
		DirectSweep: near(60, map[string]float64{"temporal": 1.2, "bench": 0.3}),
		FloorSweep:  &sweepResult{Capacity: 50, Near: &cellResult{Rate: 45}},
	}
	er.stageRatios()
	er.cpuStages()
	want := map[string]cpuCost{stageOrderflow: {EngineMs: 20, TotalMs: 30}, stageDirect: {EngineMs: 20, TotalMs: 25}}
	if len(er.CPUPerEvent) != len(want) {
		t.Fatalf("CPUPerEvent = %v, want %v", er.CPUPerEvent, want)
	}
	for name, w := range want {
		got := er.CPUPerEvent[name]
		if math.Abs(got.EngineMs-w.EngineMs) > 1e-9 || math.Abs(got.TotalMs-w.TotalMs) > 1e-9 {
			t.Errorf("%s: %+v, want %+v", name, got, w)
		}
	}
	d := describeCPUStages(er)
	for _, part := range []string{"the engine's direct floor 20.0, orderflow 20.0", "every process's direct floor 25.0, orderflow 30.0",
		"the engine's 1.00, every process's 0.83", "(capacities 0.67)"} {
		if !strings.Contains(d, part) {
			t.Errorf("description %q lacks %q", d, part)
		}
	}
	er.DirectSweep.Near.CPU = nil
	er.cpuStages()
	if _, ok := er.CPUPerEvent[stageDirect]; ok {
		t.Errorf("a cell without a CPU sample has a figure: %v", er.CPUPerEvent)
	}
	if d := describeCPUStages(er); d != "" {
		t.Errorf("without the direct floor's figure: %q, want none", d)
	}
}
