package main

import (
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	// A command name with a space and a parenthesis; utime 1234, stime 66,
	// starttime 100.
	line := []byte("4242 (odd) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 1234 66 0 0 20 0 1 0 100 1000 10 18446744073709551615")
	comm, start, ticks, err := parseProcStat(line)
	if err != nil {
		t.Fatal(err)
	}
	if comm != "odd) name" || start != 100 || ticks != 1300 {
		t.Fatalf("got %q start %d, %d ticks; want %q start 100, 1300 ticks", comm, start, ticks, "odd) name")
	}
	if _, _, _, err := parseProcStat([]byte("12 (x) S 1 2")); err == nil {
		t.Fatal("a short line parsed")
	}
}

func TestParseUptime(t *testing.T) {
	if up, err := parseUptime([]byte("1234.56 2345.67\n")); err != nil || up != 123456 {
		t.Fatalf("uptime %d, %v; want 123456 ticks", up, err)
	}
	for _, bad := range []string{"", "soon 1", "-3 1"} {
		if _, err := parseUptime([]byte(bad)); err == nil {
			t.Errorf("uptime %q parsed", bad)
		}
	}
}

func TestParseIdle(t *testing.T) {
	stat := []byte("cpu  100 0 50 7000 30 0 5 0 0 0\ncpu0 50 0 25 3500 15 0 2 0 0 0\n")
	idle, err := parseIdle(stat)
	if err != nil || idle != 7030 {
		t.Fatalf("idle %d, %v; want 7030", idle, err)
	}
	if _, err := parseIdle([]byte("intr 1 2 3\n")); err == nil {
		t.Fatal("no cpu line parsed")
	}
}

func TestCPUGroup(t *testing.T) {
	for comm, want := range map[string]string{"temporal": "temporal", "temporal-server": "temporal",
		"temporal-ui-ser": "temporal-ui", "postgres": "postgres", "java": "rocketmq", "redis-server": "redis",
		"worker": "worker", "starter": "bridge", "bench": "bench", "bash": "other"} {
		if got := cpuGroup(comm); got != want {
			t.Errorf("cpuGroup(%q) = %q, want %q", comm, got, want)
		}
	}
}

// fakeProc writes a /proc of the given uptime (seconds), idle time and
// processes (pid: comm, start, ticks) into dir, replacing what was there.
func fakeProc(t *testing.T, dir, uptime string, idle, iowait int, procs map[int]procCPU, comms map[int]string) {
	t.Helper()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	write := func(name, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("uptime", uptime+" 100.00\n")
	write("stat", fmt.Sprintf("cpu  100 0 50 %d %d 0 5 0 0 0\ncpu0 50 0 25 1 1 0 2 0 0 0\n", idle, iowait))
	for pid, p := range procs {
		// utime is all of the ticks but one, stime the one.
		write(fmt.Sprintf("%d/stat", pid), fmt.Sprintf("%d (%s) S 1 1 1 0 -1 0 0 0 0 0 %d 1 0 0 20 0 1 0 %d 1000 10 0",
			pid, comms[pid], p.Ticks-1, p.Start))
	}
	// Entries that are not processes, a process that exited between the
	// listing and the read (no stat), and a stat line that does not parse.
	write("self/stat", "1 (self) S")
	write("net/tcp", "")
	if err := os.MkdirAll(filepath.Join(dir, "77"), 0o755); err != nil {
		t.Fatal(err)
	}
	write("78/stat", "78 (garbled")
}

// TestReadCPUFakeProc samples a made-up /proc twice. Between the two:
// the worker used 30 ticks; a postgres backend exited (it takes its own
// time with it, not its group's) while another used 10; a java process
// exited and its ID went to a new redis-server that used 7 ticks since it
// started; a new bench process started and used 25; a temporal process
// the first sample missed is not counted. The shares, in cores over the
// 2 s between the samples, are written by hand.
func TestReadCPUFakeProc(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "proc")
	comms := map[int]string{10: "worker", 11: "postgres", 12: "java", 13: "postgres", 14: "bench", 15: "temporal"}
	fakeProc(t, dir, "1000.00", 7000, 30, map[int]procCPU{
		10: {Start: 500, Ticks: 42}, 11: {Start: 600, Ticks: 900}, 12: {Start: 700, Ticks: 5000}, 13: {Start: 800, Ticks: 60},
	}, comms)
	a, err := readCPU(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]procCPU{10: {"worker", 500, 42}, 11: {"postgres", 600, 900}, 12: {"rocketmq", 700, 5000}, 13: {"postgres", 800, 60}}
	if a.Uptime != 100000 || a.Idle != 7030 || !maps.Equal(a.Procs, want) {
		t.Fatalf("first sample: uptime %d idle %d %v; want 100000, 7030, %v", a.Uptime, a.Idle, a.Procs, want)
	}
	comms[12] = "redis-server"
	fakeProc(t, dir, "1002.00", 7300, 30, map[int]procCPU{
		10: {Start: 500, Ticks: 72}, 12: {Start: 100100, Ticks: 7}, 13: {Start: 800, Ticks: 70},
		14: {Start: 100050, Ticks: 25}, 15: {Start: 900, Ticks: 4000},
	}, comms)
	b, err := readCPU(dir)
	if err != nil {
		t.Fatal(err)
	}
	a.At, b.At = time.Unix(0, 0), time.Unix(2, 0)
	sh := shareBetween(a, b)
	wantCores := map[string]float64{"worker": 0.15, "postgres": 0.05, "redis": 0.035, "bench": 0.125}
	if len(sh.Cores) != len(wantCores) || math.Abs(sh.Idle-1.5) > 1e-9 {
		t.Fatalf("shares %v idle %.3f; want %v idle 1.5", sh.Cores, sh.Idle, wantCores)
	}
	for g, w := range wantCores {
		if math.Abs(sh.Cores[g]-w) > 1e-9 {
			t.Errorf("%s: %.4f cores, want %.4f", g, sh.Cores[g], w)
		}
	}
	if s, ok := pidSeconds(a, b, 10); !ok || math.Abs(s-0.30) > 1e-9 {
		t.Errorf("pid 10: %.2f s (%v), want 0.30 s", s, ok)
	}
	if _, ok := pidSeconds(a, b, 15); ok {
		t.Error("pid 15, which the first sample missed, has a figure")
	}
	if _, ok := pidSeconds(a, b, 11); ok {
		t.Error("pid 11, which exited, has a figure")
	}
}

