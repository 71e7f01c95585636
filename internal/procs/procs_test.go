package procs

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// child builds testdata/child once per test binary run.
var child struct {
	sync.Once
	dir, path string
	err       error
}

func childBinary(t *testing.T) string {
	t.Helper()
	child.Do(func() {
		if child.dir, child.err = os.MkdirTemp("", "procs-child-"); child.err != nil {
			return
		}
		child.path, child.err = Build(context.Background(), "github.com/orderflow/orderflow/internal/procs/testdata/child", child.dir)
	})
	if child.err != nil {
		t.Fatal(child.err)
	}
	return child.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if child.dir != "" {
		_ = os.RemoveAll(child.dir)
	}
	os.Exit(code)
}

func start(t *testing.T, s Spec) *Proc {
	t.Helper()
	s.Path = childBinary(t)
	if s.Name == "" {
		s.Name = "child"
	}
	p := New(s)
	if err := p.Start(context.Background()); err != nil {
		t.Fatalf("start: %v\n%s", err, p.Output())
	}
	t.Cleanup(func() {
		if p.Running() {
			_ = p.Kill()
		}
	})
	return p
}

func TestBuildReportsCompilerOutput(t *testing.T) {
	_, err := Build(context.Background(), "github.com/orderflow/orderflow/internal/procs/no-such-package", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "go build github.com/orderflow/orderflow/internal/procs/no-such-package") {
		t.Fatalf("Build of a missing package: %v", err)
	}
	if filepath.Base(childBinary(t)) != "child" {
		t.Errorf("binary %s not named after its package", childBinary(t))
	}
}

func TestFreeAddr(t *testing.T) {
	addr, err := FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("FreeAddr = %q", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on %s: %v", addr, err)
	}
	ln.Close()
}

func TestNeverStarted(t *testing.T) {
	p := New(Spec{Name: "child", Path: "/nonexistent"})
	select {
	case <-p.Done():
	default:
		t.Error("Done is open before a start")
	}
	if p.Running() || p.Pid() != 0 || p.ExitCode() != -1 || p.Err() != nil || p.Addr() != "" {
		t.Errorf("running %v pid %d exit %d err %v addr %q", p.Running(), p.Pid(), p.ExitCode(), p.Err(), p.Addr())
	}
	if code, took, err := p.Stop(time.Second); code != -1 || took != 0 || err != nil {
		t.Errorf("Stop = %d %s %v", code, took, err)
	}
	if err := p.Kill(); err == nil {
		t.Error("Kill of a process never started succeeded")
	}
	if err := p.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "/nonexistent") {
		t.Errorf("Start of a missing binary: %v", err)
	}
	if err := New(Spec{Name: "x", Path: "/bin/true", Ready: "/healthz"}).Start(context.Background()); err == nil {
		t.Error("Ready without AddrEnv accepted")
	}
	if err := New(Spec{Name: "x", Path: "/bin/true", ReadyOutput: "x", LogPath: "x.log"}).Start(context.Background()); err == nil {
		t.Error("ReadyOutput with LogPath accepted")
	}
}

func TestReadyHealthzThenStop(t *testing.T) {
	began := time.Now()
	p := start(t, Spec{Args: []string{"-ready-after", "400ms", "-term-code", "7"}, Env: []string{"CHILD_NOTE=hello"},
		AddrEnv: "CHILD_ADDR", Ready: "/healthz"})
	if took := time.Since(began); took < 400*time.Millisecond {
		t.Errorf("Start returned after %s, before /healthz answered 200", took)
	}
	if !p.Running() || p.Pid() <= 0 {
		t.Fatalf("running %v pid %d", p.Running(), p.Pid())
	}
	resp, err := http.Get("http://" + p.Addr() + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /healthz on %s: %v %v", p.Addr(), resp, err)
	}
	resp.Body.Close()
	if err := p.Start(context.Background()); err == nil {
		t.Error("a second Start while running succeeded")
	}

	code, took, err := p.Stop(10 * time.Second)
	if err != nil || code != 7 || took >= 10*time.Second {
		t.Fatalf("Stop = %d %s %v, want 7 quickly", code, took, err)
	}
	select {
	case <-p.Done():
	default:
		t.Fatal("Done open after Stop")
	}
	if p.Running() || p.ExitCode() != 7 || p.Err() == nil {
		t.Errorf("after Stop: running %v exit %d err %v", p.Running(), p.ExitCode(), p.Err())
	}
	if c := p.Crashes(); len(c) != 0 {
		t.Errorf("Stop counted as a crash: %q", c)
	}
	out := p.Output()
	if !strings.Contains(out, "child started hello\n") || !strings.Contains(out, "child stopping\n") {
		t.Errorf("output %q lacks the environment's note or the SIGTERM line", out)
	}
	if tail := p.Tail(len("child stopping\n")); tail != "child stopping\n" {
		t.Errorf("Tail = %q", tail)
	}
	if code, took, err := p.Stop(time.Second); code != 7 || took != 0 || err != nil {
		t.Errorf("Stop of a stopped process = %d %s %v", code, took, err)
	}
}

