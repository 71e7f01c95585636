package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/orderflow/orderflow/config"
	"github.com/orderflow/orderflow/store"
)

// runPrune is `orderflow prune --older-than DURATION [--dry-run]`: the
// order_events rows and dead letters of orders terminal for longer than the
// window go (store.Store.Prune); orders rows and the ledger stay.
func runPrune(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		cfg       config.Config
		o         store.PruneOptions
		olderThan string
		asJS      bool
	)
	s := config.NewSet("prune", "Usage: orderflow prune -older-than DURATION [flags]   (remove the details of long-finished orders)", stderr)
	cfg.RegisterDatabase(s)
	p := func(flag, usage string) config.Setting { return config.Own("ORDERFLOW_PRUNE_", flag, usage) }
	s.String(&olderThan, "", p("older-than", "retention window (required): orders COMPLETED or CANCELLED for longer lose their order_events rows and dead letters (720h, 30d)"))
	s.Bool(&o.DryRun, false, p("dry-run", "only count what would be removed"))
	s.Int(&o.Batch, 1000, p("batch", "rows deleted per statement (each its own short transaction)"))
	s.Duration(&o.Pause, 0, p("pause", "pause between statements, to leave the database to the hot path"))
	s.Bool(&asJS, false, p("json", "print JSON for scripts"))
	if err := parse(s, args); err != nil {
		return err
	}
	if olderThan == "" {
		return fmt.Errorf("%w: -older-than is required (for example -older-than 30d)", errUsage)
	}
	var err error
	if o.OlderThan, err = parseWindow(olderThan); err != nil {
		return err
	}
	if o.Batch < 1 {
		return fmt.Errorf("%w: -batch %d must be at least 1", errUsage, o.Batch)
	}
	db, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	last := time.Now()
	st, err := db.Prune(ctx, o, func(p store.PruneStats) {
		if time.Since(last) >= 5*time.Second {
			last = time.Now()
			fmt.Fprintf(stderr, "prune: %d orders, %d order_events rows, %d dead letters so far\n", p.Orders, p.Events, p.DeadLetters)
		}
	})
	if err != nil {
		return fmt.Errorf("%w (removed so far: %d order_events rows, %d dead letters)", err, st.Events, st.DeadLetters)
	}
	if asJS {
		return writeJSON(stdout, st)
	}
	if o.DryRun {
		fmt.Fprintf(stdout, "dry run: orders COMPLETED or CANCELLED and unchanged since before %s: %d orders would lose %d order_events rows and %d dead letters; every orders row and points_ledger row stays\n",
			stamp(st.Cutoff), st.Orders, st.Events, st.DeadLetters)
		return nil
	}
	fmt.Fprintf(stdout, "pruned orders COMPLETED or CANCELLED and unchanged since before %s: %d orders lost %d order_events rows and %d dead letters, in %d statements of at most %d rows; every orders row and points_ledger row stays\n",
		stamp(st.Cutoff), st.Orders, st.Events, st.DeadLetters, st.Statements, o.Batch)
	return nil
}

// parseWindow reads a retention window: a Go duration (720h) or a number
// of days (30d).
func parseWindow(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if days, ok := strings.CutSuffix(s, "d"); ok && err != nil {
		n, nerr := strconv.ParseFloat(days, 64)
		d, err = time.Duration(n*24*float64(time.Hour)), nerr
	}
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%w: -older-than %q is not a positive duration such as 720h or 30d", errUsage, s)
	}
	return d, nil
}
