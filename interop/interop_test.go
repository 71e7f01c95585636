package interop

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"gorm.io/gorm"

	"github.com/orderflow/orderflow/check"
	"github.com/orderflow/orderflow/internal/procs"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/scenario"
)

// Shape of each case's scenario, and how long a case may take to settle.
const (
	caseOrders = 8
	settleWait = 2 * time.Minute
	// A violation of invariant 4 (a valid event parked, a dead letter of
	// the wrong kind) cannot heal: once it has held this long, the case
	// stops waiting.
	giveUpAfter = 10 * time.Second
	// How many Java programs publish at once (each is a JVM).
	publishers = 2
)

// stackScript is the local stack's control script, relative to this package.
var stackScript = filepath.Join("..", "scripts", "stack.sh")

// clientCase is one client and mode of the suite.
type clientCase struct {
	name   string // client/mode, as the report names it
	client string // "remoting" or "grpc"
	mode   string // the program's --mode
	pad    padding
	// shape sets the per-message options of the mode on the lines of the
	// scenario's messages (same index).
	shape func(msgs []scenario.Message, lines []line)
	// tx, for a transactional mode: the outcomes of the transactions.
	tx *txPlan
}

// txPlan says how a transactional case ends its transactions.
type txPlan struct {
	// unknownEvery: every n-th line of the scenario is left unknown, and
	// must be committed on the broker's check-back (0: none).
	unknownEvery int
	// rollback: events that must never take effect, each rolled back.
	rollback int
	// unchecked: events that must never take effect, each left unknown,
	// and never checked back: the proxy of RocketMQ 5.3.3 in cluster mode
	// registers a gRPC producer for check-backs only on topics of type
	// TRANSACTION (ClientActivity.registerProducer), not MIXED, so the
	// broker finds no producer to ask ("Check transaction failed, channel
	// is null") and in the end discards them. Should a check-back arrive,
	// the client commits them, and the case fails: the limitation is gone,
	// and docs/design.md §2.1 says otherwise.
	unchecked int
	// checkWait: how long the program waits for check-backs.
	checkWait time.Duration
}

// cases are the suite's clients and modes. The transactional ones come
// first: most of their time is the broker's wait before it checks back the
// transactions left unknown, which the other cases fill.
var cases = []clientCase{
	{name: "remoting/tx", client: "remoting", mode: "tx", pad: padHalf,
		tx: &txPlan{unknownEvery: 3, rollback: 3, checkWait: 2 * time.Minute}},
	{name: "grpc/tx", client: "grpc", mode: "tx", pad: padHalf,
		tx: &txPlan{rollback: 3, unchecked: 2, checkWait: 45 * time.Second}},
	{name: "remoting/zlib", client: "remoting", mode: "default", pad: padAll},
	{name: "remoting/zstd", client: "remoting", mode: "zstd", pad: padAll},
	{name: "remoting/lz4", client: "remoting", mode: "lz4", pad: padAll},
	{name: "remoting/batch", client: "remoting", mode: "batch", pad: padHalf, shape: func(_ []scenario.Message, l []line) { batchLines(l, 8, 100<<10) }},
	{name: "remoting/selector", client: "remoting", mode: "selector", pad: padHalf},
	{name: "remoting/keys", client: "remoting", mode: "default", pad: padHalf, shape: severalKeys},
	{name: "remoting/properties", client: "remoting", mode: "default", pad: padHalf, shape: func(_ []scenario.Message, l []line) { userProperties(l) }},
	{name: "remoting/retries", client: "remoting", mode: "retries", pad: padHalf, shape: func(m []scenario.Message, l []line) { retryDuplicates(m, l) }},
	{name: "grpc/normal", client: "grpc", mode: "normal", pad: padHalf},
	{name: "grpc/fifo", client: "grpc", mode: "fifo", pad: padHalf, shape: func(_ []scenario.Message, l []line) { fifoGroups(l) }},
}

// suite is the run's world: one database, topic, consumer group and task
// queue on the shared services, orderflow's worker and bridge consuming
// them, and the compiled Java programs. Each case publishes a scenario of
// its own order-ID prefix, which the checker judges apart.
type suite struct {
	db             *gorm.DB
	namesrv, proxy string
	topic          string
	normalTopic    string // a topic of the default message type (NORMAL)
	remoting, grpc *javaClient
	dir            string
	publish        chan struct{} // a slot per concurrent publisher
}

