package migrations_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/orderflow/orderflow/migrations"
)

// TestCheckOnlyReads: Check on an empty database answers "behind, version
// 0" without creating goose's table or its lock table.
func TestCheckOnlyReads(t *testing.T) {
	db := sqlDB(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
	defer ccancel()
	err := migrations.Check(cctx, db)
	var verr *migrations.VersionError
	if !errors.As(err, &verr) || !errors.Is(err, migrations.ErrSchemaBehind) || verr.Database != 0 {
		t.Fatalf("Check on an empty database = %v, want a VersionError behind at version 0", err)
	}
	for _, table := range []string{"goose_db_version", "orderflow_migration_lock"} {
		var exists bool
		if err := db.QueryRowContext(ctx, `SELECT to_regclass($1) IS NOT NULL`, "public."+table).Scan(&exists); err != nil {
			t.Fatal(err)
		}
		if exists {
			t.Errorf("Check created %s", table)
		}
	}
}

// TestCheckComparesVersions: current, behind, ahead within the window (an
// expand step), and ahead past it (a contract step that needs a newer
// binary than this one).
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
	// An expand step of the next release: this binary keeps running.
	mustExec(t, db, `INSERT INTO goose_db_version (version_id, is_applied) VALUES ($1, true)`, latest+1)
	if err := migrations.Check(ctx, db); err != nil {
		t.Errorf("Check on a newer schema within the window: %v", err)
	}
	// A contract step of the release after: binaries of schema latest+1 or
	// newer only.
	mustExec(t, db, `INSERT INTO goose_db_version (version_id, is_applied) VALUES ($1, true)`, latest+2)
	mustExec(t, db, `UPDATE orderflow_schema SET oldest_binary = $1`, latest+1)
	err = migrations.Check(ctx, db)
	var verr *migrations.VersionError
	if !errors.As(err, &verr) || !errors.Is(err, migrations.ErrSchemaAhead) || verr.Database != latest+2 || verr.Binary != latest ||
		verr.OldestBinary != latest+1 {
		t.Errorf("Check past the window = %v, want ahead %d > %d, window from %d", err, latest+2, latest, latest+1)
	}
	for _, w := range []string{fmt.Sprintf("version %d", latest+2), fmt.Sprintf("schema %d or newer", latest+1),
		fmt.Sprintf("this binary's schema is %d", latest)} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("the refusal %q does not say %q", err, w)
		}
	}
	mustExec(t, db, `DELETE FROM goose_db_version WHERE version_id >= $1`, latest)
	err = migrations.Check(ctx, db)
	if !errors.As(err, &verr) || !errors.Is(err, migrations.ErrSchemaBehind) || verr.Database != latest-1 {
		t.Errorf("Check on an older schema = %v, want behind at %d", err, latest-1)
	}
}

// TestStepsDeclareTheirKind: every migration says whether it expands or
// contracts the schema; the window's first value is the highest lower end
// the contract steps before it set, and every later contract step raises
// it in its own SQL.
func TestStepsDeclareTheirKind(t *testing.T) {
	steps, err := migrations.Steps()
	if err != nil {
		t.Fatal(err)
	}
	latest, _ := migrations.Latest()
	if len(steps) == 0 || steps[len(steps)-1].Version != latest {
		t.Fatalf("steps %+v, want one per migration up to %d", steps, latest)
	}
	var floor int64
	for _, s := range steps {
		b, err := migrations.FS.ReadFile(s.File)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case s.Kind == migrations.Contract && (s.OldestBinary < 1 || s.OldestBinary > s.Version):
			t.Errorf("%s: oldest binary %d, want 1 to its own version %d", s.File, s.OldestBinary, s.Version)
		case s.Kind == migrations.Contract && s.Version < migrations.WindowVersion:
			floor = max(floor, s.OldestBinary)
		case s.Kind == migrations.Contract:
			want := fmt.Sprintf("UPDATE orderflow_schema SET oldest_binary = greatest(oldest_binary, %d)", s.OldestBinary)
			if !strings.Contains(string(b), want) {
				t.Errorf("%s is a contract step for binaries of schema %d and newer, but does not raise the window: %q", s.File, s.OldestBinary, want)
			}
		case s.Version == migrations.WindowVersion:
			if want := fmt.Sprintf("INSERT INTO orderflow_schema (oldest_binary) VALUES (%d);", floor); !strings.Contains(string(b), want) {
				t.Errorf("%s starts the window elsewhere than at %d, the contract steps before it: want %q", s.File, floor, want)
			}
		}
	}
}
