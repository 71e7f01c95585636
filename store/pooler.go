package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// ExecModeParam is the connection URL parameter with which pgx is told how
// to send queries. When a URL sets it, OpenDB leaves the choice to it.
const ExecModeParam = "default_query_exec_mode"

// poolerMode is how queries are sent behind a transaction pooler: through
// the unnamed statement, with the statements' descriptions cached by the
// client (one round trip per query, as with named statements), so that no
// statement outlives the transaction the pooler lends a server connection
// for. pgx's default, named statements cached per connection, cannot cross
// a pooler that hands a client another server connection for each
// transaction (PgBouncer's pool_mode=transaction before 1.21, and managed
// poolers alike): a statement prepared on one is missing from the next,
// and one prepared by another client collides.
const poolerMode = pgx.QueryExecModeCacheDescribe

// poolerProbeWait bounds the probe's wait for a server connection: a
// transaction pooler with one server connection makes it wait.
const poolerProbeWait = 2 * time.Second

// OpenDB returns a database/sql pool for the PostgreSQL URL (pgx), after
// finding out whether a transaction pooler stands between it and
// PostgreSQL: behind one, queries go through the unnamed statement, which
// the pooler can carry (pooler true). A URL that sets ExecModeParam is
// taken as it says, without a probe. config, when not nil, may change the
// connection configuration (a tracer) before the pool is made.
func OpenDB(ctx context.Context, rawURL string, config func(*pgx.ConnConfig)) (db *sql.DB, pooler bool, err error) {
	cfg, err := pgx.ParseConfig(rawURL)
	if err != nil {
		return nil, false, fmt.Errorf("parse database URL: %w", err)
	}
	if !setsExecMode(rawURL) {
		if pooler, err = behindTransactionPooler(ctx, cfg); err != nil {
			return nil, false, err
		}
		if pooler {
			cfg.DefaultQueryExecMode = poolerMode
			slog.InfoContext(ctx, "database: a transaction pooler is in front of PostgreSQL; queries go through the unnamed statement",
				"host", cfg.Host, "port", cfg.Port, "database", cfg.Database)
		}
	}
	if config != nil {
		config(cfg)
	}
	return stdlib.OpenDB(*cfg), pooler, nil
}

// setsExecMode reports whether the URL (or key=value string) chooses pgx's
// query mode itself.
func setsExecMode(raw string) bool {
	if u, err := url.Parse(raw); err == nil && u.Scheme != "" {
		return u.Query().Has(ExecModeParam)
	}
	return execModeKey.MatchString(raw)
}

// execModeKey finds ExecModeParam in a key=value connection string.
var execModeKey = regexp.MustCompile(`(^|\s)` + ExecModeParam + `\s*=`)

// behindTransactionPooler tells a transaction pooler from PostgreSQL by a
// session object, a prepared statement, seen from two client connections.
// Directly, each connection is a session of its own: the first prepares a
// statement, the second prepares one of the same name in a transaction it
// keeps open, and the first executes its own. Behind a transaction pooler
// the second's transaction gets a server connection the first used (the
// name exists there), or, holding one, leaves the first another server
// connection that lacks the statement, or none to run on at all.
func behindTransactionPooler(ctx context.Context, cfg *pgx.ConnConfig) (bool, error) {
	c1, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return false, fmt.Errorf("connect: %w", err)
	}
	defer c1.Close(context.WithoutCancel(ctx))
	c2, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return false, fmt.Errorf("connect: %w", err)
	}
	defer c2.Close(context.WithoutCancel(ctx))
	var b [8]byte
	_, _ = rand.Read(b[:])
	name := "orderflow_probe_" + hex.EncodeToString(b[:])
	simple := pgx.QueryExecModeSimpleProtocol
	if _, err := c1.Exec(ctx, "PREPARE "+name+" AS SELECT 1", simple); err != nil {
		return false, fmt.Errorf("probe for a pooler: %w", err)
	}
	defer func() { _, _ = c1.Exec(context.WithoutCancel(ctx), "DEALLOCATE "+name, simple) }()
	if _, err := c2.Exec(ctx, "BEGIN", simple); err != nil {
		return false, fmt.Errorf("probe for a pooler: %w", err)
	}
	defer func() { _, _ = c2.Exec(context.WithoutCancel(ctx), "ROLLBACK", simple) }()
	_, err = c2.Exec(ctx, "PREPARE "+name+" AS SELECT 1", simple)
	switch code := pgCode(err); {
	case code == "42P05": // duplicate_prepared_statement
		return true, nil
	case err != nil:
		return false, fmt.Errorf("probe for a pooler: %w", err)
	}
	ectx, cancel := context.WithTimeout(ctx, poolerProbeWait)
	defer cancel()
	_, err = c1.Exec(ectx, "EXECUTE "+name, simple)
	switch code := pgCode(err); {
	case err == nil:
		return false, nil
	case code == "26000": // invalid_sql_statement_name: not prepared here
		return true, nil
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		return true, nil // no server connection to run on while c2 holds one
	}
	return false, fmt.Errorf("probe for a pooler: %w", err)
}