func TestStopKillsAfterTimeout(t *testing.T) {
	p := start(t, Spec{Args: []string{"-ignore-term"}, ReadyOutput: "child ready"})
	code, took, err := p.Stop(500 * time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "did not exit within 500ms of SIGTERM") {
		t.Errorf("Stop of a process ignoring SIGTERM: err %v", err)
	}
	if code != -1 || took < 500*time.Millisecond {
		t.Errorf("Stop = %d after %s, want -1 after 500ms", code, took)
	}
	if !strings.Contains(p.Output(), "child ignores SIGTERM") {
		t.Errorf("SIGTERM not delivered; output %q", p.Output())
	}
	if c := p.Crashes(); len(c) != 0 {
		t.Errorf("Stop counted as a crash: %q", c)
	}
}

func TestKill(t *testing.T) {
	p := start(t, Spec{ReadyOutput: "child ready"})
	pid := p.Pid()
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if p.Running() || p.ExitCode() != -1 || p.Pid() != pid {
		t.Errorf("after Kill: running %v exit %d pid %d (was %d)", p.Running(), p.ExitCode(), p.Pid(), pid)
	}
	var ee *exec.ExitError
	if !errors.As(p.Err(), &ee) {
		t.Errorf("Err after Kill = %v, want an *exec.ExitError", p.Err())
	}
	if err := p.Kill(); err == nil {
		t.Error("a second Kill succeeded")
	}
	if c := p.Crashes(); len(c) != 0 {
		t.Errorf("Kill counted as a crash: %q", c)
	}
}

// An exit nobody caused is a crash; the Proc can start again, appending to
// its log, and keeps the crash on record.
func TestCrashesAndRestart(t *testing.T) {
	log := filepath.Join(t.TempDir(), "child.log")
	p := start(t, Spec{Name: "crasher", Args: []string{"-exit-after", "500ms", "-exit", "5"}, LogPath: log,
		AddrEnv: "CHILD_ADDR", Ready: "/healthz"})
	first := p.Addr()
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the child did not exit on its own")
	}
	if p.ExitCode() != 5 {
		t.Errorf("exit code %d, want 5", p.ExitCode())
	}
	c := p.Crashes()
	if len(c) != 1 || !strings.Contains(c[0], "crasher exited on its own: exit status 5") || !strings.Contains(c[0], log) {
		t.Fatalf("Crashes = %q", c)
	}

	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if p.Addr() == first {
		t.Errorf("the restart listens on the same address %s", first)
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if c := p.Crashes(); len(c) != 1 {
		t.Errorf("after a restart and a kill: Crashes = %q", c)
	}
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	if strings.Count(s, "child started") != 2 || !strings.Contains(s, " start 1\n") || !strings.Contains(s, " start 2\n") {
		t.Errorf("log of two starts:\n%s", s)
	}
	if p.Output() != "" {
		t.Errorf("Output with a log file = %q", p.Output())
	}
	if tail := p.Tail(12); tail != s[len(s)-12:] {
		t.Errorf("Tail(12) = %q, want %q", tail, s[len(s)-12:])
	}
	if tail := p.Tail(1 << 20); tail != s {
		t.Errorf("Tail(1<<20) = %q, want the whole log", tail)
	}
}

func TestReadinessTimeout(t *testing.T) {
	p := New(Spec{Name: "slow", Path: childBinary(t), Args: []string{"-ready-after", "1h"},
		AddrEnv: "CHILD_ADDR", Ready: "/healthz", ReadyTimeout: 500 * time.Millisecond})
	began := time.Now()
	err := p.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "slow not ready within 500ms") || !strings.Contains(err.Error(), "/healthz") {
		t.Fatalf("Start = %v, want a readiness timeout", err)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("the readiness timeout took %s", took)
	}
	if p.Running() {
		t.Error("Start left a process that is not ready running")
	}
	if c := p.Crashes(); len(c) != 0 {
		t.Errorf("Start's kill counted as a crash: %q", c)
	}
}

func TestReadinessContext(t *testing.T) {
	p := New(Spec{Name: "child", Path: childBinary(t), ReadyOutput: "never printed"})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := p.Start(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Start = %v, want the context's deadline", err)
	}
	if p.Running() {
		t.Error("Start left the process running")
	}
}

func TestExitBeforeReady(t *testing.T) {
	p := New(Spec{Name: "child", Path: childBinary(t), Args: []string{"-exit-after", "100ms", "-exit", "2"},
		ReadyOutput: "never printed"})
	err := p.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "child exited before it was ready (exit status 2)") {
		t.Fatalf("Start = %v", err)
	}
	if c := p.Crashes(); len(c) != 1 {
		t.Errorf("an exit during start-up is a crash: %q", c)
	}
	if !strings.Contains(p.Output(), "child started") {
		t.Errorf("output %q", p.Output())
	}
}

func TestRun(t *testing.T) {
	code, out, err := Run(context.Background(), Spec{Name: "sh", Path: "/bin/sh", Args: []string{"-c", "echo said; exit 3"}})
	if err != nil || code != 3 || !strings.Contains(out, "said") {
		t.Errorf("Run: exit %d, output %q, err %v; want 3, \"said\", nil", code, out, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, _, err := Run(ctx, Spec{Name: "sleep", Path: "/bin/sleep", Args: []string{"30"}}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Run past its context: err %v, want the deadline", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Run past its context returned after %s", took)
	}
	if _, _, err := Run(context.Background(), Spec{Name: "none", Path: "/nonexistent/program"}); err == nil {
		t.Error("Run of a missing program succeeded")
	}
}
