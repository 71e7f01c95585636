// Package procs builds orderflow's programs and runs them as child
// processes: for the end-to-end and binary tests, and for the benchmark.
//
// A Proc runs one program, possibly several times in a row (a test may
// kill it and start it again). Start waits until the program is ready: its
// HTTP endpoint answers 200 or its output shows a given line. Kill and Stop
// end it; an exit that neither caused is a crash, and Crashes lists them.
package procs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// DefaultReadyTimeout is how long Start waits for readiness when
// Spec.ReadyTimeout is zero.
const DefaultReadyTimeout = 60 * time.Second

// Build compiles the main package pkg (an import path, such as
// "github.com/orderflow/orderflow/worker") into dir and returns the path of
// the binary, named after the last element of pkg. It builds without -race:
// the binaries are the programs under test, not test code.
func Build(ctx context.Context, pkg, dir string) (string, error) {
	return BuildIn(ctx, "", pkg, dir)
}

// BuildIn is Build run in the module at src, such as a worktree of another
// commit ("" is the current directory's).
func BuildIn(ctx context.Context, src, pkg, dir string) (string, error) {
	out := filepath.Join(dir, path.Base(pkg))
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	cmd.Dir = src
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return out, nil
}

// FreeAddr returns a 127.0.0.1 address whose port nothing listened on a
// moment ago.
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// Spec describes a program to run.
type Spec struct {
	// Name names the process in errors and log headers.
	Name string
	// Path is the binary; Args are its arguments.
	Path string
	Args []string
	// Env is added to the environment of the current process.
	Env []string
	// LogPath, when set, is the file the process's stdout and stderr are
	// appended to, each start preceded by a line "=== <time> start <n>".
	// Otherwise the output is kept in memory (see Output).
	LogPath string
	// AddrEnv, when set, names the environment variable through which each
	// start passes the process a free 127.0.0.1 address to listen on (see
	// Addr).
	AddrEnv string
	// Ready, when set, is a URL path on that address ("/healthz",
	// "/readyz") that Start polls until it answers 200. It needs AddrEnv.
	Ready string
	// ReadyOutput, when set, is a string Start waits for in the process's
	// output. It needs the output in memory (no LogPath).
	ReadyOutput string
	// ReadyTimeout bounds the wait for readiness; DefaultReadyTimeout when
	// zero.
	ReadyTimeout time.Duration
}

// Proc is a program run as a child process, started again after each exit
// if its user wishes. Its methods are safe for concurrent use.
type Proc struct {
	spec Spec
	out  syncBuffer // the output when Spec.LogPath is empty

	mu      sync.Mutex
	cmd     *exec.Cmd     // the last start
	addr    string        // its address
	done    chan struct{} // closed when it has exited
	err     error         // what its Wait returned
	caused  bool          // Kill or Stop ended it
	starts  int
	crashes []string
}

// New returns a Proc for spec, not yet started.
func New(spec Spec) *Proc {
	return &Proc{spec: spec}
}

// Start runs the program and waits until it is ready (see Spec.Ready and
// Spec.ReadyOutput); ctx bounds that wait only, not the process. If the
// process exits first, does not become ready in time or ctx ends, Start
// kills it and returns an error. Start fails while the process runs.
func (p *Proc) Start(ctx context.Context) error {
	s := p.spec
	if s.Ready != "" && s.AddrEnv == "" {
		return fmt.Errorf("procs: %s: Ready needs AddrEnv", s.Name)
	}
	if s.ReadyOutput != "" && s.LogPath != "" {
		return fmt.Errorf("procs: %s: ReadyOutput needs the output in memory, not LogPath", s.Name)
	}
	p.mu.Lock()
	if p.runningLocked() {
		p.mu.Unlock()
		return fmt.Errorf("procs: %s is already running", s.Name)
	}
	env := append(os.Environ(), s.Env...)
	var addr string
	if s.AddrEnv != "" {
		var err error
		if addr, err = FreeAddr(); err != nil {
			p.mu.Unlock()
			return fmt.Errorf("procs: %s: %w", s.Name, err)
		}
		env = append(env, s.AddrEnv+"="+addr)
	}
	var out io.Writer = &p.out
	var logf *os.File
	if s.LogPath != "" {
		var err error
		if logf, err = os.OpenFile(s.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
			p.mu.Unlock()
			return fmt.Errorf("procs: %s: %w", s.Name, err)
		}
		fmt.Fprintf(logf, "=== %s start %d\n", time.Now().Format(time.RFC3339Nano), p.starts+1)
		out = logf
	}
	cmd := exec.Command(s.Path, s.Args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = out, out
	// A grandchild holding the output pipe must not keep Wait waiting.
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		if logf != nil {
			logf.Close()
		}
		p.mu.Unlock()
		return fmt.Errorf("procs: start %s: %w", s.Name, err)
	}
	done := make(chan struct{})
	p.cmd, p.addr, p.done, p.err, p.caused = cmd, addr, done, nil, false
	p.starts++
	p.mu.Unlock()

	go func() {
		err := cmd.Wait()
		if logf != nil {
			logf.Close()
		}
		p.mu.Lock()
		p.err = err
		if !p.caused {
			p.crashes = append(p.crashes, fmt.Sprintf("%s exited on its own: %v%s", s.Name, err, p.logRef()))
		}
		p.mu.Unlock()
		close(done)
	}()

	if err := p.waitReady(ctx, addr, done); err != nil {
		_ = p.Kill()
		return err
	}
	return nil
}