// result is what one case did and what the checker said.
type result struct {
	c      clientCase
	prefix string
	seed   int64
	counts scenario.Counts
	lines  int
	sum    *summary
	// checkBacks is how many transactions left unknown must be checked back.
	checkBacks int
	problems   []string // the program's summary against what was asked
	err        error    // the program failed
	report     *check.Report
	checkErr   error
	// queued is the wait for a publisher's slot; published the program's
	// run; settled the wait for the checker's verdict after it.
	queued, published, settled time.Duration
}

func TestJavaClients(t *testing.T) {
	if testing.Short() {
		t.Skip("publishes with the Java clients through the real stack; skipped with -short")
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	s, worker, bridge := newSuite(ctx, t)
	t.Logf("set up in %s: the worker and the bridge built and started, the Java programs compiled, topic %s (message.type=MIXED)",
		time.Since(began).Round(100*time.Millisecond), s.topic)

	// Publish every case, then wait for each to settle, concurrently.
	results := make([]*result, len(cases))
	var refused error
	var wg sync.WaitGroup
	for i, c := range cases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = s.run(ctx, t, c, time.Now().UnixNano()+int64(i))
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		refused = s.fifoOnNormalTopic(ctx)
	}()
	wg.Wait()

	t.Run("grpc/fifo-on-a-NORMAL-topic", func(t *testing.T) {
		// Why `make up` creates ORDER_EVENTS with message.type=MIXED: the
		// gRPC client refuses to send FIFO messages to a topic of the
		// default type.
		pe, ok := isPublishError(refused)
		if !ok {
			t.Fatalf("the gRPC client published FIFO messages to a NORMAL topic (err %v); the suite's own topic proves nothing about MIXED", refused)
		}
		if !strings.Contains(pe.stderr, "not match") || !strings.Contains(pe.stderr, "FIFO") {
			t.Fatalf("the gRPC client failed, but not for the message type: %v", pe)
		}
		t.Logf("refused as expected: %s", firstLine(pe.stderr, "not match"))
	})
	for _, r := range results {
		t.Run(r.c.name, func(t *testing.T) { r.judge(t) })
	}
	for _, p := range []*procs.Proc{worker, bridge} {
		if x := p.Crashes(); len(x) > 0 {
			t.Errorf("invariant 4: %s", strings.Join(x, "; "))
		}
	}
	t.Logf("per client and mode (%s in all):\n%s", time.Since(began).Round(time.Second), table(results))
}

// newSuite checks the services, builds the worker and the bridge, compiles
// the Java programs, creates the topic and starts both processes.
func newSuite(ctx context.Context, t *testing.T) (*suite, *procs.Proc, *procs.Proc) {
	t.Helper()
	s := &suite{dir: t.TempDir(), publish: make(chan struct{}, publishers)}
	var dsn string
	s.db, dsn = testenv.NewDatabase(t)
	testenv.RequireTemporal(t)
	s.namesrv = testenv.RocketMQNamesrv(t)
	broker := testenv.RocketMQBroker(t)
	s.proxy = rocketMQProxy(t)
	s.remoting, s.grpc = javaClients(t)

	// The binaries and the programs, at once.
	var workerBin, starterBin string
	errs := make([]error, 4)
	var wg sync.WaitGroup
	for i, f := range []func() error{
		func() (err error) {
			workerBin, err = procs.Build(ctx, "github.com/orderflow/orderflow/worker", s.dir)
			return
		},
		func() (err error) {
			starterBin, err = procs.Build(ctx, "github.com/orderflow/orderflow/starter", s.dir)
			return
		},
		func() error { return s.remoting.compile(ctx, s.dir) },
		func() error { return s.grpc.compile(ctx, s.dir) },
	} {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = f() }()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}

	s.topic = uniq.Name("interop")
	createMixedTopic(ctx, t, s.namesrv, broker, s.topic)
	s.normalTopic = uniq.Name("interop-normal")
	testenv.CreateTopic(t, s.normalTopic, 2)
	group, taskQueue := uniq.Name("interop-bridge"), uniq.Name("interop-tq")
	env := []string{
		"DATABASE_URL=" + dsn,
		"ORDERFLOW_TOPIC=" + s.topic,
		"ORDERFLOW_CONSUMER_GROUP=" + group,
		"ORDERFLOW_TASK_QUEUE=" + taskQueue,
		"ROCKETMQ_NAMESRV=" + s.namesrv,
		"ORDERFLOW_WORKFLOW_GRACE_PERIOD=10s",
		"ORDERFLOW_WORKFLOW_IDLE_TIMEOUT=30s",
	}
	worker := newProc(t, "worker", workerBin, "ORDERFLOW_WORKER_METRICS_ADDR", env)
	bridge := newProc(t, "bridge", starterBin, "ORDERFLOW_BRIDGE_METRICS_ADDR", env)
	t.Cleanup(func() {
		for _, p := range []*procs.Proc{bridge, worker} {
			if _, _, err := p.Stop(45 * time.Second); err != nil {
				t.Log(err)
			}
		}
		if t.Failed() {
			t.Logf("worker log (tail):\n%s", worker.Tail(4000))
			t.Logf("bridge log (tail):\n%s", bridge.Tail(4000))
		}
	})
	for _, p := range []*procs.Proc{worker, bridge} {
		if err := p.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return s, worker, bridge
}

