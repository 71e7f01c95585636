package store

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"

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

// OpenDB returns a database/sql pool for the PostgreSQL URL (pgx), after
// finding out whether a pooler stands between it and PostgreSQL: behind
// one, queries go through the unnamed statement, which a transaction
// pooler can carry (pooler true). A URL that sets ExecModeParam is
// taken as it says, without a probe. config, when not nil, may change the
// connection configuration (a tracer) before the pool is made.
func OpenDB(ctx context.Context, rawURL string, config func(*pgx.ConnConfig)) (db *sql.DB, pooler bool, err error) {
	cfg, err := pgx.ParseConfig(rawURL)
	if err != nil {
		return nil, false, fmt.Errorf("parse database URL: %w", err)
	}
	if !setsExecMode(rawURL) {
		if pooler, err = behindPooler(ctx, cfg); err != nil {
			return nil, false, err
		}
		if pooler {
			cfg.DefaultQueryExecMode = poolerMode
			slog.InfoContext(ctx, "database: a pooler is in front of PostgreSQL; queries go through the unnamed statement",
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

// behindPooler tells a pooler from PostgreSQL by who answers: PostgreSQL
// greets a connection with the process ID of the backend that serves it
// (BackendKeyData), and that backend's pg_backend_pid() is the same, always.
// A pooler greets with an ID of its own (the key it takes cancel requests
// by), for the backends it lends are not known yet. A transaction pooler
// cannot be told from a session pooler this way; behind either, queries go
// through the unnamed statement, which both carry. (Looking for a session's
// prepared statement where it should or should not be, from two
// connections, was fooled by a server connection that happened to be free
// while other clients used the pooler.)
func behindPooler(ctx context.Context, cfg *pgx.ConnConfig) (bool, error) {
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return false, fmt.Errorf("connect: %w", err)
	}
	defer c.Close(context.WithoutCancel(ctx))
	var pid int64
	if err := c.QueryRow(ctx, "SELECT pg_backend_pid()", pgx.QueryExecModeSimpleProtocol).Scan(&pid); err != nil {
		return false, fmt.Errorf("probe for a pooler: %w", err)
	}
	return pid != int64(c.PgConn().PID()), nil
}
