// Command starter is orderflow's bridge from RocketMQ to Temporal.
//
// It consumes the ORDER_EVENTS topic and, for each message, either delivers
// the event to its order's workflow with SignalWithStart or parks the
// invalid message in dead_letters; it acks a message only once that is
// durable. Run `starter -h` for its settings, each a flag and an
// environment variable. The operator command (publish, check, ...) is
// cmd/orderflow.
package main

import (
	"context"
	"io"
	"os"

	"github.com/orderflow/orderflow/internal/obs"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run runs the bridge and returns the process exit code.
func run(args []string, _, stderr io.Writer) int {
	ctx, stop := obs.SignalContext(context.Background())
	defer stop()
	return runBridge(ctx, stop, args, stderr)
}
