package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The Temporal server is shared by every test process on the machine, and
// the end-to-end test restarts it. Two advisory file locks keep a restart
// from pulling the server away from a running test: every test that uses
// Temporal through RequireTemporal holds the use lock shared for its
// duration; a restart takes the gate (so that no new test starts using
// Temporal), then the use lock exclusively (so that the running ones finish
// first). Tests only pass through the gate, briefly.
var (
	temporalGatePath = filepath.Join(os.TempDir(), "orderflow-temporal.gate")
	temporalUsePath  = filepath.Join(os.TempDir(), "orderflow-temporal.use")
)

func lockFile(path string, how int) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), how)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

var temporalHold struct {
	mu   sync.Mutex
	n    int
	file *os.File
}

// holdTemporal keeps the Temporal server from being restarted by
// ExclusiveTemporal until the test ends. The process holds one shared lock
// while any of its tests does, so a test whose subtests also hold the server
// never waits at the gate for a restart that waits for the test.
func holdTemporal(t testing.TB) {
	t.Helper()
	h := &temporalHold
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == 0 {
		gate, err := lockFile(temporalGatePath, syscall.LOCK_EX)
		if err != nil {
			t.Fatalf("testenv: lock %s: %v", temporalGatePath, err)
		}
		use, err := lockFile(temporalUsePath, syscall.LOCK_SH)
		gate.Close()
		if err != nil {
			t.Fatalf("testenv: lock %s: %v", temporalUsePath, err)
		}
		h.file = use
	}
	h.n++
	t.Cleanup(func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.n--; h.n == 0 {
			h.file.Close()
			h.file = nil
		}
	})
}

// ExclusiveTemporal waits until no other test uses the Temporal server
// (through RequireTemporal) and keeps new ones from starting, so that the
// caller may restart the server; call the returned function once it is back.
// It gives up when ctx ends. The caller must not itself hold the server
// through RequireTemporal.
func ExclusiveTemporal(ctx context.Context) (release func(), err error) {
	gate, err := lockFile(temporalGatePath, syscall.LOCK_EX)
	if err != nil {
		return nil, fmt.Errorf("testenv: lock %s: %w", temporalGatePath, err)
	}
	use, err := os.OpenFile(temporalUsePath, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		gate.Close()
		return nil, fmt.Errorf("testenv: lock %s: %w", temporalUsePath, err)
	}
	for {
		err := syscall.Flock(int(use.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { use.Close(); gate.Close() }, nil
		}
		if err != syscall.EWOULDBLOCK && err != syscall.EINTR {
			use.Close()
			gate.Close()
			return nil, fmt.Errorf("testenv: lock %s: %w", temporalUsePath, err)
		}
		select {
		case <-ctx.Done():
			use.Close()
			gate.Close()
			return nil, fmt.Errorf("testenv: other tests kept using Temporal: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
