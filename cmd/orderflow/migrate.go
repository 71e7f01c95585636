package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"

	"github.com/orderflow/orderflow/config"
	"github.com/orderflow/orderflow/migrations"
	"github.com/orderflow/orderflow/store"
)

// migratePing is how often migrate tries an unreachable database again.
const migratePing = 2 * time.Second

// runMigrate is `orderflow migrate`: wait until PostgreSQL answers, apply
// the pending schema migrations, print the schema version and exit. It is
// the only command that changes the schema, run by the database's owner
// (the Helm chart's migration Job, compose's migrate service) before the
// worker and the bridge start: they, and every other command, refuse a
// schema of another version.
func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		cfg     config.Config
		timeout time.Duration
		downTo  int
		yes     bool
	)
	s := config.NewSet("migrate", "Usage: orderflow migrate [flags]   (apply the pending schema migrations, then exit; "+
		"-down-to N -yes: undo expand steps for a rollback)", stderr)
	cfg.RegisterDatabase(s)
	s.Duration(&timeout, 5*time.Minute, config.Own("ORDERFLOW_MIGRATE_", "timeout",
		"how long to wait for PostgreSQL to answer and for another process's migration to finish"))
	s.Int(&downTo, -1, config.Setting{Flag: "down-to", Usage: "undo the expand steps above this schema version instead, for a rollback to a release " +
		"that predates the schema window (version 8); refused across a contract step (a flag only, no variable sets it)"})
	s.Bool(&yes, false, consentFlag("yes", "with -down-to, undo: without it -down-to only lists what it would undo"))
	if err := parse(s, args); err != nil {
		return err
	}
	if timeout <= 0 {
		return fmt.Errorf("%w: -timeout must be positive, got %s", errUsage, timeout)
	}
	if yes && downTo < 0 {
		return fmt.Errorf("%w: -yes only goes with -down-to", errUsage)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	where := config.Redact(cfg.DatabaseURL)
	db, err := sql.Open("pgx", cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("PostgreSQL at %s: %w", where, redactErr(err, cfg.DatabaseURL))
	}
	defer db.Close()
	db.SetMaxOpenConns(2)
	for {
		err := db.PingContext(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("PostgreSQL at %s did not answer within %s: %w", where, timeout, redactErr(err, cfg.DatabaseURL))
		}
		fmt.Fprintf(stderr, "waiting for PostgreSQL at %s: %v\n", where, redactErr(err, cfg.DatabaseURL))
		select {
		case <-ctx.Done():
		case <-time.After(migratePing):
		}
	}
	// Through a transaction pooler, named statements do not hold: OpenDB
	// finds out and sends queries through the unnamed statement.
	_ = db.Close()
	if db, _, err = store.OpenDB(ctx, cfg.DatabaseURL, nil); err != nil {
		return fmt.Errorf("PostgreSQL at %s: %w", where, redactErr(err, cfg.DatabaseURL))
	}
	defer db.Close()
	db.SetMaxOpenConns(2)
	if downTo >= 0 {
		return revert(ctx, db, int64(downTo), !yes, where, stdout)
	}
	res, err := migrations.Apply(ctx, db)
	if err != nil {
		return fmt.Errorf("migrate PostgreSQL at %s%s: %w", where, privilegeHint(err), redactErr(err, cfg.DatabaseURL))
	}
	if len(res.Applied) == 0 {
		fmt.Fprintf(stdout, "schema is current at version %d\n", res.Version)
		return nil
	}
	fmt.Fprintf(stdout, "applied %s; schema at version %d\n", strings.Join(res.Applied, ", "), res.Version)
	return nil
}

// revert undoes the expand steps above version to (a dry run with dryRun)
// and says what it undid.
func revert(ctx context.Context, db *sql.DB, to int64, dryRun bool, where string, stdout io.Writer) error {
	res, err := migrations.Revert(ctx, db, to, dryRun)
	if err != nil {
		return fmt.Errorf("migrate PostgreSQL at %s down to %d%s: %w", where, to, privilegeHint(err), err)
	}
	switch {
	case len(res.Applied) == 0:
		fmt.Fprintf(stdout, "nothing to undo: schema at version %d\n", res.Version)
	case dryRun:
		fmt.Fprintf(stdout, "would undo %s; schema at version %d (-yes to undo)\n", strings.Join(res.Applied, ", "), res.Version)
	default:
		fmt.Fprintf(stdout, "undid %s; schema at version %d\n", strings.Join(res.Applied, ", "), res.Version)
	}
	return nil
}

// privilegeHint explains a refusal for want of privilege (SQLSTATE 42501):
// migrate ran as a role that may not change the schema.
func privilegeHint(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42501" {
		return " (this role may not change the schema: run orderflow migrate as the database's owner; the worker and the bridge use a role with data rights only)"
	}
	return ""
}

// redactErr replaces the database URL, should an error quote it, by its
// redacted form.
func redactErr(err error, url string) error {
	if err == nil || url == "" || !strings.Contains(err.Error(), url) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), url, config.Redact(url)))
}