// newProc returns the program at path as a process, listening on a free
// address passed through addrEnv, ready when its /healthz answers, its
// output in a log file.
func newProc(t *testing.T, name, path, addrEnv string, env []string) *procs.Proc {
	return procs.New(procs.Spec{Name: name, Path: path, Env: env, AddrEnv: addrEnv, Ready: "/healthz",
		LogPath: filepath.Join(t.TempDir(), name+".log")})
}

// rocketMQProxy returns the RocketMQ proxy's gRPC endpoint (ROCKETMQ_PROXY,
// default the stack's 127.0.0.1:8081) after checking that it accepts
// connections.
func rocketMQProxy(t *testing.T) string {
	t.Helper()
	addr := os.Getenv("ROCKETMQ_PROXY")
	if addr == "" {
		addr = "127.0.0.1:8081"
	}
	conn, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		t.Fatalf("the RocketMQ proxy %s is unreachable: %v; start the local stack with `make up` (see `make status`)", addr, err)
	}
	conn.Close()
	return addr
}

// createMixedTopic creates topic with 8 queues and gives it the attribute
// message.type=MIXED, as `make up` does for ORDER_EVENTS, with the broker's
// admin tool.
func createMixedTopic(ctx context.Context, t *testing.T, namesrv, broker, topic string) {
	t.Helper()
	testenv.CreateTopic(t, topic, 8)
	cmd := exec.CommandContext(ctx, stackScript, "mqadmin", "updateTopic",
		"-n", strings.Join(testenv.NamesrvList(namesrv), ";"), "-b", broker, "-t", topic,
		"-r", "8", "-w", "8", "-a", "+message.type=MIXED")
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("message.type=MIXED")) {
		t.Fatalf("scripts/stack.sh mqadmin updateTopic %s -a +message.type=MIXED: %v\n%s", topic, err, tail(string(out), 2000))
	}
}

