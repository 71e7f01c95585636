package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// lockBench takes the benchmark's own lock, so that two runs on one machine
// (from any clone) go one after the other: they would share the machine's
// cores and the engines' ports, folders and databases. It says so on out when another run holds the lock, and waits
// until ctx ends. The returned function releases it.
func lockBench(ctx context.Context, out io.Writer) (func(), error) {
	return lockWaiting(ctx, filepath.Join(os.TempDir(), "orderflow-bench.lock"), out)
}

// lockWaiting takes an exclusive lock on the file path, polling while
// another holds it (a blocking flock would not end with ctx).
func lockWaiting(ctx context.Context, path string, out io.Writer) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	for waited := false; ; waited = true {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EWOULDBLOCK) && err != syscall.EINTR {
			break
		}
		if !waited {
			fmt.Fprintf(out, "orderflow bench: another benchmark run holds %s; waiting for it to end\n", path)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}
