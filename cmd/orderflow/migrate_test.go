package main

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/migrations"
)

func TestMigrateAppliesThenFindsTheSchemaCurrent(t *testing.T) {
	_, dsn := testenv.NewEmptyDatabase(t)
	t.Setenv("DATABASE_URL", dsn)
	ctx := context.Background()
	migrate := func() (int, string) {
		var out, errOut bytes.Buffer
		code := run(ctx, []string{"migrate", "-timeout", "1m"}, &out, &errOut)
		return code, out.String() + errOut.String()
	}
	code, out := migrate()
	if code != 0 || !strings.Contains(out, "applied 00001_orders.sql, ") || !strings.Contains(out, "schema at version ") {
		t.Fatalf("migrate on an empty database: exit %d\n%s", code, out)
	}
	code, out = migrate()
	if code != 0 || !strings.HasPrefix(out, "schema is current at version ") {
		t.Fatalf("migrate again: exit %d\n%s", code, out)
	}
	// The tables are there: audit reads them.
	var aout, aerr bytes.Buffer
	if code := run(ctx, []string{"audit", "-settle", "0s"}, &aout, &aerr); code != 0 {
		t.Errorf("audit after migrate: exit %d\n%s%s", code, aout.String(), aerr.String())
	}
}

func TestMigrateUnreachableNamesTheDatabaseNotItsPassword(t *testing.T) {
	// A port nothing listens on, with a password to hide.
	u := url.URL{Scheme: "postgres", User: url.UserPassword("orderflow", "planted-secret-pw"),
		Host: "127.0.0.1:1", Path: "/orderflow", RawQuery: "sslmode=disable&connect_timeout=1"}
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"migrate", "-timeout", "2s", "-database-url", u.String()}, &out, &errOut)
	text := out.String() + errOut.String()
	if code != 1 || !strings.Contains(text, "127.0.0.1:1") || !strings.Contains(text, "did not answer within 2s") {
		t.Errorf("migrate with PostgreSQL unreachable: exit %d, want 1 naming the address and the wait\n%s", code, text)
	}
	testenv.NoSecrets(t, "migrate's output", text, "planted-secret-pw")
}

func TestMigrateUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"migrate", "-h"}, 0},
		{[]string{"migrate", "extra"}, 2},
		{[]string{"migrate", "-timeout", "0s"}, 2},
		{[]string{"migrate", "-yes"}, 2},
	} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), c.args, &out, &errOut); code != c.code {
			t.Errorf("%v: exit %d, want %d\n%s%s", c.args, code, c.code, out.String(), errOut.String())
		}
	}
}

// TestMigrateAsTheRuntimeRoleSaysToUseTheOwner: a role with data rights
// only cannot migrate; migrate says to run it as the owner, and nothing is
// created.
func TestMigrateAsTheRuntimeRoleSaysToUseTheOwner(t *testing.T) {
	_, ownerDSN := testenv.NewEmptyDatabase(t)
	runtimeDSN := testenv.NewRuntimeRole(t, ownerDSN)
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"migrate", "-timeout", "1m", "-database-url", runtimeDSN}, &out, &errOut)
	text := out.String() + errOut.String()
	if code != 1 || !strings.Contains(text, "run orderflow migrate as the database's owner") {
		t.Errorf("migrate as the runtime role: exit %d, want 1 saying to run it as the owner\n%s", code, text)
	}
	var exists bool
	if err := openSQL(t, ownerDSN).QueryRow(`SELECT to_regclass('public.goose_db_version') IS NOT NULL`).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Error("goose's table was created by the runtime role")
	}
}

// TestMigrateDownForARollback: -down-to lists, then with -yes undoes, the
// expand steps above a version, after which a binary of that schema would
// run; across a contract step it refuses and changes nothing.
func TestMigrateDownForARollback(t *testing.T) {
	_, dsn := testenv.NewDatabase(t)
	t.Setenv("DATABASE_URL", dsn)
	newest := newestMigration(t)
	migrate := func(args ...string) (int, string) {
		var out, errOut bytes.Buffer
		code := run(context.Background(), append([]string{"migrate", "-timeout", "1m"}, args...), &out, &errOut)
		return code, out.String() + errOut.String()
	}
	window := fmt.Sprintf("%05d_schema_window.sql", migrations.WindowVersion)
	if code, out := migrate("-down-to", fmt.Sprint(migrations.WindowVersion-1)); code != 0 || !strings.Contains(out, "would undo") ||
		!strings.Contains(out, window) || !strings.Contains(out, fmt.Sprintf("schema at version %d", newest)) {
		t.Fatalf("dry run: exit %d\n%s", code, out)
	}
	// Across 00007, a contract step: refused, nothing undone.
	if code, out := migrate("-down-to", "6", "-yes"); code != 1 || !strings.Contains(out, "contract step") ||
		!strings.Contains(out, "00007_dead_letter_compression.sql") {
		t.Errorf("down across a contract step: exit %d\n%s", code, out)
	}
	if v := schemaVersion(t, dsn); v != int64(newest) {
		t.Fatalf("the refused down changed the schema to %d", v)
	}
	if code, out := migrate("-down-to", fmt.Sprint(migrations.WindowVersion-1), "-yes"); code != 0 || !strings.Contains(out, "undid") ||
		!strings.Contains(out, fmt.Sprintf("schema at version %d", migrations.WindowVersion-1)) {
		t.Fatalf("down: exit %d\n%s", code, out)
	}
	if v := schemaVersion(t, dsn); v != migrations.WindowVersion-1 {
		t.Errorf("schema at %d after the down, want %d", v, migrations.WindowVersion-1)
	}
	// And up again.
	if code, out := migrate(); code != 0 || !strings.Contains(out, window) {
		t.Errorf("up after the down: exit %d\n%s", code, out)
	}
}

// schemaVersion reads the schema version of the database at dsn.
func schemaVersion(t *testing.T, dsn string) int64 {
	t.Helper()
	v, err := migrations.Version(context.Background(), openSQL(t, dsn))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestMigrateThroughATransactionPooler: `orderflow migrate` with the URL a
// user writes for PgBouncer in transaction mode migrates an empty database,
// twice at once (the lock row holds across the pooler), and the worker's
// check then finds the schema current through the pooler too.
func TestMigrateThroughATransactionPooler(t *testing.T) {
	_, dsn := testenv.NewEmptyDatabase(t)
	pgb := testenv.StartPgBouncer(t, 2)
	t.Setenv("DATABASE_URL", pgb.URL(t, dsn))
	codes := make(chan string, 2)
	for range 2 {
		go func() {
			var out, errOut bytes.Buffer
			code := run(context.Background(), []string{"migrate", "-timeout", "2m"}, &out, &errOut)
			codes <- fmt.Sprintf("%d %s%s", code, out.String(), errOut.String())
		}()
	}
	applied := 0
	for range 2 {
		r := <-codes
		if !strings.HasPrefix(r, "0 ") {
			t.Errorf("migrate through PgBouncer: %s", r)
		}
		if strings.Contains(r, "applied 00001_orders.sql") {
			applied++
		}
	}
	if applied != 1 {
		t.Errorf("%d of the two concurrent migrates applied the migrations, want 1", applied)
	}
	newest := newestMigration(t)
	if v := schemaVersion(t, dsn); v != newest {
		t.Errorf("schema at %d after migrating through the pooler, want %d", v, newest)
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"audit", "-settle", "0s"}, &out, &errOut); code != 0 {
		t.Errorf("audit through the pooler: exit %d\n%s%s", code, out.String(), errOut.String())
	}
}