// run generates the case's scenario, publishes it with the case's client
// and waits until the checker's verdict holds or cannot change.
func (s *suite) run(ctx context.Context, t *testing.T, c clientCase, seed int64) *result {
	r := &result{c: c, seed: seed, prefix: uniq.Name(strings.ReplaceAll(c.name, "/", "-"))}
	sc, err := scenario.Generate(scenario.Options{
		Orders: caseOrders, Seed: seed, Prefix: r.prefix, Start: time.Now(),
		DupRate: 0.2, Reorder: 0.3, CancelRate: 0.2, OpenRate: 0.1, UpdateRate: 0.2,
		GapRate: 0.1, UserChangeRate: 0.5, Conflicts: 1, Bad: 6,
	})
	if err != nil {
		r.err = err
		return r
	}
	r.counts = sc.Expected.Counts
	lines := baseLines(sc.Messages, s.topic, c.pad)
	if c.shape != nil {
		c.shape(sc.Messages, lines)
	}
	if c.tx != nil {
		transactional(lines, c.tx.unknownEvery)
		r.checkBacks = count(lines, txUnknown)
		rolled, err := neverApplied(sc, 0, c.tx.rollback, s.topic, c.pad, txRollback)
		if err != nil {
			r.err = err
			return r
		}
		unchecked, err := neverApplied(sc, c.tx.rollback, c.tx.unchecked, s.topic, c.pad, txUnknown)
		if err != nil {
			r.err = err
			return r
		}
		lines = interleave(lines, append(rolled, unchecked...))
	}
	r.lines = len(lines)

	client, args := s.remoting, []string{"--namesrv", s.namesrv, "--group", uniq.Name("interop-producer"), "--mode", c.mode}
	if c.client == "grpc" {
		client, args = s.grpc, []string{"--endpoint", s.proxy, "--mode", c.mode}
	}
	began := time.Now()
	defer func() { r.queued = time.Since(began) - r.published - r.settled }()
	// A transactional program spends most of its time waiting for the
	// broker's check-backs: it takes no publisher's slot.
	if c.tx == nil {
		select {
		case s.publish <- struct{}{}:
		case <-ctx.Done():
			r.err = ctx.Err()
			return r
		}
	} else {
		args = append(args, "--check-wait-seconds", fmt.Sprint(int(c.tx.checkWait.Seconds())))
	}
	publishing := time.Now()
	r.sum, r.err = client.publish(ctx, s.dir, lines, args...)
	r.published = time.Since(publishing)
	if c.tx == nil {
		<-s.publish
	}
	if r.err != nil {
		return r
	}
	r.problems = r.sum.against(lines, r.checkBacks)
	settling := time.Now()
	r.report, r.checkErr = settle(ctx, s.db, &sc.Expected)
	r.settled = time.Since(settling)
	return r
}

// against lists where the program's summary differs from what it was asked
// to do: every line sent, every transaction ended as asked, and exactly
// checkBacks transactions left unknown checked back.
func (sum *summary) against(lines []line, checkBacks int) []string {
	var out []string
	if sum.Lines != len(lines) || sum.Sent != len(lines) {
		out = append(out, fmt.Sprintf("sent %d of %d lines (read %d)", sum.Sent, len(lines), sum.Lines))
	}
	if n := count(lines, txRollback); sum.RolledBack != n {
		out = append(out, fmt.Sprintf("rolled back %d transactions, want %d", sum.RolledBack, n))
	}
	if n := count(lines, txUnknown); sum.Unknown != n {
		out = append(out, fmt.Sprintf("left %d transactions unknown, want %d", sum.Unknown, n))
	}
	if sum.CheckedBack != checkBacks {
		out = append(out, fmt.Sprintf("%d transactions left unknown were checked back, want %d", sum.CheckedBack, checkBacks))
	}
	return out
}

// count counts the lines whose transaction outcome is tx.
func count(lines []line, tx string) int {
	n := 0
	for _, l := range lines {
		if l.Tx == tx {
			n++
		}
	}
	return n
}

// settle waits until every invariant holds (and keeps holding for a few
// seconds), or until invariant 4 has failed for giveUpAfter (a parked
// valid event stays parked), or settleWait has passed.
func settle(ctx context.Context, db *gorm.DB, exp *scenario.Expected) (*check.Report, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var failingSince time.Time
	hopeless := false
	r, err := check.WaitSettled(wctx, db, exp, check.WaitOptions{
		Wait: settleWait, Interval: time.Second, Settle: 3 * time.Second,
		Progress: func(r *check.Report) {
			if !failed(r, 4) {
				failingSince = time.Time{}
				return
			}
			if failingSince.IsZero() {
				failingSince = time.Now()
			}
			if time.Since(failingSince) >= giveUpAfter {
				hopeless = true
				cancel()
			}
		},
	})
	if hopeless && ctx.Err() == nil {
		return r, fmt.Errorf("%w: invariant 4 kept failing for %s", check.ErrInvariantViolated, giveUpAfter)
	}
	return r, err
}

// failed reports whether invariant n failed in r.
func failed(r *check.Report, n int) bool {
	for _, inv := range r.Failed() {
		if inv.Number == n {
			return true
		}
	}
	return false
}

