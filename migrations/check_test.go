package migrations_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/orderflow/orderflow/migrations"
)

// gooseLockID is the advisory lock key `orderflow migrate` holds while it
// migrates ("orderflow" in ASCII).
const gooseLockID int64 = 0x6f72646572666c6f

// TestCheckOnlyReads: Check on an empty database answers "behind, version
// 0" without creating goose's table, and does not wait for goose's lock
// while another session holds it (a migration in progress).
func TestCheckOnlyReads(t *testing.T) {
	db := sqlDB(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	holder, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if _, err := holder.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, gooseLockID); err != nil {
		t.Fatal(err)
	}
	cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
	defer ccancel()
	err = migrations.Check(cctx, db)
	var verr *migrations.VersionError
	if !errors.As(err, &verr) || !errors.Is(err, migrations.ErrSchemaBehind) || verr.Database != 0 {
		t.Fatalf("Check on an empty database = %v, want a VersionError behind at version 0", err)
	}
	var exists bool
	if err := db.QueryRowContext(ctx, `SELECT to_regclass('public.goose_db_version') IS NOT NULL`).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Error("Check created goose's version table")
	}
}

// TestCheckComparesVersions: current, behind and ahead.
func TestCheckComparesVersions(t *testing.T) {
	db := sqlDB(t, true)
	ctx := context.Background()
	latest, err := migrations.Latest()
	if err != nil {
		t.Fatal(err)
	}
	if err := migrations.Check(ctx, db); err != nil {
		t.Fatalf("Check on a migrated database: %v", err)
	}
	mustExec(t, db, `INSERT INTO goose_db_version (version_id, is_applied) VALUES ($1, true)`, latest+1)
	err = migrations.Check(ctx, db)
	var verr *migrations.VersionError
	if !errors.As(err, &verr) || !errors.Is(err, migrations.ErrSchemaAhead) || verr.Database != latest+1 || verr.Binary != latest {
		t.Errorf("Check on a newer schema = %v, want ahead %d > %d", err, latest+1, latest)
	}
	mustExec(t, db, `DELETE FROM goose_db_version WHERE version_id >= $1`, latest)
	err = migrations.Check(ctx, db)
	if !errors.As(err, &verr) || !errors.Is(err, migrations.ErrSchemaBehind) || verr.Database != latest-1 {
		t.Errorf("Check on an older schema = %v, want behind at %d", err, latest-1)
	}
}
