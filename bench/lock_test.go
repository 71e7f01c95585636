package main

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLockWaitingSerializes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bench.lock")
	var out bytes.Buffer
	unlock, err := lockWaiting(context.Background(), path, &out)
	if err != nil || out.Len() != 0 {
		t.Fatalf("a free lock: %v, printed %q", err, out.String())
	}
	// Held: a second taker says it waits and gives up when its context ends.
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	if _, err := lockWaiting(ctx, path, &out); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(out.String(), "waiting") {
		t.Errorf("second taker while held: %v, printed %q; want the context's deadline and a note that it waits", err, out.String())
	}
	// Released within its wait: a third taker gets it.
	go func() { time.Sleep(500 * time.Millisecond); unlock() }()
	ctx3, cancel3 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel3()
	unlock3, err := lockWaiting(ctx3, path, &bytes.Buffer{})
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	unlock3()
}