// waitReady waits until the process of this start is ready.
func (p *Proc) waitReady(ctx context.Context, addr string, done <-chan struct{}) error {
	s := p.spec
	if s.Ready == "" && s.ReadyOutput == "" {
		return nil
	}
	timeout := s.ReadyTimeout
	if timeout <= 0 {
		timeout = DefaultReadyTimeout
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	url := "http://" + addr + s.Ready
	for {
		if p.ready(ctx, url) {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("procs: %s exited before it was ready (%v)%s", s.Name, p.Err(), p.logRef())
		case <-ctx.Done():
			return fmt.Errorf("procs: %s not ready: %w%s", s.Name, ctx.Err(), p.logRef())
		case <-deadline.C:
			what := s.ReadyOutput
			if s.Ready != "" {
				what = url
			}
			return fmt.Errorf("procs: %s not ready within %s (waiting for %s)%s", s.Name, timeout, what, p.logRef())
		case <-tick.C:
		}
	}
}

// ready reports whether the readiness conditions hold now.
func (p *Proc) ready(ctx context.Context, url string) bool {
	if p.spec.ReadyOutput != "" && !bytes.Contains(p.out.Bytes(), []byte(p.spec.ReadyOutput)) {
		return false
	}
	if p.spec.Ready == "" {
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// logRef names the log file for error messages, if there is one.
func (p *Proc) logRef() string {
	if p.spec.LogPath == "" {
		return ""
	}
	return " (log " + p.spec.LogPath + ")"
}

// Kill sends SIGKILL and waits until the process has exited. It fails if
// the process is not running.
func (p *Proc) Kill() error {
	p.mu.Lock()
	if !p.runningLocked() {
		p.mu.Unlock()
		return fmt.Errorf("procs: %s is not running", p.spec.Name)
	}
	cmd, done := p.cmd, p.done
	p.caused = true
	p.mu.Unlock()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("procs: kill %s: %w", p.spec.Name, err)
	}
	<-done
	return nil
}

// Stop sends SIGTERM and waits up to timeout for the process to exit, then
// sends SIGKILL and waits. It returns the exit code (-1 for a death by
// signal) and how long the process took to exit after SIGTERM, and an error
// when it had to be killed. A process that is not running is left alone:
// Stop returns ExitCode and no error.
func (p *Proc) Stop(timeout time.Duration) (code int, took time.Duration, err error) {
	p.mu.Lock()
	if !p.runningLocked() {
		p.mu.Unlock()
		return p.ExitCode(), 0, nil
	}
	cmd, done := p.cmd, p.done
	p.caused = true
	p.mu.Unlock()
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return -1, 0, fmt.Errorf("procs: SIGTERM %s: %w", p.spec.Name, err)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-done
		err = fmt.Errorf("procs: %s did not exit within %s of SIGTERM; killed it", p.spec.Name, timeout)
	}
	return p.ExitCode(), time.Since(start), err
}

// runningLocked reports whether the last start's process runs; p.mu held.
func (p *Proc) runningLocked() bool {
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Running reports whether the process runs.
func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.runningLocked()
}

// closed is the Done channel of a Proc never started.
var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Done returns a channel closed when the process of the last start has
// exited (already closed if it never started).
func (p *Proc) Done() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil {
		return closed
	}
	return p.done
}

// ExitCode returns the exit code of the last start's process once it has
// exited: -1 if a signal ended it, or if it runs or never started.
func (p *Proc) ExitCode() int {
	p.mu.Lock()
	cmd, running := p.cmd, p.runningLocked()
	p.mu.Unlock()
	if cmd == nil || running {
		return -1
	}
	return cmd.ProcessState.ExitCode()
}

// Err returns what waiting for the last start's process returned once it
// has exited (nil after exit status 0, an *exec.ExitError otherwise), and
// nil before.
func (p *Proc) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Pid returns the process id of the last start (0 before the first).
func (p *Proc) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Addr returns the address passed through Spec.AddrEnv to the last start
// ("" without AddrEnv).
func (p *Proc) Addr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.addr
}

// Crashes describes the exits that neither Kill nor Stop caused, over every
// start, oldest first.
func (p *Proc) Crashes() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.crashes...)
}

// Output returns everything the process wrote to stdout and stderr, over
// every start, when the output is kept in memory ("" with Spec.LogPath).
func (p *Proc) Output() string {
	return string(p.out.Bytes())
}

// Tail returns the last n bytes of the output: of the log file with
// Spec.LogPath, of Output otherwise.
func (p *Proc) Tail(n int) string {
	if p.spec.LogPath == "" {
		b := p.out.Bytes()
		return string(b[max(0, len(b)-n):])
	}
	f, err := os.Open(p.spec.LogPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > int64(n) {
		_, _ = f.Seek(st.Size()-int64(n), io.SeekStart)
	}
	b, _ := io.ReadAll(io.LimitReader(f, int64(n)))
	return string(b)
}

// syncBuffer is output kept in memory, written by the process's pipes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(b)
}

// Bytes returns a copy of the output so far.
func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}

// Run starts the program of spec, waits until it exits or ctx ends (then
// kills it), and returns its exit code and output (spec.LogPath empty: the
// output is kept in memory). The error is for a program that cannot be
// started, or a ctx that ended first.
func Run(ctx context.Context, spec Spec) (code int, output string, err error) {
	p := New(spec)
	if err := p.Start(ctx); err != nil {
		return -1, p.Output(), err
	}
	select {
	case <-p.Done():
	case <-ctx.Done():
		_ = p.Kill()
		return p.ExitCode(), p.Output(), ctx.Err()
	}
	return p.ExitCode(), p.Output(), nil
}
