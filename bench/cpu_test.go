package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/procfs"

	"github.com/orderflow/orderflow/scenario"
)

// writeProc writes a /proc into dir, replacing what was there, and samples
// it with no engine PostgreSQL (writeProcFS).
func writeProc(t *testing.T, dir string, idle int, procs map[int]string) cpuSample {
	t.Helper()
	s, err := readCPU(writeProcFS(t, dir, idle, procs), 0)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// writeProcFS writes a /proc into dir, replacing what was there: idle
// ticks in /proc/stat (iowait a tenth of them) and processes by ID as
// "comm start utime stime [ppid]" (parent 0 when left out).
func writeProcFS(t *testing.T, dir string, idle int, procs map[int]string) procfs.FS {
	t.Helper()
	files := map[string]string{"stat": fmt.Sprintf("cpu  100 0 50 %d %d 0 5 0 0 0\nbtime 1000\n", idle, idle/10), "net/tcp": ""}
	for pid, p := range procs {
		comm, start, utime, stime, ppid := "", "", "", "", "0"
		fmt.Sscan(p, &comm, &start, &utime, &stime, &ppid)
		// Fields 3 to 44 of proc(5): ppid is 4, utime 14, stime 15,
		// starttime 22.
		files[fmt.Sprintf("%d/stat", pid)] = fmt.Sprintf("%d (%s) S %s%s %s %s%s %s%s\n", pid, comm, ppid,
			strings.Repeat(" 0", 9), utime, stime, strings.Repeat(" 0", 6), start, strings.Repeat(" 0", 22))
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
	return fs
}

// TestShareBetweenFakeProc samples a made-up /proc twice, 2 s apart, and
// checks the shares against figures worked out by hand: a process in both
// samples (same ID and start time) counts by its delta, one started after
// the first sample in full, any other not at all; each in its command's
// group (Redis's its own), any other command in "other".
func TestShareBetweenFakeProc(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "proc")
	a := writeProc(t, dir, 7000, map[int]string{10: "worker 500 40 2", 11: "postgres 600 900 0",
		12: "java 700 50 0", 13: "postgres 800 60 0", 14: "temporal 900 100 0", 17: "bash 300 10 0"})
	if got := a.Procs[12]; got != (procCPU{"rocketmq", 700, 0.5}) {
		t.Fatalf("pid 12: %+v, want rocketmq started at 700 with 0.5 s", got)
	}
	b := writeProc(t, dir, 7300, map[int]string{
		10: "worker 500 60 12",       // +30 ticks
		12: "redis-server 9000 70 0", // a new process on a reused ID: all of it, Redis's group
		13: "postgres 800 70 0",      // +10 ticks; 11 exited: left out
		14: "temporal 900 300 0",     // +200 ticks
		15: "bench 9100 26 0",        // started after the first sample: all of it
		16: "(sd-pam) 850 1 0",       // started before, missed by the first sample: left out
		17: "bash 300 30 0",          // +20 ticks
	})
	a.At, b.At = time.Unix(0, 0), time.Unix(2, 0)
	sh := shareBetween(a, b)
	want := map[string]float64{"worker": 0.15, "postgres": 0.05, "temporal": 1.0, "redis": 0.35, "other": 0.1, "bench": 0.13}
	if len(sh.Cores) != len(want) || math.Abs(sh.Idle-1.65) > 1e-9 || sh.Seconds != 2 {
		t.Fatalf("shares %v over %.1f s, idle %.3f; want %v over 2 s, idle 1.65", sh.Cores, sh.Seconds, sh.Idle, want)
	}
	for g, w := range want {
		if math.Abs(sh.Cores[g]-w) > 1e-9 {
			t.Errorf("%s: %.4f cores, want %.4f", g, sh.Cores[g], w)
		}
	}
	if got := sh.String(); got != "temporal 1.00, redis 0.35, worker 0.15, bench 0.13, other 0.10, postgres 0.05, idle 1.65" {
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

// TestEngineStoreGroup: once the sampler knows the postmaster of the
// engine's PostgreSQL, it and its children are the engine's ("temporal"),
// while orderflow's PostgreSQL (another postmaster and its children) stays
// "postgres", as does a postgres process of no known parent; a process of
// another command whose parent is that postmaster keeps its own group, and
// the engine's postmaster is "postgres" again once the sampler forgets it.
func TestEngineStoreGroup(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "proc")
	procs := map[int]string{
		100: "postgres 100 10 0 1",   // orderflow's postmaster
		101: "postgres 110 20 0 100", // one of its backends
		200: "postgres 200 30 0 1",   // the engine's postmaster
		201: "postgres 210 40 0 200", // its checkpointer
		202: "postgres 220 50 0 200", // a backend of the Temporal server
		203: "bash 230 5 0 200",      // not PostgreSQL: its own group
		300: "postgres 300 60 0",     // a postgres process of no known parent
		400: "temporal-server 400 70 0 1",
	}
	fs := writeProcFS(t, dir, 7000, procs)
	want := map[int]string{100: "postgres", 101: "postgres", 200: "temporal", 201: "temporal", 202: "temporal",
		203: "other", 300: "postgres", 400: "temporal"}
	s, err := readCPU(fs, 200)
	if err != nil {
		t.Fatal(err)
	}
	for pid, g := range want {
		if got := s.Procs[pid].Group; got != g {
			t.Errorf("pid %d (%s): group %q, want %q", pid, procs[pid], got, g)
		}
	}

	// Through the sampler: a window read while it knows the postmaster
	// puts the engine's SQL in "temporal", orderflow's in "postgres".
	c := &cpuSampler{}
	c.SetEngineStore(200)
	w := fakeWindow(t, dir, c)
	w.Start()
	writeProcFS(t, dir, 7100, map[int]string{100: "postgres 100 11 0 1", 101: "postgres 110 29 0 100", 200: "postgres 200 30 0 1",
		201: "postgres 210 45 0 200", 202: "postgres 220 80 0 200", 300: "postgres 300 60 0", 400: "temporal-server 400 100 0 1",
		203: "bash 230 5 0 200"})
	w.End()
	sh, ok, err := w.Share(0)
	if !ok || err != nil {
		t.Fatalf("share %+v, %v, %v", sh, ok, err)
	}
	got, _ := cpuSeconds(sh)
	// postgres: +1 and +9 ticks; temporal: +5 and +30 of the engine's
	// PostgreSQL, +30 of the server.
	if math.Abs(got["postgres"]-0.1) > 1e-9 || math.Abs(got["temporal"]-0.65) > 1e-9 {
		t.Errorf("CPU seconds %v, want postgres 0.10 and temporal 0.65", got)
	}

	c.SetEngineStore(0)
	if s, err := readCPU(fs, c.engineStore()); err != nil || s.Procs[200].Group != "postgres" || s.Procs[201].Group != "postgres" {
		t.Errorf("after the engine stopped: %+v, %v; want its postmaster and children in postgres", s.Procs, err)
	}
	var none *cpuSampler
	none.SetEngineStore(200)
	if none.engineStore() != 0 {
		t.Error("a nil sampler keeps a postmaster")
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
	a, err := readCPU(fs, 0)
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
	b, err := readCPU(fs, 0)
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

// fakeWindow is a CPU window of the made-up /proc in dir (writeProc) that
// pauses c and groups processes as c does.
func fakeWindow(t *testing.T, dir string, c *cpuSampler) *cpuWindow {
	t.Helper()
	fs, err := procfs.NewFS(dir)
	if err != nil {
		t.Fatal(err)
	}
	return newCPUWindow(func() (cpuSample, error) { return readCPU(fs, c.engineStore()) }, c.Pause)
}

// cpuSeconds is what each group of sh used in CPU seconds, and the idle
// seconds.
func cpuSeconds(sh cpuShare) (map[string]float64, float64) {
	s := map[string]float64{}
	for g, cores := range sh.Cores {
		s[g] = cores * sh.Seconds
	}
	return s, sh.Idle * sh.Seconds
}

// TestCPUWindowReadsItsEnds: a window reads /proc when it starts and when
// it ends, however short it is (here far shorter than the sampler's
// interval, with no sample of the sampler's at all), and its share is the
// difference of the two readings over their span; the sampler is paused
// from the start to the end. A window dropped before its end has no share
// and resumes the sampler; a read that fails is the share's error.
func TestCPUWindowReadsItsEnds(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "proc")
	writeProc(t, dir, 7000, map[int]string{10: "worker 500 40 2", 14: "temporal 900 100 0"})
	c := &cpuSampler{}
	w := fakeWindow(t, dir, c)
	w.Start()
	if n := c.paused.Load(); n != 1 {
		t.Fatalf("the sampler's pauses after the start: %d, want 1", n)
	}
	writeProc(t, dir, 7010, map[int]string{10: "worker 500 60 12", 14: "temporal 900 300 0", 15: "bench 9100 5 0"})
	w.End()
	if n := c.paused.Load(); n != 0 {
		t.Fatalf("the sampler's pauses after the end: %d, want 0", n)
	}
	w.Start() // too late: nothing changes
	sh, ok, err := w.Share(0)
	if !ok || err != nil || sh.Seconds <= 0 || sh.Seconds > 0.5 {
		t.Fatalf("share %+v, %v, %v; want one over the few milliseconds between the readings", sh, ok, err)
	}
	// worker +30 ticks, temporal +200, bench all 5 (started after the
	// start); idle +10 ticks and iowait +1.
	got, idle := cpuSeconds(sh)
	want := map[string]float64{"worker": 0.3, "temporal": 2, "bench": 0.05}
	if len(got) != len(want) || math.Abs(idle-0.11) > 1e-9 {
		t.Fatalf("CPU seconds %v, idle %.3f; want %v, idle 0.11", got, idle, want)
	}
	for g, s := range want {
		if math.Abs(got[g]-s) > 1e-9 {
			t.Errorf("%s: %.4f CPU seconds, want %.4f", g, got[g], s)
		}
	}

	dropped := fakeWindow(t, dir, c)
	dropped.Start()
	dropped.Drop()
	if n := c.paused.Load(); n != 0 {
		t.Errorf("the sampler's pauses after a drop: %d, want 0", n)
	}
	began := time.Now()
	if _, ok, err := dropped.Share(20 * time.Millisecond); ok || err != nil || time.Since(began) < 20*time.Millisecond {
		t.Errorf("a window without its end: share %v, %v after %s; want none after the 20 ms wait", ok, err, time.Since(began))
	}
	early := fakeWindow(t, dir, c)
	early.Drop()
	early.Start()
	if n := c.paused.Load(); n != 0 {
		t.Errorf("a start after the drop paused the sampler: %d pauses", n)
	}

	errRead := errors.New("no /proc")
	broken := newCPUWindow(func() (cpuSample, error) { return cpuSample{}, errRead }, c.Pause)
	broken.Start()
	broken.End()
	if _, ok, err := broken.Share(0); ok || !errors.Is(err, errRead) || c.paused.Load() != 0 {
		t.Errorf("failed readings: share %v, error %v, pauses %d; want none, the read's error, 0", ok, err, c.paused.Load())
	}
}

// TestFloorCellCPUWindow: a floor cell's window starts with its first key
// received and ends with the last (not with a duplicate, nor a key of
// another prefix), and measure takes the cell's CPU from it, though the
// background sampler has no sample of the window at all.
func TestFloorCellCPUWindow(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "proc")
	writeProc(t, dir, 7000, map[int]string{14: "temporal 900 100 0"})
	c := &cpuSampler{}
	w := fakeWindow(t, dir, c)
	tr := newFloorTracker("o")
	tr.watch(3, w.Start, w.End)
	tr.note(scenario.Key{OrderID: "o-1", Version: 1})
	for deadline := time.Now().Add(5 * time.Second); c.paused.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first key did not start the window")
		}
	}
	for _, k := range []scenario.Key{{OrderID: "o-1", Version: 1}, {OrderID: "warm-1", Version: 1}, {OrderID: "o-1", Version: 2}} {
		tr.note(k)
	}
	if _, ok, _ := w.Share(50 * time.Millisecond); ok {
		t.Fatal("the window ended before its last key")
	}
	writeProc(t, dir, 7100, map[int]string{14: "temporal 900 250 0"})
	tr.note(scenario.Key{OrderID: "o-2", Version: 1})
	b := &bench{cpu: c, floor: tr}
	res := cellResult{Config: cellConfig{Name: "floor", Floor: true}, Events: 3}
	if err := b.measure(context.Background(), nil, &sendLog{}, time.Now(), w, &res); err != nil {
		t.Fatal(err)
	}
	if res.CPU == nil {
		t.Fatal("the cell has no CPU figure")
	}
	if got, _ := cpuSeconds(*res.CPU); math.Abs(got["temporal"]-1.5) > 1e-9 || res.Rate <= 0 || c.paused.Load() != 0 {
		t.Errorf("CPU seconds %v at %.1f events/s, %d pauses; want temporal 1.5 at a rate, none", got, res.Rate, c.paused.Load())
	}

	// A cell of one key starts and ends its window with it, in that order.
	writeProc(t, dir, 7100, map[int]string{14: "temporal 900 250 0"})
	one := fakeWindow(t, dir, c)
	tr = newFloorTracker("p")
	tr.watch(1, one.Start, one.End)
	tr.note(scenario.Key{OrderID: "p-1", Version: 1})
	if sh, ok, err := one.Share(5 * time.Second); !ok || err != nil || sh.Seconds <= 0 {
		t.Errorf("a window of one key: %+v, %v, %v", sh, ok, err)
	}
}

// TestWatchProgress: the count's first rise above zero runs first, once;
// reaching want runs last and ends the watch; an error is counted again;
// an end of ctx ends it without last.
func TestWatchProgress(t *testing.T) {
	counts := []int{0, -1, 0, 3, 5, 7, 9}
	i := 0
	var calls []string
	count := func(context.Context) (int, error) {
		n := counts[min(i, len(counts)-1)]
		i++
		if n < 0 {
			return 0, errors.New("down")
		}
		return n, nil
	}
	watchProgress(context.Background(), count, 6, time.Millisecond,
		func() { calls = append(calls, fmt.Sprintf("first at %d", counts[i-1])) },
		func() { calls = append(calls, fmt.Sprintf("last at %d", counts[i-1])) })
	if want := []string{"first at 3", "last at 7"}; !slices.Equal(calls, want) || i != 6 {
		t.Errorf("calls %v after %d counts, want %v after 6", calls, i, want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	calls, i, counts = nil, 0, []int{1}
	watchProgress(ctx, count, 6, time.Millisecond, nil, func() { calls = append(calls, "last") })
	if len(calls) != 0 || i < 2 {
		t.Errorf("an unfinished watch ran %v after %d counts", calls, i)
	}
}
