package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/orderflow/orderflow/internal/procs"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/scenario"
)

// restoreFigures are the rows that carry the business effects.
type restoreFigures struct {
	Orders, Events, Ledger, DeadLetters int64
	Points                              int64
	// Net is each order's status, version and net points.
	Net map[string]string
}

func (f restoreFigures) String() string {
	return fmt.Sprintf("%d orders, %d order_events rows, %d ledger rows (%+d points), %d dead letters",
		f.Orders, f.Events, f.Ledger, f.Points, f.DeadLetters)
}

func readFigures(t *testing.T, db *gorm.DB) restoreFigures {
	t.Helper()
	var f restoreFigures
	err := db.Raw(`SELECT (SELECT count(*) FROM orders), (SELECT count(*) FROM order_events),
		(SELECT count(*) FROM points_ledger), (SELECT coalesce(sum(points), 0) FROM points_ledger),
		(SELECT count(*) FROM dead_letters)`).Row().Scan(&f.Orders, &f.Events, &f.Ledger, &f.Points, &f.DeadLetters)
	if err != nil {
		t.Fatalf("read the figures: %v", err)
	}
	rows, err := db.Raw(`SELECT o.order_id, o.status, o.version, coalesce(sum(l.points), 0)
		FROM orders o LEFT JOIN points_ledger l ON l.order_id = o.order_id GROUP BY 1, 2, 3`).Rows()
	if err != nil {
		t.Fatalf("read the orders: %v", err)
	}
	defer rows.Close()
	f.Net = map[string]string{}
	for rows.Next() {
		var id, status string
		var version, points int64
		if err := rows.Scan(&id, &status, &version, &points); err != nil {
			t.Fatal(err)
		}
		f.Net[id] = fmt.Sprintf("%s v%d %+d", status, version, points)
	}
	return f
}

// same reports whether f and g hold the same orders, business keys and
// points. The ledger's row count may differ: an order cancelled around its
// payment is due a purchase and a refund row, or none, as the events
// arrive (both net 0), and the redelivery brings them in another order.
func (f restoreFigures) same(g restoreFigures) bool {
	return f.Orders == g.Orders && f.Events == g.Events && f.Points == g.Points && f.DeadLetters == g.DeadLetters &&
		maps.Equal(f.Net, g.Net)
}

// pgTool is the path of a PostgreSQL client program of the local stack's
// installation (scripts/stack/postgres.sh installs it).
func pgTool(t *testing.T, name string) string {
	t.Helper()
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	if len(found) == 0 {
		p, err := exec.LookPath(name)
		if err != nil {
			t.Fatalf("%s not found: the local stack installs PostgreSQL (`make up`)", name)
		}
		return p
	}
	return found[len(found)-1]
}

