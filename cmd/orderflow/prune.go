package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/orderflow/orderflow/config"
	"github.com/orderflow/orderflow/message"
	"github.com/orderflow/orderflow/store"
)

// pruneFloor is the shortest retention window prune accepts without
// -force.
const pruneFloor = 24 * time.Hour

// runPrune is `orderflow prune -older-than DURATION [-yes]`: the
// order_events rows and dead letters of orders terminal for longer than the
// window go, and so do the received sequence numbers of producers silent
// for longer (store.Store.Prune); orders rows and the ledger stay. A dead
// letter belongs to the order its body names, as message.BodyOrderID reads
// it. Without -yes it is a dry run: it counts what would go and removes
// nothing.
func runPrune(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		cfg              config.Config
		o                store.PruneOptions
		olderThan        string
		asJS, yes, force bool
		dryRun           bool
	)
	s := config.NewSet("prune", "Usage: orderflow prune -older-than DURATION [-yes] [flags]   (remove the details of long-finished orders; "+
		"without -yes only count them)", stderr)
	cfg.RegisterDatabase(s)
	p := func(flag, usage string) config.Setting { return config.Own("ORDERFLOW_PRUNE_", flag, usage) }
	// The consents are flags only: a variable set once would give them to every later run.
	consent := func(flag, usage string) config.Setting {
		return config.Setting{Flag: flag, Usage: usage + " (a flag only, no variable sets it)"}
	}
	s.String(&olderThan, "", p("older-than", fmt.Sprintf("retention window (required, at least %dh unless -force): orders COMPLETED or CANCELLED "+
		"for longer lose their order_events rows and dead letters, and producers silent for longer their received sequence numbers (720h, 30d)", int(pruneFloor.Hours()))))
	s.Bool(&yes, false, consent("yes", "remove: without it prune is a dry run that only counts what would be removed"))
	s.Bool(&force, false, consent("force", fmt.Sprintf("accept an -older-than shorter than %dh", int(pruneFloor.Hours()))))
	s.Bool(&o.IncludeUnreplayed, false, consent("include-unreplayed", "also remove the dead letters of such orders that were never replayed (by default they stay)"))
	s.Bool(&dryRun, false, p("dry-run", "only count what would be removed (the default; refused with -yes)"))
	s.Int(&o.Batch, 1000, p("batch", "rows deleted per statement (each its own short transaction)"))
	s.Duration(&o.Pause, 0, p("pause", "pause between statements, to leave the database to the hot path"))
	s.Bool(&asJS, false, p("json", "print JSON for scripts"))
	if err := parse(s, args); err != nil {
		return err
	}
	if err := checkPruneFlags(&o, olderThan, yes, force, dryRun); err != nil {
		return err
	}
	o.BodyOrderID = message.BodyOrderID
	db, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	last := time.Now()
	st, err := db.Prune(ctx, o, func(p store.PruneStats) {
		if time.Since(last) >= 5*time.Second {
			last = time.Now()
			fmt.Fprintf(stderr, "prune: %d orders, %d order_events rows, %d dead letters, %d producers so far\n", p.Orders, p.Events, p.DeadLetters, p.Producers)
		}
	})
	if err != nil {
		return pruneStopped(err, st)
	}
	if asJS {
		return writeJSON(stdout, st)
	}
	printPrune(stdout, o, st)
	return nil
}

// checkPruneFlags reads the window into o and checks the flags together.
func checkPruneFlags(o *store.PruneOptions, olderThan string, yes, force, dryRun bool) error {
	if olderThan == "" {
		return fmt.Errorf("%w: -older-than is required (for example -older-than 30d)", errUsage)
	}
	var err error
	if o.OlderThan, err = parseWindow(olderThan); err != nil {
		return err
	}
	if o.OlderThan < pruneFloor && !force {
		return fmt.Errorf("%w: -older-than %s is shorter than the floor of %dh: pass -force to prune orders finished so recently",
			errUsage, olderThan, int(pruneFloor.Hours()))
	}
	if o.Batch < 1 {
		return fmt.Errorf("%w: -batch %d must be at least 1", errUsage, o.Batch)
	}
	if yes && dryRun {
		return fmt.Errorf("%w: -yes and -dry-run contradict each other", errUsage)
	}
	o.DryRun = !yes
	return nil
}

// pruneStopped is the error of a prune that stopped early (interrupted, or
// a failed statement), with what it had removed by then.
func pruneStopped(err error, st store.PruneStats) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("interrupted: %w", err)
	}
	if st.DryRun {
		return fmt.Errorf("%w (dry run, nothing removed; counted so far: %d orders, %d order_events rows, %d dead letters, %d producers)",
			err, st.Orders, st.Events, st.DeadLetters, st.Producers)
	}
	return fmt.Errorf("%w (removed so far: %d orders, %d order_events rows, %d dead letters, %d producers; a new run goes on with the rest)",
		err, st.Orders, st.Events, st.DeadLetters, st.Producers)
}

// printPrune says what a prune removed, or in a dry run would remove.
func printPrune(w io.Writer, o store.PruneOptions, st store.PruneStats) {
	kept := ""
	if st.KeptUnreplayed > 0 {
		kept = fmt.Sprintf("; %d dead letters of these orders were never replayed and stay (-include-unreplayed removes them)", st.KeptUnreplayed)
	}
	if st.DryRun {
		fmt.Fprintf(w, "dry run: orders COMPLETED or CANCELLED and unchanged since before %s: %d orders would lose %d order_events rows and %d dead letters%s; "+
			"%d producers silent since then would be retired (%d rows of received sequence numbers); "+
			"every orders row and points_ledger row stays; nothing was removed: add -yes to remove them\n",
			stamp(st.Cutoff), st.Orders, st.Events, st.DeadLetters, kept, st.Producers, st.SequenceRanges)
		return
	}
	fmt.Fprintf(w, "pruned orders COMPLETED or CANCELLED and unchanged since before %s: %d orders lost %d order_events rows and %d dead letters, "+
		"in %d statements of at most %d rows%s; %d producers silent since then retired (%d rows of received sequence numbers); "+
		"every orders row and points_ledger row stays\n",
		stamp(st.Cutoff), st.Orders, st.Events, st.DeadLetters, st.Statements, o.Batch, kept, st.Producers, st.SequenceRanges)
}

// parseWindow reads a retention window: a Go duration (720h) or a number
// of days (30d).
func parseWindow(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if days, ok := strings.CutSuffix(s, "d"); ok && err != nil {
		n, nerr := strconv.ParseFloat(days, 64)
		// Past the range of a Duration (about 106,751 days; NaN and Inf
		// too) the conversion is not defined: refused.
		if ns := n * 24 * float64(time.Hour); nerr == nil && !(math.Abs(ns) < math.MaxInt64) {
			nerr = fmt.Errorf("%s days is out of range", days)
		}
		d, err = time.Duration(n*24*float64(time.Hour)), nerr
	}
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%w: -older-than %q is not a positive duration such as 720h or 30d", errUsage, s)
	}
	return d, nil
}
