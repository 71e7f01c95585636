package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/gofrs/flock"
)

// lockBench takes the benchmark's lock, so that two runs on one machine
// (from any clone), which would share its cores and the engines' ports,
// folders and databases, go one after the other. The returned function
// releases it.
func lockBench(ctx context.Context, out io.Writer) (func(), error) {
	return lockWaiting(ctx, filepath.Join(os.TempDir(), "orderflow-bench.lock"), out)
}

// lockWaiting takes an exclusive lock on the file path, saying on out when
// it waits for another holder, until ctx ends.
func lockWaiting(ctx context.Context, path string, out io.Writer) (func(), error) {
	l := flock.New(path)
	ok, err := l.TryLock()
	if err == nil && !ok {
		fmt.Fprintf(out, "orderflow bench: another benchmark run holds %s; waiting for it to end\n", path)
		ok, err = l.TryLockContext(ctx, time.Second)
	}
	if !ok {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { _ = l.Close() }, nil
}
