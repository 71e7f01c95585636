package main

import (
	"testing"
	"time"

	"github.com/orderflow/orderflow/internal/obs"
)

// waitStatus polls url until it answers want, for up to three check
// intervals (the readiness checks run in the background), and returns the
// last status.
func waitStatus(t *testing.T, url string, want int) int {
	t.Helper()
	deadline := time.Now().Add(3 * obs.DefaultCheckInterval)
	for {
		s := httpStatus(t, url)
		if s == want || time.Now().After(deadline) {
			return s
		}
		time.Sleep(100 * time.Millisecond)
	}
}
