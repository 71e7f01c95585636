package obs

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// ShutdownSignals are the signals that ask a process to stop gracefully.
var ShutdownSignals = []os.Signal{syscall.SIGTERM, os.Interrupt}

// SignalContext returns a context cancelled on the first SIGTERM or SIGINT.
// A second signal is left to the default handler (the process dies) once
// stop has been called; call stop as soon as shutdown begins.
func SignalContext(parent context.Context) (ctx context.Context, stop context.CancelFunc) {
	return signal.NotifyContext(parent, ShutdownSignals...)
}
