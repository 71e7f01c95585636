package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/procs"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/migrations"
)

// workerProc is the worker binary on the test's task queue, topic and
// database URL dsn.
func (e *env) workerProc(t *testing.T, bin, dsn string) *procs.Proc {
	t.Helper()
	p := procs.New(procs.Spec{Name: "worker", Path: bin, Env: []string{
		"TEMPORAL_ADDRESS=" + testenv.TemporalAddress(),
		"TEMPORAL_NAMESPACE=" + testenv.TemporalNamespace(),
		"ORDERFLOW_TASK_QUEUE=" + e.taskQueue,
		"DATABASE_URL=" + dsn,
		"ROCKETMQ_NAMESRV=" + e.namesrv,
		"ORDERFLOW_TOPIC=" + e.topic,
		"ORDERFLOW_CONSUMER_GROUP=" + e.group,
		"ORDERFLOW_WORKER_METRICS_ADDR=127.0.0.1:0",
		"ORDERFLOW_WORKER_BROKER_LAG_INTERVAL=0",
		"ORDERFLOW_LOG_LEVEL=info",
	}, ReadyOutput: `"msg":"worker polling"`, ReadyTimeout: 60 * time.Second})
	t.Cleanup(func() {
		if p.Running() {
			_ = p.Kill()
		}
		if t.Failed() {
			t.Logf("worker output:\n%s", p.Output())
		}
	})
	return p
}

// exitOf waits for p, started, to exit and returns its exit code.
func exitOf(t *testing.T, p *procs.Proc, within time.Duration) int {
	t.Helper()
	select {
	case <-p.Done():
		return p.ExitCode()
	case <-time.After(within):
		t.Fatalf("%s still running after %s:\n%s", "process", within, p.Output())
		return 0
	}
}

// TestWorkerAndBridgeRunAsARuntimeRole: the worker and the bridge need no
// DDL rights. Connected as a role with data rights only (it cannot create
// a table), both refuse to start on an unmigrated database, naming
// `orderflow migrate`; once the owner has migrated, both start and an
// event goes through to order_events.
func TestWorkerAndBridgeRunAsARuntimeRole(t *testing.T) {
	ownerDB, ownerDSN := testenv.NewEmptyDatabase(t)
	runtimeDSN := testenv.NewRuntimeRole(t, ownerDSN)
	e := newEnvOn(t, 1, ownerDB, runtimeDSN)
	e.terminate(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// The runtime role cannot change the schema.
	rt := openDB(t, runtimeDSN)
	rtSQL, err := rt.DB()
	if err != nil {
		t.Fatal(err)
	}
	_, err = rtSQL.ExecContext(ctx, `CREATE TABLE runtime_probe (id int)`)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
		t.Fatalf("CREATE TABLE as the runtime role: %v, want SQLSTATE 42501 (insufficient privilege)", err)
	}

	workerBin, err := procs.Build(ctx, "github.com/orderflow/orderflow/worker", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	bridgeBin := buildBridge(t)
	latest, err := migrations.Latest()
	if err != nil {
		t.Fatal(err)
	}

	// Before the migration: both stop at start, exit 1, naming the command.
	w := e.workerProc(t, workerBin, runtimeDSN)
	if err := w.Start(ctx); err == nil {
		t.Fatalf("the worker started on an unmigrated database:\n%s", w.Output())
	}
	b := e.bridgeProc(t, bridgeBin)
	if err := b.Start(ctx); err == nil {
		t.Fatalf("the bridge started on an unmigrated database:\n%s", b.Output())
	}
	for name, p := range map[string]*procs.Proc{"worker": w, "bridge": b} {
		code := exitOf(t, p, 30*time.Second)
		out := p.Output()
		for _, want := range []string{"`orderflow migrate`", "version 0", fmt.Sprintf("version %d", latest)} {
			if code != 1 || !strings.Contains(out, want) {
				t.Errorf("%s on an unmigrated database: exit %d, want 1 with %q in:\n%s", name, code, want, out)
			}
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// The owner migrates, as `orderflow migrate` does.
	ownerSQL, err := ownerDB.DB()
	if err != nil {
		t.Fatal(err)
	}
	if err := migrations.Up(ctx, ownerSQL); err != nil {
		t.Fatalf("migrate as the owner: %v", err)
	}
	if err := e.workerProc(t, workerBin, runtimeDSN).Start(ctx); err != nil {
		t.Fatalf("worker as the runtime role: %v", err)
	}
	if err := e.bridgeProc(t, bridgeBin).Start(ctx); err != nil {
		t.Fatalf("bridge as the runtime role: %v", err)
	}
	ev := e.event(0, 1, fsm.Created)
	e.publish(t, ev)
	e.waitAccounted(t, []fsm.Key{ev.Key()}, 0, 90*time.Second)
}
