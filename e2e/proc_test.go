package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// buildBinary builds the main package pkg (without -race: these are the
// programs under test, not test code) into dir and returns its path.
func buildBinary(t *testing.T, dir, pkg string) string {
	t.Helper()
	out := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Env = os.Environ()
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	return out
}

// freePort returns a TCP port on 127.0.0.1 that nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// proc is one program under test, run as a child process, which the test
// may SIGKILL and start again. Its output is appended to a log file.
type proc struct {
	t        *testing.T
	name     string
	path     string
	env      []string
	addrEnv  string // the variable naming its metrics listen address
	logPath  string
	mu       sync.Mutex
	cmd      *exec.Cmd
	port     int
	done     chan struct{}
	killed   bool // the last exit was caused by the test
	starts   int
	kills    int
	crashes  []string // exits the test did not cause
	stopping bool
}

func newProc(t *testing.T, name, path, addrEnv string, env []string) *proc {
	return &proc{t: t, name: name, path: path, env: env, addrEnv: addrEnv,
		logPath: filepath.Join(t.TempDir(), name+".log")}
}

// start runs the program and waits until its /healthz answers.
func (p *proc) start(ctx context.Context) error {
	p.mu.Lock()
	port := freePort(p.t)
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.mu.Unlock()
		return err
	}
	fmt.Fprintf(logf, "=== %s start %d\n", time.Now().Format(time.RFC3339Nano), p.starts+1)
	cmd := exec.Command(p.path)
	cmd.Env = append(append(os.Environ(), p.env...), p.addrEnv+"=127.0.0.1:"+strconv.Itoa(port))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		p.mu.Unlock()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	p.cmd, p.port, p.done, p.killed, p.stopping = cmd, port, done, false, false
	p.starts++
	p.mu.Unlock()

	go func() {
		err := cmd.Wait()
		logf.Close()
		p.mu.Lock()
		if !p.killed && !p.stopping {
			p.crashes = append(p.crashes, fmt.Sprintf("%s exited on its own: %v (log %s)", p.name, err, p.logPath))
		}
		p.mu.Unlock()
		close(done)
	}()

	url := fmt.Sprintf("http://127.0.0.1:%d/healthz", port)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return fmt.Errorf("%s exited during start-up (log %s)", p.name, p.logPath)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
	}
	return fmt.Errorf("%s: %s did not answer within 60s (log %s)", p.name, url, p.logPath)
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill() error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	if cmd == nil {
		p.mu.Unlock()
		return errors.New(p.name + " is not running")
	}
	p.killed = true
	p.kills++
	p.mu.Unlock()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill %s: %w", p.name, err)
	}
	<-done
	return nil
}

// running reports whether the process is up.
func (p *proc) running() bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM and waits up to 45s, then SIGKILL.
func (p *proc) stop() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.stopping = true
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(45 * time.Second):
		p.t.Logf("%s did not stop within 45s of SIGTERM; killing it", p.name)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-done
	}
}

// unexpectedExits returns the exits the test did not cause.
func (p *proc) unexpectedExits() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.crashes...)
}

// tail returns the last n bytes of the process's log.
func (p *proc) tail(n int64) string {
	f, err := os.Open(p.logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		_, _ = f.Seek(st.Size()-n, 0)
	}
	b := make([]byte, n)
	k, _ := f.Read(b)
	return string(b[:k])
}
