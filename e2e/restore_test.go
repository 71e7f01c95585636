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

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/procs"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/scenario"
	"github.com/orderflow/orderflow/store"
	"github.com/orderflow/orderflow/wire"
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

// restoreCase is the state of the pipeline when the backup is taken.
type restoreCase struct {
	name string
	// lag is the process stopped while a batch is published before the
	// backup ("worker": its signals wait in Temporal; "bridge": its
	// messages wait in the broker), or "" for a pipeline keeping up.
	lag string
	// oldRuns: the worker first writes a workflow version whose runs skip
	// events on their memory's word (4), so recover must end them.
	oldRuns bool
	// deadLetter: a dead letter holding a valid event is replayed after
	// the backup, so its effect is lost with the restore.
	deadLetter bool
}

// TestRecoverFromARestoredBackup is the runbook of docs/operating.md after
// losing orderflow's database: a backup is taken mid-stream (pg_dump),
// more events are applied, the database is restored from the backup
// (pg_restore --clean) while the broker, Temporal and Redis keep what came
// after, and `orderflow recover -yes` (no time given: the restored
// database's recovery points say where each queue restarts) brings it
// back. The order workflows stay open all along (a long idle timeout and
// grace period), so the redelivered events reach runs that remember them.
// The independent checker then judges the run as one that lost nothing:
// every valid event applied once, points once, nothing parked that was not
// bad. Cases: a pipeline keeping up, with runs of an older workflow
// version open and a dead letter replayed after the backup; the worker
// down at the backup (a batch signalled, not applied); the bridge down at
// the backup (a batch in the broker, not consumed).
func TestRecoverFromARestoredBackup(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end runs of minutes; skipped with -short")
	}
	for _, c := range []restoreCase{
		{name: "live", oldRuns: true, deadLetter: true},
		{name: "worker-down", lag: "worker"},
		{name: "bridge-down", lag: "bridge"},
	} {
		t.Run(c.name, func(t *testing.T) { testRestore(t, c) })
	}
}