func TestWindowOfEnclosingSamples(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	sample := func(s float64, temporal, worker, idle uint64) cpuSample {
		return cpuSample{At: at(s), Idle: idle, Uptime: uint64(s * clockTicks),
			Procs: map[int]procCPU{1: {"temporal", 0, temporal}, 2: {"worker", 0, worker}}}
	}
	samples := []cpuSample{sample(0, 0, 0, 0), sample(1, 90, 10, 100), sample(3, 290, 30, 140), sample(4, 300, 30, 330)}
	// The window 1.5 s .. 2.5 s is enclosed by the samples at 1 s and 3 s.
	sh, ok := windowOf(samples, at(1.5), at(2.5))
	if !ok {
		t.Fatal("window not found")
	}
	if sh.Seconds != 2 || math.Abs(sh.Cores["temporal"]-1.0) > 1e-9 || math.Abs(sh.Cores["worker"]-0.1) > 1e-9 ||
		math.Abs(sh.Idle-0.2) > 1e-9 {
		t.Fatalf("got %+v, want 2 s: temporal 1.0, worker 0.1, idle 0.2", sh)
	}
	if got := sh.String(); got != "temporal 1.00, worker 0.10, idle 0.20" {
		t.Fatalf("String() = %q", got)
	}
	if _, ok := windowOf(samples, at(-1), at(2)); ok {
		t.Fatal("a window starting before the first sample was found")
	}
	if _, ok := windowOf(samples, at(2), at(5)); ok {
		t.Fatal("a window ending after the last sample was found")
	}
}

// processCPU is this process's user + system CPU time, from getrusage:
// the kernel's accounting, read otherwise than through /proc.
func processCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// burnCPU keeps this process busy until it has used d more CPU time, and
// returns the CPU time it used: however long that takes on a loaded
// machine, the amount is fixed.
func burnCPU(t *testing.T, d time.Duration) time.Duration {
	t.Helper()
	start := processCPU(t)
	x := 0.0
	for {
		for i := range 10_000 {
			x += math.Sqrt(float64(i))
		}
		if used := processCPU(t) - start; used >= d {
			if x < 0 {
				t.Log(x) // keeps the loop from being optimised away
			}
			return used
		}
	}
}

// TestSamplerSeesABusyProcess burns a fixed amount of CPU in this process
// between two samples of /proc and finds it in the figure for this process
// ID and in its group ("other": the test binary is bench.test). Both
// samples are read before and after the burn, not by the background
// sampler, so the figure is the same whatever else runs on the machine and
// however long the burn takes.
func TestSamplerSeesABusyProcess(t *testing.T) {
	const burn = 300 * time.Millisecond
	// /proc counts in whole clock ticks: two samples, each of user and
	// system time, each off by less than a tick.
	const slack = 4.0 / clockTicks
	a, err := readCPU("/proc")
	if err != nil {
		t.Fatal(err)
	}
	before := processCPU(t)
	burned := burnCPU(t, burn)
	b, err := readCPU("/proc")
	if err != nil {
		t.Fatal(err)
	}
	total := processCPU(t) - before
	got, ok := pidSeconds(a, b, os.Getpid())
	if !ok {
		t.Fatal("no figure for this process")
	}
	// At least the burn, at most all this process used from before the
	// burn to the end of the second sample, plus what reading the first
	// sample used after it read this process.
	if got < burned.Seconds()-slack || got > total.Seconds()+slack+0.2 {
		t.Fatalf("the samples saw %.2f s of CPU in this process; it burned %.2f s between them and used %.2f s in all",
			got, burned.Seconds(), total.Seconds())
	}
	sh := shareBetween(a, b)
	if other := sh.Cores["other"] * sh.Seconds; other < got-1e-9 {
		t.Fatalf("group other used %.2f s, less than this process's %.2f s", other, got)
	}
}
