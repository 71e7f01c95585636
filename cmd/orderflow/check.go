package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/orderflow/orderflow/check"
	"github.com/orderflow/orderflow/config"
	"github.com/orderflow/orderflow/scenario"
)

// runCheck reads a scenario's expected-state file, waits until the database
// settles, prints the summary and each invariant's verdict, and fails if an
// invariant does not hold.
func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		cfg                    config.Config
		expPath, jsonOut       string
		wait, interval, settle time.Duration
	)
	s := config.NewSet("check", "Usage: orderflow check [flags]   (check the invariants of a published scenario)", stderr)
	cfg.RegisterDatabase(s)
	c := func(flag, usage string) config.Setting { return config.Own("ORDERFLOW_CHECK_", flag, usage) }
	s.String(&expPath, "expected.json", c("expected", "expected-state file written by orderflow publish"))
	s.Duration(&wait, 2*time.Minute, c("wait", "how long to wait for the run to settle"))
	s.Duration(&interval, time.Second, c("interval", "pause between two looks at the database"))
	s.Duration(&settle, 3*time.Second, c("settle", "how long the invariants must keep holding"))
	s.String(&jsonOut, "", c("json", "also write the report as JSON to this file"))
	if err := parse(s, args); err != nil {
		return err
	}
	exp, err := scenario.ReadFile(expPath)
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	db, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()

	keys := len(exp.PublishedKeys())
	phase := "first phase"
	if exp.Published(2) {
		phase = "both phases"
	}
	fmt.Fprintf(stdout, "checking run %s (%s published): %d orders, %d business keys, %d bad messages, %d conflicts (waiting up to %s to settle)\n",
		exp.Prefix, phase, len(exp.Orders), keys, len(exp.Bad), countConflicts(exp), wait)
	began := time.Now()
	last := time.Now()
	r, err := check.WaitSettled(ctx, db.DB(), exp, check.WaitOptions{Wait: wait, Interval: interval, Settle: settle,
		Progress: func(r *check.Report) {
			if time.Since(last) >= 10*time.Second {
				last = time.Now()
				n := 0
				for _, c := range r.EventsByOutcome {
					n += c
				}
				fmt.Fprintf(stdout, "  ... %s: %d of %d business keys recorded, %d invariant(s) not yet holding\n",
					time.Since(began).Round(time.Second), n, keys, len(r.Failed()))
			}
		}})
	if r == nil {
		return err
	}
	if err == nil {
		fmt.Fprintf(stdout, "settled after %s\n", time.Since(began).Round(100*time.Millisecond))
	} else {
		fmt.Fprintf(stdout, "not settled after %s\n", time.Since(began).Round(100*time.Millisecond))
	}
	r.Write(stdout)
	if id, why := check.ExampleOrder(exp); id != "" {
		fmt.Fprintf(stdout, "example order: %s (%s)\n", id, why)
	}
	if jsonOut != "" {
		data, jerr := json.MarshalIndent(r, "", "  ")
		if jerr == nil {
			jerr = os.WriteFile(jsonOut, append(data, '\n'), 0o644)
		}
		if jerr != nil && err == nil {
			err = fmt.Errorf("write %s: %w", jsonOut, jerr)
		}
	}
	return err
}

// countConflicts counts the conflicting copies of the phases published.
func countConflicts(exp *scenario.Expected) int {
	n := 0
	for _, c := range exp.Conflicts {
		if exp.Published(c.Phase) {
			n++
		}
	}
	return n
}