func testRestore(t *testing.T, c restoreCase) {
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	gdb, dsn := testenv.NewDatabase(t)
	namesrv := testenv.RocketMQNamesrv(t)
	testenv.RequireTemporal(t)
	pl := newPipeline(t, "restore", dsn, namesrv)
	env := pl.with("ORDERFLOW_WORKFLOW_GRACE_PERIOD=1h", "ORDERFLOW_WORKFLOW_IDLE_TIMEOUT=1h")
	workerEnv := env
	if c.oldRuns {
		workerEnv = append(append([]string(nil), env...), "ORDERFLOW_WORKER_WORKFLOW_VERSION=4")
	}
	worker, bridge := pl.procs(t, workerEnv, env)
	start := func(ps ...*procs.Proc) {
		t.Helper()
		for _, p := range ps {
			if err := p.Start(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	start(worker, bridge)
	ofBin, err := procs.Build(ctx, "github.com/orderflow/orderflow/cmd/orderflow", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}

	// Two scenarios: the first is published before the backup (its late
	// phase after it, to the same orders), the second after it; with a
	// lag, a third is published while the worker or the bridge is down,
	// just before the backup.
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
	before, after, lagged := gen("restore-a", seed), gen("restore-b", seed+1), gen("restore-l", seed+2)
	producer := newProducer(t, namesrv, "restore", nil)
	published := 0
	publish := func(msgs []scenario.Message) {
		t.Helper()
		if err := scenario.Publish(ctx, producer, msgs, scenario.PublishOptions{Topic: pl.topic, Rate: 60}); err != nil {
			t.Fatalf("publish: %v", err)
		}
		published += len(msgs)
	}
	settleAll := func(what string, exps ...*scenario.Expected) {
		t.Helper()
		for _, exp := range exps {
			t.Logf("%s: run %s settled:\n%s", what, exp.Prefix, settle(ctx, t, gdb, exp, what))
		}
	}
	st, err := store.Open(ctx, dsn, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	publish(before.Messages)
	settleAll("before the backup", before.Expected.FirstPhase())
	// Every message so far has its effect, and its receipt: the topic's
	// points (seeded at 0, a new topic) add up to the messages published.
	waitPoints(ctx, t, st, pl.topic, int64(published))
	var dl deadLetterEvent
	if c.deadLetter {
		dl = parkValidEvent(ctx, t, st, pl.topic)
	}
	expected := []*scenario.Expected{&before.Expected, after.Expected.FirstPhase()}
	switch c.lag {
	case "worker":
		stop(t, worker)
		publish(lagged.Messages)
		testenv.WaitConsumed(t, namesrv, pl.group, pl.topic)
	case "bridge":
		stop(t, bridge)
		publish(lagged.Messages)
	}
	if c.lag != "" {
		expected = append(expected, lagged.Expected.FirstPhase())
	}
	atBackupPoints := pointsSum(ctx, t, st, pl.topic)
	dump := filepath.Join(t.TempDir(), "orderflow.dump")
	runTool(ctx, t, pgTool(t, "pg_dump"), "-Fc", "-f", dump, "-d", dsn)
	atBackup := readFigures(t, gdb)
	switch c.lag {
	case "worker":
		start(worker)
	case "bridge":
		start(bridge)
	}
	publish(before.Late)
	publish(after.Messages)
	if c.deadLetter {
		runOrderflow(ctx, t, ofBin, env, nil, "dlq", "replay")
		waitOrder(ctx, t, gdb, dl.orderID, true)
	}
	settleAll("after the backup", expected...)
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
	if c.deadLetter {
		waitOrder(ctx, t, gdb, dl.orderID, false)
	}

	// The recovery, first as a dry run, which changes nothing.
	recoverArgs := []string{"recover", "-json"}
	var dry recoverReport
	runOrderflow(ctx, t, ofBin, env, &dry, recoverArgs...)
	var rep recoverReport
	runOrderflow(ctx, t, ofBin, env, &rep, append(recoverArgs, "-yes")...)
	if !dry.DryRun || rep.DryRun || dry.Rewind.Redeliver != rep.Rewind.Redeliver {
		t.Errorf("dry run %+v, then %+v", dry, rep)
	}
	// Every queue restarts at its point; the points of the restored
	// database are where the backup's were.
	var redeliverTopic, pointsTopic int64
	for _, q := range rep.Rewind.Queues {
		if q.Topic != pl.topic {
			continue
		}
		if q.Source != "point" || q.Target != q.Point {
			t.Errorf("queue %d: target %d from %q, want its point %d", q.QueueID, q.Target, q.Source, q.Point)
		}
		pointsTopic += q.Point
		redeliverTopic += q.Committed - q.Target
	}
	if pointsTopic != atBackupPoints {
		t.Errorf("the restored database's points add up to %d, the backup's to %d", pointsTopic, atBackupPoints)
	}
	// The rewind redelivers exactly the messages whose effect the backup
	// lacks: those published after it, and the lagged batch.
	wantRedeliver := int64(published) - atBackupPoints
	if redeliverTopic != wantRedeliver || wantRedeliver < int64(len(before.Late)+len(after.Messages)) {
		t.Errorf("recover redelivers %d messages of the topic, want the %d whose effect the backup lacks", redeliverTopic, wantRedeliver)
	}
	if c.lag != "" && atBackupPoints >= int64(len(before.Messages)+len(lagged.Messages)) {
		t.Errorf("the backup's points (%d) prove the effects of the whole lagged batch, which the %s had not applied", atBackupPoints, c.lag)
	}
	if rep.RedisKeys <= 0 {
		t.Errorf("recover deleted %d Redis keys, want some", rep.RedisKeys)
	}
	if c.oldRuns != (len(rep.Ended) > 0) {
		t.Errorf("recover ended %d runs; want them ended exactly when runs of version 4 were open (%v)", len(rep.Ended), c.oldRuns)
	}
	if c.deadLetter && (rep.DeadLetters < 1 || rep.Replay != "orderflow dlq replay") {
		t.Errorf("recover lists %d dead letters to replay with %q, want the one replayed after the backup and `orderflow dlq replay`",
			rep.DeadLetters, rep.Replay)
	}
	if rep.OpenRuns < after.Expected.Counts.Orders {
		t.Errorf("%d order workflows open at the recovery, want at least the %d orders published after the backup: "+
			"the redelivered events must reach runs that remember them", rep.OpenRuns, after.Expected.Counts.Orders)
	}

	current, _ := pl.procs(t, env, env)
	start(current, bridge)
	if c.deadLetter {
		runOrderflow(ctx, t, ofBin, env, nil, strings.Fields(rep.Replay)[1:]...)
		waitOrder(ctx, t, gdb, dl.orderID, true)
	}
	settleAll("after the recovery", expected...)
	recovered := readFigures(t, gdb)
	if !recovered.same(beforeLoss) {
		t.Errorf("after the recovery %s; before the loss %s", recovered, beforeLoss)
	}
	reloads := strings.Count(current.Tail(1<<30), "the database is behind what this run handled")
	if reloads == 0 && !c.oldRuns {
		t.Error("no run found the database behind its memory: the redelivered events did not reach open runs")
	}
	t.Logf("%s: before the loss: %s; restored: %s; after the recovery: %s; %d messages redelivered (%d of the topic), "+
		"%d Redis keys deleted, %d open runs (%d ended), %d runs reloaded the order, %d dead letters replayed again",
		c.name, beforeLoss, restored, recovered, rep.Rewind.Redeliver, redeliverTopic, rep.RedisKeys, rep.OpenRuns, len(rep.Ended),
		reloads, rep.DeadLetters)
}

// recoverReport is the part of `orderflow recover -json` the test reads.
type recoverReport struct {
	DryRun bool `json:"dry_run"`
	Rewind struct {
		Redeliver int64 `json:"redeliver"`
		Queues    []struct {
			Topic     string `json:"Topic"`
			QueueID   int    `json:"QueueID"`
			Committed int64  `json:"Committed"`
			Target    int64  `json:"Target"`
			Source    string `json:"source"`
			Point     int64  `json:"point"`
		} `json:"queues"`
	} `json:"rewind"`
	RedisKeys   int64    `json:"redis_keys"`
	OpenRuns    int      `json:"open_runs"`
	Ended       []string `json:"ended"`
	DeadLetters int      `json:"dead_letters_to_replay"`
	Replay      string   `json:"replay_command"`
}

// pointsSum adds up the recovery points of topic's queues.
func pointsSum(ctx context.Context, t *testing.T, st *store.Store, topic string) int64 {
	t.Helper()
	ps, err := st.RecoveryPoints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, p := range ps {
		if p.Topic == topic {
			sum += p.Next
		}
	}
	return sum
}

// waitPoints waits until topic's recovery points add up to n.
func waitPoints(ctx context.Context, t *testing.T, st *store.Store, topic string, n int64) {
	t.Helper()
	testenv.WaitFor(t, time.Minute, func() error {
		if got := pointsSum(ctx, t, st, topic); got != n {
			return fmt.Errorf("the points of %s add up to %d, want %d", topic, got, n)
		}
		return nil
	})
}

// deadLetterEvent is a valid event parked as undeliverable.
type deadLetterEvent struct{ orderID string }

// parkValidEvent parks a valid event of a new order as undeliverable, as
// the bridge parks one it could not deliver for its bound.
func parkValidEvent(ctx context.Context, t *testing.T, st *store.Store, topic string) deadLetterEvent {
	t.Helper()
	e := fsm.Event{EventID: uniq.Name("dl"), OrderID: uniq.Name("restore-dl"), UserID: 42, Status: fsm.Created, Version: 1,
		AmountCents: 4200, OccurredAt: time.Now().UTC().Truncate(time.Millisecond)}
	body, err := e.Body()
	if err != nil {
		t.Fatal(err)
	}
	dl := wire.DeadLetter{Envelope: wire.NewEnvelope(topic, uniq.Name("msg"), e.OrderID, "CREATED", body, time.Now(), false),
		Reason: wire.KindUndeliverable + ": not delivered for 1h0m0s: the test parked it"}
	if _, err := st.ParkDeadLetter(ctx, dl); err != nil {
		t.Fatal(err)
	}
	return deadLetterEvent{orderID: e.OrderID}
}

// waitOrder waits until the order is stored (present) or not.
func waitOrder(ctx context.Context, t *testing.T, db *gorm.DB, orderID string, present bool) {
	t.Helper()
	testenv.WaitFor(t, time.Minute, func() error {
		var n int64
		if err := db.WithContext(ctx).Raw(`SELECT count(*) FROM orders WHERE order_id = ?`, orderID).Scan(&n).Error; err != nil {
			return err
		}
		if (n == 1) != present {
			return fmt.Errorf("order %s: %d rows, want present %v", orderID, n, present)
		}
		return nil
	})
}

// runOrderflow runs the orderflow command with env and decodes its JSON
// output into v.
func runOrderflow(ctx context.Context, t *testing.T, bin string, env []string, v any, args ...string) {
	t.Helper()
	code, out, err := procs.Run(ctx, procs.Spec{Name: "orderflow", Path: bin, Args: args, Env: env})
	if err != nil || code != 0 {
		t.Fatalf("orderflow %s: exit %d, %v:\n%s", strings.Join(args, " "), code, err, out)
	}
	if v == nil {
		return
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
