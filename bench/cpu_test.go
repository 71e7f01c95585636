package main

import (
	"math"
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	// A command name with a space and a parenthesis; utime 1234, stime 66.
	line := []byte("4242 (odd) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 1234 66 0 0 20 0 1 0 100 1000 10 18446744073709551615")
	comm, ticks, err := parseProcStat(line)
	if err != nil {
		t.Fatal(err)
	}
	if comm != "odd) name" || ticks != 1300 {
		t.Fatalf("got %q %d, want %q 1300", comm, ticks, "odd) name")
	}
	if _, _, err := parseProcStat([]byte("12 (x) S 1 2")); err == nil {
		t.Fatal("a short line parsed")
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

func TestWindowOfEnclosingSamples(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	samples := []cpuSample{
		{At: at(0), Groups: map[string]uint64{"temporal": 0, "worker": 0}, Idle: 0},
		{At: at(1), Groups: map[string]uint64{"temporal": 90, "worker": 10}, Idle: 100},
		{At: at(3), Groups: map[string]uint64{"temporal": 290, "worker": 30}, Idle: 140},
		{At: at(4), Groups: map[string]uint64{"temporal": 300, "worker": 30}, Idle: 330},
	}
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

// TestSamplerSeesABusyProcess burns CPU in this process (group "other":
// the test binary is bench.test) and finds it in the samples.
func TestSamplerSeesABusyProcess(t *testing.T) {
	c := startCPUSampler(t.Context(), 100*time.Millisecond)
	from := time.Now()
	time.Sleep(150 * time.Millisecond)
	for x := 0; time.Since(from) < 800*time.Millisecond; x++ {
		_ = math.Sqrt(float64(x))
	}
	to := time.Now()
	time.Sleep(150 * time.Millisecond)
	c.Stop()
	sh, ok := c.Window(from, to)
	if !ok {
		t.Fatal("the samples do not enclose the window")
	}
	// The loop ran about 0.65 s of the window of about 1 s; on a busy
	// machine it gets less of a core, but not nothing.
	if sh.Cores["other"] < 0.1 {
		t.Fatalf("the busy loop was not seen: %s", sh)
	}
	t.Logf("window %.2fs: %s", sh.Seconds, sh)
}
