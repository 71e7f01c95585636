// Package store owns orderflow's PostgreSQL database: it opens it, checks
// that its schema is the one the binary was built for, and holds every
// statement the code base runs on it — the exactly-once write of an event
// (ApplyEvent), the points ledger insert (AwardPoints), dead-letter parking
// (ParkDeadLetter) and the reads that workflows, operators and the bridge's
// duplicate filter (RecordedEvent) need.
//
// Every write is safe to repeat. ApplyEvent records each business key
// (order_id, version) once, in the same statement as the order change, and
// answers a repeat with the decision it took the first time; AwardPoints
// inserts at most one ledger row per (order_id, kind); ParkDeadLetter stores
// a message once per fingerprint and counts repeats. Input that breaks the
// contract is refused with an error wrapping ErrInvalid and writes nothing;
// database trouble is returned wrapped, and the caller retries.
//
// The schema is in package migrations, applied by `orderflow migrate`
// alone; docs/design.md describes the tables.
package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	gormlogger "gorm.io/gorm/logger"

	"github.com/orderflow/orderflow/migrations"
)

// ErrInvalid is wrapped by every error about input that breaks the contract
// (fsm.ErrInvalidEvent is wrapped as well for an invalid event). Such input
// is refused before anything is written; repeating the call cannot help.
var ErrInvalid = errors.New("invalid input")

// ErrUnknownOrder is wrapped, with ErrInvalid, by the error of AwardPoints
// for an order that has no row.
var ErrUnknownOrder = errors.New("unknown order")

// Store is orderflow's database.
type Store struct {
	db *gorm.DB
	// pooler is true when Open found a transaction pooler in front.
	pooler bool
}

// New returns a Store on db, an open gorm database whose schema is current.
func New(db *gorm.DB) *Store { return &Store{db: db} }

// Option configures Open.
type Option func(*options)

type options struct {
	tracer pgx.QueryTracer
}

// WithQueryTracer has every connection report its statements to t (pgx's
// tracing hook: tracing.Tracing.QueryTracer makes them spans); nil: none.
func WithQueryTracer(t pgx.QueryTracer) Option {
	return func(o *options) { o.tracer = t }
}

// Open connects to the PostgreSQL database at url (TLS as its sslmode says)
// with a pool of at most maxConns connections, kept open, directly or
// through a transaction pooler (OpenDB finds out which), and checks that
// the binary runs on its schema (migrations.Check): it never migrates, so
// it needs no DDL rights. A schema of another version is
// refused with an error wrapping a *migrations.VersionError; only
// `orderflow migrate` changes the schema. Close it when done.
func Open(ctx context.Context, url string, maxConns int, opts ...Option) (*Store, error) {
	var o options
	for _, f := range opts {
		f(&o)
	}
	sqlDB, pooler, err := OpenDB(ctx, url, func(c *pgx.ConnConfig) {
		if o.tracer != nil {
			c.Tracer = o.tracer
		}
	})
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	db, err := gorm.Open(postgres.New(postgres.Config{Conn: sqlDB}), &gorm.Config{Logger: gormlogger.Discard})
	if err != nil {
		_ = sqlDB.Close()
		return nil, fmt.Errorf("open database: %w", err)
	}
	sqlDB.SetMaxOpenConns(maxConns)
	sqlDB.SetMaxIdleConns(maxConns)
	if err := migrations.Check(ctx, sqlDB); err != nil {
		_ = sqlDB.Close()
		return nil, fmt.Errorf("check database schema: %w", err)
	}
	st := New(db)
	st.pooler = pooler
	return st, nil
}

// Pooler reports whether Open found a transaction pooler in front of
// PostgreSQL (OpenDB).
func (s *Store) Pooler() bool { return s.pooler }

// DB is the underlying gorm database.
func (s *Store) DB() *gorm.DB { return s.db }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	sqlDB, err := s.db.DB()
	if err != nil {
		return err
	}
	return sqlDB.PingContext(ctx)
}

// Close closes the connection pool.
func (s *Store) Close() error {
	sqlDB, err := s.db.DB()
	if err != nil {
		return err
	}
	return sqlDB.Close()
}

// invalid wraps cause as an ErrInvalid error.
func invalid(cause error) error { return fmt.Errorf("%w: %w", ErrInvalid, cause) }

// pgCode returns the SQLSTATE of a PostgreSQL error, or "".
func pgCode(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}
