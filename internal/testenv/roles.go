package testenv

import (
	"context"
	"database/sql"
	"net/url"
	"testing"
	"time"
)

// NewRuntimeRole makes a login role with data rights only on the database
// at ownerDSN, as a deployment's runtime role has (deploy/postgres/init.sql):
// the database's owner grants it SELECT, INSERT, UPDATE and DELETE on the
// tables and USAGE on the sequences it creates in schema public from now
// on (ALTER DEFAULT PRIVILEGES), and nothing else, so the role can neither
// create nor alter a table. Call it before migrating, as a deployment
// does. It returns the database's URL as that role; the role is dropped
// when the test ends.
func NewRuntimeRole(t testing.TB, ownerDSN string) string {
	t.Helper()
	u, err := url.Parse(ownerDSN)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	owner, err := sql.Open("pgx", ownerDSN)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	defer owner.Close()
	role := "runtime_" + pgRandomSuffix()
	password := "runtime-" + pgRandomSuffix()
	db := u.Path[1:]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, q := range []string{
		`CREATE ROLE ` + quoteIdent(role) + ` LOGIN PASSWORD '` + password + `'`,
		`GRANT CONNECT ON DATABASE ` + quoteIdent(db) + ` TO ` + quoteIdent(role),
		`ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO ` + quoteIdent(role),
		`ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE ON SEQUENCES TO ` + quoteIdent(role),
	} {
		if _, err := owner.ExecContext(ctx, q); err != nil {
			t.Fatalf("testenv: runtime role: %s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		// The role's grants live in the database: drop them there first.
		if o, err := sql.Open("pgx", ownerDSN); err == nil {
			_, _ = o.Exec(`DROP OWNED BY ` + quoteIdent(role))
			_ = o.Close()
		}
		_, _ = pgState.admin.Exec(`DROP ROLE IF EXISTS ` + quoteIdent(role))
	})
	u.User = url.UserPassword(role, password)
	return u.String()
}