// TestRecoverFromARestoredBackup is the runbook of docs/operating.md after
// losing orderflow's database: a backup is taken mid-stream (pg_dump),
// more events are applied, the database is restored from the backup
// (pg_restore --clean) while the broker, Temporal and Redis keep what came
// after, and `orderflow recover -since T -yes` brings it back. The order
// workflows stay open all along (a long idle timeout and grace period), so
// the redelivered events reach runs that remember them. The independent
// checker then judges the run as one that lost nothing: every valid event
// applied once, points once, nothing parked that was not bad.
func TestRecoverFromARestoredBackup(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run of minutes; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	gdb, dsn := testenv.NewDatabase(t)
	namesrv := testenv.RocketMQNamesrv(t)
	testenv.RequireTemporal(t)
	pl := newPipeline(t, "restore", dsn, namesrv)
	env := pl.with("ORDERFLOW_WORKFLOW_GRACE_PERIOD=1h", "ORDERFLOW_WORKFLOW_IDLE_TIMEOUT=1h")
	worker, bridge := pl.procs(t, env, env)
	start := func() {
		t.Helper()
		for _, p := range []*procs.Proc{worker, bridge} {
			if err := p.Start(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	start()
	ofBin, err := procs.Build(ctx, "github.com/orderflow/orderflow/cmd/orderflow", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}

	// Two scenarios: the first is published before the backup (its late
	// phase after it, to the same orders), the second after it.
	gen := func(name string, seed int64) *scenario.Scenario {
		s, err := scenario.Generate(scenario.Options{Orders: 60, Seed: seed, Prefix: uniq.Name(name), Start: time.Now(),
			DupRate: 0.15, Reorder: 0.3, CancelRate: 0.2, OpenRate: 0.2, UpdateRate: 0.2, GapRate: 0.05,
			UserChangeRate: 0.3, Conflicts: 4, Bad: 5, Illegal: 6, LateConflicts: 4, LateRate: 0.2})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	seed := time.Now().UnixNano()
	before, after := gen("restore-a", seed), gen("restore-b", seed+1)
	producer := newProducer(t, namesrv, "restore", nil)
	publish := func(msgs []scenario.Message) {
		t.Helper()
		if err := scenario.Publish(ctx, producer, msgs, scenario.PublishOptions{Topic: pl.topic, Rate: 60}); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	settleAll := func(what string, exps ...*scenario.Expected) {
		t.Helper()
		for _, exp := range exps {
			t.Logf("%s: run %s settled:\n%s", what, exp.Prefix, settle(ctx, t, gdb, exp, what))
		}
	}

	publish(before.Messages)
	settleAll("before the backup", before.Expected.FirstPhase())
	backupAt := time.Now()
	dump := filepath.Join(t.TempDir(), "orderflow.dump")
	runTool(ctx, t, pgTool(t, "pg_dump"), "-Fc", "-f", dump, "-d", dsn)
	atBackup := readFigures(t, gdb)
	// Stored at least a second after the backup's time, so that a rewind
	// to it (with no margin) picks exactly what follows.
	sleepCtx(ctx, 1500*time.Millisecond)
	afterBackup := len(before.Late) + len(after.Messages)
	publish(before.Late)
	publish(after.Messages)
	settleAll("after the backup", &before.Expected, after.Expected.FirstPhase())
	beforeLoss := readFigures(t, gdb)

	// The loss: worker and bridge stopped, the database restored.
	stop(t, bridge)
	stop(t, worker)
	runTool(ctx, t, pgTool(t, "pg_restore"), "--clean", "--if-exists", "--single-transaction", "-d", dsn, dump)
	restored := readFigures(t, gdb)
	if !restored.same(atBackup) || restored.Ledger != atBackup.Ledger {
		t.Fatalf("the restore did not bring back the backup: %s, the backup held %s", restored, atBackup)
	}
	if restored.Events >= beforeLoss.Events {
		t.Fatalf("the scenario lost nothing: %s before the loss, %s restored", beforeLoss, restored)
	}

	// The recovery, first as a dry run, which changes nothing.
	recoverArgs := []string{"recover", "-since", backupAt.UTC().Format(time.RFC3339Nano), "-margin", "0s", "-json"}
	var dry recoverReport
	runOrderflow(ctx, t, ofBin, env, &dry, recoverArgs...)
	var rep recoverReport
	runOrderflow(ctx, t, ofBin, env, &rep, append(recoverArgs, "-yes")...)
	if !dry.DryRun || rep.DryRun || dry.Rewind.Redeliver != rep.Rewind.Redeliver {
		t.Errorf("dry run %+v, then %+v", dry, rep)
	}
	if rep.Rewind.Redeliver != int64(afterBackup) {
		t.Errorf("recover rewinds %d messages, want the %d published after the backup", rep.Rewind.Redeliver, afterBackup)
	}
	if rep.RedisKeys <= 0 || len(rep.Ended) != 0 {
		t.Errorf("recover deleted %d Redis keys and ended %v; want keys deleted and no run ended (every run verifies its memory)",
			rep.RedisKeys, rep.Ended)
	}
	if rep.OpenRuns < after.Expected.Counts.Orders {
		t.Errorf("%d order workflows open at the recovery, want at least the %d orders published after the backup: "+
			"the redelivered events must reach runs that remember them", rep.OpenRuns, after.Expected.Counts.Orders)
	}

	start()
	settleAll("after the recovery", &before.Expected, after.Expected.FirstPhase())
	recovered := readFigures(t, gdb)
	if !recovered.same(beforeLoss) {
		t.Errorf("after the recovery %s; before the loss %s", recovered, beforeLoss)
	}
	reloads := strings.Count(worker.Tail(1<<30), "the database is behind what this run handled")
	if reloads == 0 {
		t.Error("no run found the database behind its memory: the redelivered events did not reach open runs")
	}
	t.Logf("before the loss: %s; restored: %s; after the recovery: %s; %d messages redelivered, %d Redis keys deleted, "+
		"%d open runs (%d ended), %d runs reloaded the order", beforeLoss, restored, recovered, rep.Rewind.Redeliver,
		rep.RedisKeys, rep.OpenRuns, len(rep.Ended), reloads)
}

// recoverReport is the part of `orderflow recover -json` the test reads.
type recoverReport struct {
	DryRun bool `json:"dry_run"`
	Rewind struct {
		Redeliver int64 `json:"Redeliver"`
	} `json:"rewind"`
	RedisKeys int64    `json:"redis_keys"`
	OpenRuns  int      `json:"open_runs"`
	Ended     []string `json:"ended"`
}

// runOrderflow runs the orderflow command with env and decodes its JSON
// output into v.
func runOrderflow(ctx context.Context, t *testing.T, bin string, env []string, v any, args ...string) {
	t.Helper()
	code, out, err := procs.Run(ctx, procs.Spec{Name: "orderflow", Path: bin, Args: args, Env: env})
	if err != nil || code != 0 {
		t.Fatalf("orderflow %s: exit %d, %v:\n%s", strings.Join(args, " "), code, err, out)
	}
	i := strings.Index(out, "{")
	if i < 0 || json.Unmarshal([]byte(out[i:]), v) != nil {
		t.Fatalf("orderflow %s: no JSON report:\n%s", strings.Join(args, " "), out)
	}
}

// runTool runs a program to its end, failing the test with its output.
func runTool(ctx context.Context, t *testing.T, path string, args ...string) {
	t.Helper()
	out, err := exec.CommandContext(ctx, path, args...).CombinedOutput()
	if err != nil {
		// Not the arguments: the connection string holds a password.
		t.Fatalf("%s: %v\n%s", filepath.Base(path), err, out)
	}
}
