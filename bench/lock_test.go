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
	if err != nil {
		t.Fatal(err)
	}
	if out.Len() != 0 {
		t.Errorf("a free lock printed %q", out.String())
	}
	// Held: a second taker says so and gives up when its context ends.
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	var out2 bytes.Buffer
	if _, err := lockWaiting(ctx, path, &out2); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("second taker while held: %v, want the context's deadline", err)
	}
	if !strings.Contains(out2.String(), "waiting") {
		t.Errorf("second taker printed %q, want a note that it waits", out2.String())
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