// fifoOnNormalTopic publishes one FIFO message with the gRPC client to
// s.normalTopic, a topic of the default type, and returns the program's
// error.
func (s *suite) fifoOnNormalTopic(ctx context.Context) error {
	body := []byte(`{"event_id":"x","order_id":"interop-fifo-1","user_id":1,"status":"CREATED","version":1,"amount_cents":1,"occurred_at":"2025-01-01T00:00:00Z"}`)
	lines := []line{{Topic: s.normalTopic, Keys: []string{"interop-fifo-1"}, Tag: "CREATED", Group: "interop-fifo-1",
		body: body, Body: base64.StdEncoding.EncodeToString(body)}}
	select {
	case s.publish <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.publish }()
	_, err := s.grpc.publish(ctx, s.dir, lines, "--endpoint", s.proxy, "--mode", "fifo")
	return err
}

// judge reports the case and fails it when the program failed, did other
// than asked, or the checker's verdict is not PASS.
func (r *result) judge(t *testing.T) {
	t.Logf("scenario %s (seed %d): %d orders, %d messages (%d duplicates, %d conflicts, %d bad, %d reordered orders, %d lost events); %d lines to publish",
		r.prefix, r.seed, r.counts.Orders, r.counts.Messages, r.counts.Duplicates, r.counts.Conflicts, r.counts.Bad, r.counts.Reordered, r.counts.Lost, r.lines)
	if r.err != nil {
		t.Fatalf("publishing with the %s client (mode %s) failed: %v", r.c.client, r.c.mode, r.err)
	}
	t.Logf("the %s client published: sent %d, batches %d, committed %d, unknown %d (checked back %d), rolled back %d, retries %d",
		r.c.client, r.sum.Sent, r.sum.Batches, r.sum.Committed, r.sum.Unknown, r.sum.CheckedBack, r.sum.RolledBack, r.sum.Retries)
	for _, p := range r.problems {
		t.Errorf("the %s program: %s", r.c.client, p)
	}
	var out bytes.Buffer
	if r.report != nil {
		r.report.Write(&out)
	}
	t.Logf("queued %s, published in %s, settled %s later:\n%s", r.queued.Round(100*time.Millisecond),
		r.published.Round(100*time.Millisecond), r.settled.Round(100*time.Millisecond), out.String())
	if r.checkErr != nil {
		t.Errorf("the checker's verdict on %s: %v", r.prefix, r.checkErr)
	}
}

// verdict is the report's one-word verdict with the failed invariants.
func (r *result) verdict() string {
	switch {
	case r.err != nil:
		return "FAIL (publish: " + firstLine(r.err.Error(), "") + ")"
	case r.report == nil:
		return "FAIL (no report)"
	case r.report.OK() && r.checkErr == nil && len(r.problems) == 0:
		return "PASS"
	}
	var failed []string
	for _, inv := range r.report.Failed() {
		failed = append(failed, fmt.Sprintf("%d", inv.Number))
	}
	v := "FAIL"
	if len(failed) > 0 {
		v += " (invariants " + strings.Join(failed, ",") + ")"
	}
	if len(r.problems) > 0 {
		v += " (" + strings.Join(r.problems, "; ") + ")"
	}
	return v
}

// table renders the results: per case, what was published, what the
// tables hold, and the verdict.
func table(results []*result) string {
	var b bytes.Buffer
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "client/mode\tsent\ttransactions\torders\tapplied\tdead letters\tverdict")
	for _, r := range results {
		sent, tx, orders, applied, dead := "-", "", "-", "-", "-"
		if r.sum != nil {
			sent = fmt.Sprintf("%d", r.sum.Sent)
			if r.c.tx != nil {
				tx = fmt.Sprintf("%d committed, %d unknown (%d checked back), %d rolled back",
					r.sum.Committed, r.sum.Unknown, r.sum.CheckedBack, r.sum.RolledBack)
			}
		}
		if r.report != nil {
			n, d := 0, 0
			for _, v := range r.report.OrdersByStatus {
				n += v
			}
			for _, v := range r.report.DeadLettersByReason {
				d += v
			}
			orders = fmt.Sprintf("%d/%d", n, r.report.ExpectedOrders)
			applied = fmt.Sprintf("%d", r.report.EventsByOutcome["applied"])
			dead = fmt.Sprintf("%d", d)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.c.name, sent, tx, orders, applied, dead, r.verdict())
	}
	w.Flush()
	return b.String()
}

// firstLine returns the first line of s that contains sub (any line when
// sub is empty), shortened.
func firstLine(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) && strings.TrimSpace(l) != "" {
			return tail(strings.TrimSpace(l), 300)
		}
	}
	return ""
}
