package migrations

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
)

// ErrSchemaBehind is wrapped by Check's error when the database's schema is
// older than the binary's (or absent): `orderflow migrate` brings it up.
var ErrSchemaBehind = errors.New("schema is behind this binary")

// ErrSchemaAhead is wrapped by Check's error when the database's schema is
// newer than the binary's: the binary is older than the schema.
var ErrSchemaAhead = errors.New("schema is ahead of this binary")

// VersionError is Check's answer to a schema this binary does not run on.
// It wraps ErrSchemaBehind or ErrSchemaAhead. Both are permanent: the
// process cannot start until the schema or the binary changes.
type VersionError struct {
	// Database is the version goose recorded in the database (0: none).
	Database int64
	// Binary is the newest migration embedded in this binary: the oldest
	// schema it runs on.
	Binary int64
	// OldestBinary is, for a newer schema, the oldest binary schema version
	// it lets run (orderflow_schema.oldest_binary), above Binary: a
	// contract migration removed what this binary needs. 0 for a schema
	// older than the window (before WindowVersion).
	OldestBinary int64
}

func (e *VersionError) Error() string {
	switch {
	case e.Database == 0:
		return fmt.Sprintf("database has no orderflow schema (version 0), this binary needs version %d or newer: run `orderflow migrate` (as the database's owner) first",
			e.Binary)
	case e.Database < e.Binary:
		return fmt.Sprintf("database schema is at version %d, this binary needs version %d or newer: run `orderflow migrate` (as the database's owner) first",
			e.Database, e.Binary)
	case e.OldestBinary > 0:
		return fmt.Sprintf("database schema is at version %d, which runs binaries of schema %d or newer (a contract migration removed what older ones need); this binary's schema is %d: run a release of schema %d or newer",
			e.Database, e.OldestBinary, e.Binary, e.OldestBinary)
	default:
		return fmt.Sprintf("database schema is at version %d, newer than version %d of this binary: this binary is older than the schema; run the release that migrated it",
			e.Database, e.Binary)
	}
}

// Unwrap returns ErrSchemaBehind or ErrSchemaAhead.
func (e *VersionError) Unwrap() error {
	if e.Database < e.Binary {
		return ErrSchemaBehind
	}
	return ErrSchemaAhead
}

// Latest is the version of the newest migration embedded in the binary.
func Latest() (int64, error) {
	names, err := fs.Glob(FS, "*.sql")
	if err != nil {
		return 0, fmt.Errorf("migrations: list files: %w", err)
	}
	var latest int64
	for _, n := range names {
		v, err := goose.NumericComponent(n)
		if err != nil {
			return 0, fmt.Errorf("migrations: %s: %w", n, err)
		}
		latest = max(latest, v)
	}
	return latest, nil
}

// Version reads the schema version goose recorded in db: the highest
// version in its table, 0 when the table is absent. It only reads: it
// neither creates goose's table nor takes goose's lock, so a role without
// DDL rights may call it while a migration runs.
func Version(ctx context.Context, db *sql.DB) (int64, error) {
	st, err := database.NewStore(database.DialectPostgres, goose.DefaultTablename)
	if err != nil {
		return 0, fmt.Errorf("migrations: goose store: %w", err)
	}
	ext, ok := st.(database.StoreExtender)
	if !ok {
		return 0, errors.New("migrations: goose store cannot tell whether its table exists")
	}
	exists, err := ext.TableExists(ctx, db)
	if err != nil {
		return 0, fmt.Errorf("migrations: look up goose's table: %w", err)
	}
	if !exists {
		return 0, nil
	}
	v, err := st.GetLatestVersion(ctx, db)
	if errors.Is(err, database.ErrVersionNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("migrations: schema version: %w", err)
	}
	return v, nil
}

// Check reports whether this binary runs on db's schema, and returns a
// *VersionError when it does not. A binary runs on its own schema (Latest)
// and on any newer one whose window (orderflow_schema.oldest_binary) it
// meets: expand migrations keep the previous release running, a contract
// migration raises the window's lower end. Every process but `orderflow
// migrate` calls it at start instead of migrating, so that only that
// command (run by the database's owner) changes the schema. Other errors
// are those of reaching the database.
func Check(ctx context.Context, db *sql.DB) error {
	want, err := Latest()
	if err != nil {
		return err
	}
	have, err := Version(ctx, db)
	if err != nil {
		return err
	}
	switch {
	case have == want:
		return nil
	case have < want || have < WindowVersion:
		return &VersionError{Database: have, Binary: want}
	}
	oldest, err := oldestBinary(ctx, db)
	if err != nil {
		return err
	}
	if oldest > want {
		return &VersionError{Database: have, Binary: want, OldestBinary: oldest}
	}
	return nil
}
