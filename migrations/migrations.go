// Package migrations holds orderflow's PostgreSQL schema as plain SQL files,
// embedded in the binary and applied with pressly/goose by `orderflow
// migrate` (Apply, and Revert for a rollback) alone; the worker, the bridge
// and every other command only Check that they run on the database's
// schema: their own, or a newer one within the schema window (window.go).
//
// Up is safe to call from several processes at once, directly or through a
// transaction pooler: goose holds a lock row (table orderflow_migration_lock)
// while it migrates, and whoever gets it second finds nothing left to do.
package migrations

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"log/slog"
	"sort"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// FS holds the migration files, named NNNNN_description.sql.
//
//go:embed *.sql
var FS embed.FS

// lockID is the ID of the lock row goose holds while migrating orderflow's
// schema ("orderflow" in ASCII, so it does not collide with goose's default).
const lockID int64 = 0x6f72646572666c6f

// lockTable is the table of goose's migration lock.
const lockTable = "orderflow_migration_lock"

// Up applies every pending migration to db, a PostgreSQL database opened with
// a database/sql driver (pgx stdlib). It is a no-op when the schema is
// current.
func Up(ctx context.Context, db *sql.DB) error {
	_, err := Apply(ctx, db)
	return err
}

// Result is what Apply or Revert did: the migration files applied, or
// undone (Revert, newest first), and the schema version afterwards.
type Result struct {
	Applied []string
	Version int64
}

// Apply is Up, reporting what it applied and the resulting schema version.
func Apply(ctx context.Context, db *sql.DB) (Result, error) {
	p, err := provider(db)
	if err != nil {
		return Result{}, err
	}
	results, err := p.Up(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("migrations: up: %w", err)
	}
	var res Result
	for _, r := range results {
		slog.InfoContext(ctx, "migration applied",
			"version", r.Source.Version, "file", r.Source.Path, "duration", r.Duration)
		res.Applied = append(res.Applied, r.Source.Path)
	}
	if res.Version, err = p.GetDBVersion(ctx); err != nil {
		return res, fmt.Errorf("migrations: schema version: %w", err)
	}
	return res, nil
}

// provider is goose over the embedded files, holding orderflow's migration
// lock while it changes the schema: a row of the table lockTable, leased
// and kept alive by a heartbeat, rather than a session-level advisory lock,
// which a transaction pooler in front of PostgreSQL would not keep (each
// statement may reach another server connection).
func provider(db *sql.DB) (*goose.Provider, error) {
	locker, err := lock.NewPostgresTableLocker(
		lock.WithTableName(lockTable),
		lock.WithTableLockID(lockID),
		// Try every second for up to five minutes.
		lock.WithTableLockTimeout(time.Second, 300),
	)
	if err != nil {
		return nil, fmt.Errorf("migrations: table locker: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, FS,
		goose.WithLocker(locker),
		goose.WithDisableGlobalRegistry(true),
		goose.WithSlog(slog.Default().With("component", "migrations")),
	)
	if err != nil {
		return nil, fmt.Errorf("migrations: goose provider: %w", err)
	}
	return p, nil
}

// Fingerprint is the hex SHA-256 of every migration file's name and content.
// It changes whenever the schema does, so tests can key template databases
// by it.
func Fingerprint() (string, error) {
	names, err := fs.Glob(FS, "*.sql")
	if err != nil {
		return "", fmt.Errorf("migrations: list files: %w", err)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		b, err := FS.ReadFile(n)
		if err != nil {
			return "", fmt.Errorf("migrations: read %s: %w", n, err)
		}
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
