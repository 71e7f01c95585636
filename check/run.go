package check

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"

	"github.com/orderflow/orderflow/config"
	"github.com/orderflow/orderflow/scenario"
)

// ErrInvariantViolated is returned by Run and WaitSettled when an invariant
// does not hold.
var ErrInvariantViolated = errors.New("check: invariant violated")

// WaitOptions configures WaitSettled.
type WaitOptions struct {
	// Wait is how long to wait for the run to settle (every invariant
	// holding) before giving the verdict anyway.
	Wait time.Duration
	// Interval is the pause between two looks at the database.
	Interval time.Duration
	// Settle is how long the invariants must keep holding before the
	// verdict is given, so that a late redelivery cannot change it.
	Settle time.Duration
	// Progress, when set, is called with each intermediate report.
	Progress func(*Report)
}

// WaitSettled verifies the run until every invariant holds, twice Settle
// apart, or until Wait has passed, and returns the last report. Its error is
// ErrInvariantViolated (wrapped) when the run did not settle, or a database
// error.
func WaitSettled(ctx context.Context, db *sql.DB, exp *scenario.Expected, o WaitOptions) (*Report, error) {
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	deadline := time.Now().Add(o.Wait)
	var okSince time.Time
	for {
		r, err := Verify(ctx, db, exp)
		if err != nil {
			return nil, err
		}
		now := time.Now()
		if r.OK() {
			if okSince.IsZero() {
				okSince = now
			}
			if now.Sub(okSince) >= o.Settle {
				return r, nil
			}
		} else {
			okSince = time.Time{}
		}
		if o.Progress != nil {
			o.Progress(r)
		}
		if now.After(deadline) {
			if r.OK() {
				return r, nil
			}
			return r, fmt.Errorf("%w: %d of 5 invariants failed after waiting %s", ErrInvariantViolated, len(r.Failed()), o.Wait)
		}
		t := time.NewTimer(o.Interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return r, ctx.Err()
		case <-t.C:
		}
	}
}

// Run is the "check" command: it reads a scenario's expected-state file,
// waits until the database settles, prints the summary and each invariant's
// verdict, and returns an error wrapping ErrInvariantViolated if any failed.
func Run(ctx context.Context, args []string, stdout io.Writer) error {
	cfg := config.FromEnv()
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stdout)
	expPath := fs.String("expected", "expected.json", "expected-state file written by the publish command")
	dbURL := fs.String("database-url", cfg.DatabaseURL, "PostgreSQL connection URL (env DATABASE_URL)")
	wait := fs.Duration("wait", 2*time.Minute, "how long to wait for the run to settle")
	interval := fs.Duration("interval", time.Second, "pause between two looks at the database")
	settle := fs.Duration("settle", 3*time.Second, "how long the invariants must keep holding")
	jsonOut := fs.String("json", "", "also write the report as JSON to this file")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("check: %w", err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("check: unexpected arguments %q", fs.Args())
	}
	exp, err := scenario.ReadFile(*expPath)
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	db, err := sql.Open("pgx", *dbURL)
	if err != nil {
		return fmt.Errorf("check: open database: %w", err)
	}
	defer db.Close()
	db.SetMaxOpenConns(2)
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = db.PingContext(pctx)
	cancel()
	if err != nil {
		return fmt.Errorf("check: database unreachable (run `make up`): %w", err)
	}

	fmt.Fprintf(stdout, "checking run %s: %d orders, %d business keys, %d bad messages, %d conflicts (waiting up to %s to settle)\n",
		exp.Prefix, len(exp.Orders), len(exp.Keys), len(exp.Bad), len(exp.Conflicts), *wait)
	began := time.Now()
	last := time.Now()
	r, err := WaitSettled(ctx, db, exp, WaitOptions{Wait: *wait, Interval: *interval, Settle: *settle,
		Progress: func(r *Report) {
			if time.Since(last) >= 10*time.Second {
				last = time.Now()
				n := 0
				for _, c := range r.EventsByOutcome {
					n += c
				}
				fmt.Fprintf(stdout, "  ... %s: %d of %d business keys recorded, %d invariant(s) not yet holding\n",
					time.Since(began).Round(time.Second), n, len(exp.Keys), len(r.Failed()))
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
	if id, why := ExampleOrder(exp); id != "" {
		fmt.Fprintf(stdout, "example order: %s (%s)\n", id, why)
	}
	if *jsonOut != "" {
		data, jerr := json.MarshalIndent(r, "", "  ")
		if jerr == nil {
			jerr = os.WriteFile(*jsonOut, append(data, '\n'), 0o644)
		}
		if jerr != nil && err == nil {
			err = fmt.Errorf("check: write %s: %w", *jsonOut, jerr)
		}
	}
	return err
}

// ExampleOrder picks an order of the run worth inspecting in the Temporal UI
// and says why: one that received a conflicting event, else one cancelled
// after payment, else the first.
func ExampleOrder(exp *scenario.Expected) (id, why string) {
	if len(exp.Conflicts) > 0 {
		c := exp.Conflicts[0]
		return c.OrderID, fmt.Sprintf("version %d arrived twice with different content", c.Version)
	}
	for _, o := range exp.Orders {
		if o.RefundPossible {
			return o.OrderID, "cancelled after payment"
		}
	}
	if len(exp.Orders) > 0 {
		return exp.Orders[0].OrderID, "the first order of the run"
	}
	return "", ""
}
