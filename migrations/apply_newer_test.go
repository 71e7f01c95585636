package migrations_test

import (
	"context"
	"testing"

	"github.com/orderflow/orderflow/migrations"
)

// TestApplyOnANewerSchema: the previous release's `orderflow migrate` (a
// rollback's pre-upgrade Job) on a schema a later release migrated within
// the window applies nothing and succeeds, leaving the schema as it is.
func TestApplyOnANewerSchema(t *testing.T) {
	db := sqlDB(t, true)
	ctx := context.Background()
	latest, err := migrations.Latest()
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, db, `INSERT INTO goose_db_version (version_id, is_applied) VALUES ($1, true)`, latest+1)
	res, err := migrations.Apply(ctx, db)
	if err != nil || len(res.Applied) != 0 || res.Version != latest+1 {
		t.Fatalf("Apply on schema %d = %+v, %v; want nothing applied, version %d", latest+1, res, err, latest+1)
	}
}
