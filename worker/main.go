// Command worker runs orderflow's Temporal worker: it checks that the
// database's schema is the one it was built for (it never migrates: run
// `orderflow migrate` first; a schema of another version stops it at
// start), then polls the task queue for OrderWorkflow and its activities,
// serving Prometheus metrics, /healthz and /readyz until SIGTERM or SIGINT,
// when it stops gracefully, letting running activities finish.
//
// Configuration comes from the environment (see package config) and flags;
// run "worker -h" for the list.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/orderflow/orderflow/internal/obs"
)

func main() {
	ctx, stop := obs.SignalContext(context.Background())
	defer stop()
	err := run(ctx, stop, os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}
