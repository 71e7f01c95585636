// Command starter is orderflow's bridge from RocketMQ to Temporal, and the
// home of the tools that drive it.
//
//	starter [flags]            run the bridge (the default)
//	starter publish [flags]    publish a scenario of order events
//	starter check [flags]      check the invariants of DESIGN.md on the database
//
// The bridge consumes the ORDER_EVENTS topic and, for each message, either
// delivers the event to its order's workflow with SignalWithStart or parks the
// invalid message in dead_letters; it acks a message only once that is
// durable. Run `starter -h` for its flags; each also reads an environment
// variable.
package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/orderflow/orderflow/check"
	"github.com/orderflow/orderflow/internal/obs"
	"github.com/orderflow/orderflow/scenario"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches to a subcommand, or runs the bridge when args do not start
// with one, and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := obs.SignalContext(context.Background())
	defer stop()

	var sub func(ctx context.Context, args []string, stdout io.Writer) error
	if len(args) > 0 {
		switch args[0] {
		// Subcommands: each gets the arguments after its name.
		case "publish":
			sub = scenario.RunPublish
		case "check":
			sub = check.Run
		}
	}
	if sub != nil {
		if err := sub(ctx, args[1:], stdout); err != nil {
			fmt.Fprintf(stderr, "starter %s: %v\n", args[0], err)
			return 1
		}
		return 0
	}
	return runBridge(ctx, stop, args, stderr)
}
