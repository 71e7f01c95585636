package testenv

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

func TestExclusiveTemporalWaitsForHolders(t *testing.T) {
	// Private lock files: the machine-wide ones are held by every other test
	// process that uses Temporal meanwhile (go test runs packages in
	// parallel), which would make the restart below wait for them.
	dir := t.TempDir()
	gate, use := temporalGatePath, temporalUsePath
	temporalGatePath, temporalUsePath = filepath.Join(dir, "gate"), filepath.Join(dir, "use")
	t.Cleanup(func() { temporalGatePath, temporalUsePath = gate, use })

	t.Run("holder", func(t *testing.T) {
		holdTemporal(t)
		holdTemporal(t) // a second hold in the same process shares the lock
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		if release, err := ExclusiveTemporal(ctx); err == nil {
			release()
			t.Fatal("ExclusiveTemporal succeeded while a test holds Temporal")
		}
	})
	// The holder ended: the restart may go ahead, and holders wait for it.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	release, err := ExclusiveTemporal(ctx)
	if err != nil {
		t.Fatalf("ExclusiveTemporal after the holder ended: %v", err)
	}
	held := make(chan struct{})
	go func() {
		t.Run("waiting holder", func(t *testing.T) { holdTemporal(t) })
		close(held)
	}()
	select {
	case <-held:
		t.Fatal("a test took Temporal during a restart")
	case <-time.After(300 * time.Millisecond):
	}
	release()
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting test never got Temporal after the restart")
	}
}
