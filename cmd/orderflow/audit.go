package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/orderflow/orderflow/config"
	"github.com/orderflow/orderflow/store"
)

// errFinding marks an audit that found violations (exit status 1).
var errFinding = errors.New("finding")

// runAudit checks the invariants on the live tables (store.Store.Audit) and
// fails listing every violation.
func runAudit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		cfg   config.Config
		f     store.AuditFilter
		since string
		asJS  bool
	)
	s := config.NewSet("audit", "Usage: orderflow audit [flags]   (check the invariants on the live tables)", stderr)
	cfg.RegisterDatabase(s)
	a := func(flag, usage string) config.Setting { return config.Own("ORDERFLOW_AUDIT_", flag, usage) }
	s.String(&since, "", a("since", "only orders updated since this RFC 3339 time or this long ago (24h)"))
	s.String(&f.OrderID, "", a("order", "only this order"))
	s.Duration(&f.Settle, time.Minute, a("settle", "skip orders updated less than this long ago (their ledger rows may be on their way)"))
	s.Int(&f.Batch, 1000, a("batch", "orders read per round"))
	s.Bool(&asJS, false, a("json", "print JSON for scripts"))
	if err := parse(s, args); err != nil {
		return err
	}
	var err error
	if f.Since, err = parseSince(since, time.Now()); err != nil {
		return err
	}
	db, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	var found []store.Violation
	stats, err := db.Audit(ctx, f, func(v store.Violation) { found = append(found, v) })
	if err != nil {
		return err
	}
	if asJS {
		if found == nil {
			found = []store.Violation{}
		}
		if err := writeJSON(stdout, struct {
			Stats      store.AuditStats  `json:"stats"`
			Violations []store.Violation `json:"violations"`
		}{stats, found}); err != nil {
			return err
		}
	} else {
		if len(found) > 0 {
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ORDER\tCHECK\tDETAIL")
			for _, v := range found {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", safe(v.OrderID), safe(v.Check), safe(v.Detail))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
		}
		fmt.Fprintf(stdout, "audited %d orders in %d rounds: %d violations\n", stats.Orders, stats.Batches, len(found))
	}
	if len(found) > 0 {
		return fmt.Errorf("%w: %d violations", errFinding, len(found))
	}
	return nil
}
