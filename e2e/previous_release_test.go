package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/orderflow/orderflow/internal/procs"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/migrations"
	"github.com/orderflow/orderflow/scenario"
	"github.com/orderflow/orderflow/workflows"
)

// TestPreviousReleaseOnTheNewestSchema runs the previous release's worker
// and bridge (CHANGELOG.md's newest release, built from its commit) on the
// schema of this code, migrated one step further by an expand step of a
// later release (a column and a table the previous release never heard
// of), as after an upgrade that is rolled back, or while the previous
// release's pods still run beside the new ones: this code's worker and
// bridge join mid-stream (the worker recording the workflow version the
// release replays), then the release's stop. An adversarial scenario must
// settle with the independent checker's five invariants holding and no
// workflow task failing. Then a contract step that removes what the
// previous release needs (orderflow_schema.oldest_binary raised past its
// schema) must stop that release's worker and bridge from starting, each
// naming both ends of the window.
func TestPreviousReleaseOnTheNewestSchema(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	gdb, dsn := testenv.NewDatabase(t)
	namesrv := testenv.RocketMQNamesrv(t)
	tc := testenv.RequireTemporal(t)
	rel := testenv.PreviousRelease(t)
	workerBin, starterBin := buildRelease(ctx, t, rel)

	latest, err := migrations.Latest()
	if err != nil {
		t.Fatal(err)
	}
	relSchema := newestMigration(t, filepath.Join(rel.Dir, "migrations"))
	expand := latest + 1
	laterStep(t, gdb, expand, `ALTER TABLE orders ADD COLUMN loyalty_tier text;
		CREATE TABLE order_notes (order_id text NOT NULL REFERENCES orders (order_id), note text NOT NULL)`)

	pl := newPipelineWith(t, "previous", dsn, namesrv, workerBin, starterBin)
	worker, bridge := pl.procs(t, pl.env, pl.env)
	for _, p := range []*procs.Proc{worker, bridge} {
		if err := p.Start(ctx); err != nil {
			t.Fatalf("release %s on schema %d: %v\n%s", rel.Name, expand, err, p.Tail(4000))
		}
	}
	s, err := scenario.Generate(scenario.Options{Orders: 150, Seed: time.Now().UnixNano(), Prefix: pl.prefix, Start: time.Now(),
		DupRate: 0.3, Reorder: 0.3, CancelRate: 0.2, OpenRate: 0.1, UpdateRate: 0.2, GapRate: 0.05,
		UserChangeRate: 0.3, Conflicts: 5, Bad: 11})
	if err != nil {
		t.Fatal(err)
	}
	// This code's worker and bridge join mid-stream, as in an unversioned
	// rolling update, recording the workflow version the previous release
	// replays; then the previous release's stop.
	thisWorker, thisBridge := buildBinaries(t)
	env := pl.with(fmt.Sprintf("ORDERFLOW_WORKER_WORKFLOW_VERSION=%d", workflows.PreviousReleaseVersion))
	newWorker := newProc(t, "worker-new", thisWorker, "ORDERFLOW_WORKER_METRICS_ADDR", env)
	newBridge := newProc(t, "bridge-new", thisBridge, "ORDERFLOW_BRIDGE_METRICS_ADDR", pl.env)
	t.Cleanup(func() {
		stop(t, newBridge)
		stop(t, newWorker)
	})
	producer := newProducer(t, namesrv, "previous", nil)
	pubDone := make(chan error, 1)
	began := time.Now()
	go func() {
		pubDone <- scenario.Publish(ctx, producer, s.Messages, scenario.PublishOptions{Topic: pl.topic, Rate: 40})
	}()
	sleepCtx(ctx, time.Until(began.Add(8*time.Second)))
	for _, p := range []*procs.Proc{newWorker, newBridge} {
		if err := p.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("+%s: this code's worker and bridge joined", time.Since(began).Round(100*time.Millisecond))
	sleepCtx(ctx, time.Until(began.Add(16*time.Second)))
	stop(t, bridge)
	stop(t, worker)
	t.Logf("+%s: the previous release's worker and bridge stopped", time.Since(began).Round(100*time.Millisecond))
	if err := <-pubDone; err != nil {
		t.Fatalf("publish: %v", err)
	}
	report := settle(ctx, t, gdb, s.Expected.FirstPhase(), fmt.Sprintf("release %s on schema %d", rel.Name, expand))
	h := scanHistories(ctx, t, tc, pl.taskQueue)
	if h.failed != 0 {
		t.Errorf("%d workflow tasks failed over %d runs, want none", h.failed, h.runs)
	}
	for name, p := range map[string]*procs.Proc{"the release's worker": worker, "the release's bridge": bridge,
		"this code's worker": newWorker, "this code's bridge": newBridge} {
		if x := p.Crashes(); len(x) > 0 {
			t.Errorf("%s crashed: %s", name, strings.Join(x, "; "))
		}
	}
	t.Logf("release %s (%s) on schema %d (this code's %d and an expand step), then beside this code, then this code alone: "+
		"%d messages, %d runs, %d workflow task failures (%d completions refused for a signal meanwhile):\n%s",
		rel.Name, rel.Commit, expand, latest, len(s.Messages), h.runs, h.failed, h.refused, report)

	// A contract step: binaries of a schema before it may no longer run.
	stop(t, newBridge)
	stop(t, newWorker)
	contract := expand + 1
	laterStep(t, gdb, contract, fmt.Sprintf(`ALTER TABLE orders DROP COLUMN loyalty_tier;
		UPDATE orderflow_schema SET oldest_binary = %d`, contract))
	want := fmt.Sprintf("database schema is at version %d, which runs binaries of schema %d or newer", contract, contract)
	for name, p := range map[string]*procs.Proc{"worker": worker, "bridge": bridge} {
		if err := p.Start(ctx); err == nil {
			t.Errorf("release %s's %s started on schema %d, whose contract step needs binaries of schema %d or newer", rel.Name, name, contract, contract)
		} else if log := p.Tail(4000); !strings.Contains(log, want) || !strings.Contains(log, fmt.Sprintf("this binary's schema is %d", relSchema)) {
			t.Errorf("release %s's %s refused schema %d without naming both ends of the window (%q):\n%s", rel.Name, name, contract, want, log)
		}
	}
}

// laterStep applies the SQL of a migration of a later release, as goose
// would: in one transaction with its version's row in goose's table.
func laterStep(t *testing.T, db *gorm.DB, version int64, sql string) {
	t.Helper()
	err := db.Transaction(func(tx *gorm.DB) error {
		if err := tx.Exec(sql).Error; err != nil {
			return err
		}
		return tx.Exec(`INSERT INTO goose_db_version (version_id, is_applied) VALUES (?, true)`, version).Error
	})
	if err != nil {
		t.Fatalf("apply the later release's step %d: %v", version, err)
	}
}

// newestMigration is the version of the newest migration file in dir (a
// release's schema: the newest migration its binaries embed).
func newestMigration(t *testing.T, dir string) int64 {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.sql"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no migrations in %s: %v", dir, err)
	}
	var newest int64
	for _, f := range files {
		n, err := strconv.ParseInt(strings.SplitN(filepath.Base(f), "_", 2)[0], 10, 64)
		if err != nil {
			t.Fatalf("migration %s: %v", f, err)
		}
		newest = max(newest, n)
	}
	return newest
}

// buildRelease builds a release's worker and bridge from its checkout.
func buildRelease(ctx context.Context, t *testing.T, rel testenv.Release) (workerBin, starterBin string) {
	t.Helper()
	bin := t.TempDir()
	var err error
	if workerBin, err = procs.BuildIn(ctx, rel.Dir, "github.com/orderflow/orderflow/worker", bin); err != nil {
		t.Fatalf("release %s: %v", rel.Name, err)
	}
	if starterBin, err = procs.BuildIn(ctx, rel.Dir, "github.com/orderflow/orderflow/starter", bin); err != nil {
		t.Fatalf("release %s: %v", rel.Name, err)
	}
	return workerBin, starterBin
}
