package main

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/migrations"
)

// newestMigration is the version of the newest migration file, read from
// the file names.
func newestMigration(t *testing.T) int64 {
	t.Helper()
	files, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil || len(files) < 2 {
		t.Fatalf("migration files %v: %v", files, err)
	}
	v, err := strconv.ParseInt(strings.SplitN(files[len(files)-1], "_", 2)[0], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// schemaState describes the public schema's tables and columns and every
// row of goose's version table, so that two snapshots can be compared.
func schemaState(t *testing.T, db *sql.DB) string {
	t.Helper()
	var b strings.Builder
	rows, err := db.Query(`SELECT table_name || '.' || column_name FROM information_schema.columns
		WHERE table_schema = 'public' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		b.WriteString(s + "\n")
	}
	rows.Close()
	var exists bool
	if err := db.QueryRow(`SELECT to_regclass('public.goose_db_version') IS NOT NULL`).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if !exists {
		return b.String() + "no goose_db_version\n"
	}
	rows, err = db.Query(`SELECT id, version_id, is_applied, tstamp FROM goose_db_version ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, v int64
		var applied bool
		var ts any
		if err := rows.Scan(&id, &v, &applied, &ts); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "goose %d %d %v %v\n", id, v, applied, ts)
	}
	return b.String()
}

// openSQL opens dsn with database/sql, closed when the test ends.
func openSQL(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// readOnlyCommands are subcommands that only read the database.
var readOnlyCommands = [][]string{
	{"dlq", "list"},
	{"dlq", "show", "1"},
	{"why", "order-1"},
	{"audit", "-settle", "0s"},
	{"gaps"},
	{"prune", "-older-than", "30d"},
}

// TestReadOnlyCommandsRefuseAnOlderSchema: against a database without the
// schema, or one a migration behind the binary, a read-only subcommand
// exits 1 naming `orderflow migrate` and both versions, and leaves the
// schema and goose's version table as they were.
func TestReadOnlyCommandsRefuseAnOlderSchema(t *testing.T) {
	newest := newestMigration(t)
	for _, c := range []struct {
		name string
		at   int64 // the version to migrate to first; 0: none
	}{
		{"no schema", 0},
		{"one migration behind", newest - 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, dsn := testenv.NewEmptyDatabase(t)
			db := openSQL(t, dsn)
			if c.at > 0 {
				p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS, goose.WithDisableGlobalRegistry(true))
				if err != nil {
					t.Fatal(err)
				}
				if _, err := p.UpTo(context.Background(), c.at); err != nil {
					t.Fatalf("migrate to %d: %v", c.at, err)
				}
			}
			before := schemaState(t, db)
			t.Setenv("DATABASE_URL", dsn)
			for _, args := range readOnlyCommands {
				code, out, errOut := runCmd(args...)
				want := []string{"`orderflow migrate`", fmt.Sprintf("version %d", c.at), fmt.Sprintf("version %d", newest)}
				for _, w := range want {
					if code != 1 || !strings.Contains(errOut, w) {
						t.Errorf("%v on a schema at version %d: exit %d, want 1 with %q in\n%s%s", args, c.at, code, w, out, errOut)
					}
				}
			}
			if after := schemaState(t, db); after != before {
				t.Errorf("the schema changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

// TestCommandsRunWithinTheSchemaWindow: on a schema one expand step newer
// than the binary's, a subcommand runs; on one whose contract step needs a
// newer binary, it exits 1 naming the schema's version, the window's lower
// end and the binary's, without suggesting to migrate.
func TestCommandsRunWithinTheSchemaWindow(t *testing.T) {
	newest := newestMigration(t)
	_, dsn := testenv.NewDatabase(t)
	db := openSQL(t, dsn)
	if _, err := db.Exec(`INSERT INTO goose_db_version (version_id, is_applied) VALUES ($1, true)`, newest+1); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DATABASE_URL", dsn)
	for _, args := range readOnlyCommands {
		if _, out, errOut := runCmd(args...); strings.Contains(errOut, "schema") {
			t.Errorf("%v on a schema at version %d (an expand step): refused\n%s%s", args, newest+1, out, errOut)
		}
	}
	if _, err := db.Exec(`INSERT INTO goose_db_version (version_id, is_applied) VALUES ($1, true)`, newest+2); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE orderflow_schema SET oldest_binary = $1`, newest+1); err != nil {
		t.Fatal(err)
	}
	for _, args := range readOnlyCommands {
		code, out, errOut := runCmd(args...)
		for _, w := range []string{fmt.Sprintf("version %d", newest+2), fmt.Sprintf("schema %d or newer", newest+1),
			fmt.Sprintf("this binary's schema is %d", newest)} {
			if code != 1 || !strings.Contains(errOut, w) {
				t.Errorf("%v on a schema at version %d for binaries from %d: exit %d, want 1 with %q in\n%s%s", args, newest+2, newest+1, code, w, out, errOut)
			}
		}
		if strings.Contains(errOut, "run `orderflow migrate`") {
			t.Errorf("%v on a newer schema suggests migrating:\n%s", args, errOut)
		}
	}
}
