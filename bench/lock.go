package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// holdTemporal takes the shared "use" lock that the tests take (package
// testenv), so that the end-to-end test does not restart the Temporal dev
// server in the middle of a benchmark. It passes through the gate lock
// briefly, as the tests do. The returned function releases the lock.
func holdTemporal() (func(), error) {
	gate, err := flock(filepath.Join(os.TempDir(), "orderflow-temporal.gate"), syscall.LOCK_EX)
	if err != nil {
		return nil, err
	}
	use, err := flock(filepath.Join(os.TempDir(), "orderflow-temporal.use"), syscall.LOCK_SH)
	gate.Close()
	if err != nil {
		return nil, err
	}
	return func() { use.Close() }, nil
}

func flock(path string, how int) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), how)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return f, nil
}
