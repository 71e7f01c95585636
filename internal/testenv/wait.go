package testenv

import (
	"testing"
	"time"
)

// WaitFor calls f every 200 ms until it returns nil, and fails the test
// with f's last error when limit has passed.
func WaitFor(t testing.TB, limit time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %v: %v", limit, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
