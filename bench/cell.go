package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.temporal.io/api/serviceerror"
	"golang.org/x/sync/errgroup"

	"github.com/orderflow/orderflow/api"
	"github.com/orderflow/orderflow/check"
	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/internal/procs"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/scenario"
)

// cellConfig is one measured run: a fresh scenario, topic, consumer group
// and database, consumed by the bridge and orderflow's worker or the
// engine's floor, or (Direct) a fresh scenario signalled straight to the
// engine's floor. By default it drains a backlog, published before the
// consumers start so that the rate is theirs; with Offered > 0 it is
// open-loop: a warm-up event goes through, then the scenario is published
// at a steady rate whatever the consumers do.
type cellConfig struct {
	Name        string
	Orders      int
	Concurrency int // bridge goroutines
	BatchSize   int
	Seed        int64
	// DupRate is the scenario's share of messages sent twice.
	DupRate float64
	// Offered is the open loop's distinct events/s (duplicates, conflicts
	// and bad messages on top).
	Offered float64 `json:",omitempty"`
	// BridgeArgs are extra flags of this cell's bridge.
	BridgeArgs []string `json:",omitempty"`
	// Env are variables added to the environment of this cell's worker and
	// bridge (an A B B A experiment's B).
	Env []string `json:",omitempty"`
	// Floor puts the engine's floor (floorWorkflow) in place of
	// orderflow's worker: behind the bridge (the pipeline floor) or, with
	// Direct, signalled by the benchmark's own client (the direct floor,
	// direct.go) with at most InFlight signals in flight, no broker, no
	// bridge and no database.
	Floor    bool `json:",omitempty"`
	Direct   bool `json:",omitempty"`
	InFlight int  `json:",omitempty"`
	// generate, when set, builds the scenario instead of cellScenario.
	generate func(prefix string) (*scenario.Scenario, error)
	// inspect, when set, runs once the cell settled, its consumers running.
	inspect func(ctx context.Context, r *cellResult) error
	// noCost leaves the engine's work per event unmeasured (a sweep step).
	noCost bool
	// breakdown measures where the cell's keys spend their time, stage by
	// stage (orderflow's steady cells: sweep steps and the cells at 0.5
	// and 0.9 × capacity).
	breakdown bool
}

// cellResult is what one cell measured. Rates count distinct valid events
// (business keys), the unit orderflow and its floor share.
type cellResult struct {
	Config cellConfig
	// Prefix starts the run's order IDs.
	Prefix     string
	Messages   int // published, duplicates, conflicts and bad messages included
	Events     int // distinct valid business keys
	Duplicates int
	// Publish is how long publishing took.
	Publish time.Duration
	// Startup is a backlog's time from the bridge's start to the first
	// effect.
	Startup time.Duration `json:",omitempty"`
	// Elapsed runs to the last effect from the first (a backlog) or from
	// the first publish (open-loop).
	Elapsed time.Duration
	// Rate is distinct events per second over Elapsed.
	Rate float64
	// P50 and P99 are the open loop's latencies from a key's first publish
	// to its applying, Tail the last publish to the last key applied.
	P50, P99, Tail time.Duration `json:",omitempty"`
	// QuietWait is how long a sweep's cell waited for the engine to be
	// quiet before it started.
	QuietWait time.Duration `json:",omitempty"`
	// Verdict is a sweep step's: "pass", or why it failed (judge).
	Verdict  string `json:",omitempty"`
	Verified bool
	// Hot is what the hot-order cell found in Temporal.
	Hot *hotResult `json:",omitempty"`
	// Signals counts the bridge's SignalWithStart requests, retries
	// included, or the direct floor's client's.
	Signals int `json:",omitempty"`
	// Filtered counts the direct floor's messages left out as copies of
	// their key's first content, as the bridge's duplicate filter would.
	Filtered int `json:",omitempty"`
	// CPU is the machine's CPU use by process group over the cell's CPU
	// window: /proc read at its start (a backlog's first effect, an open
	// loop's first send) and at its end (the last key applied), so over
	// Elapsed give or take the moment each end is seen (cpuWindow).
	CPU *cpuShare `json:",omitempty"`
	// Cost is the engine's work per event; nil for a sweep step.
	Cost *engineCost `json:",omitempty"`
	// Breakdown is where a steady cell's keys spent their time from
	// publish to row, stage by stage (orderflow's steady cells, not a
	// sweep step's).
	Breakdown []stageStat `json:",omitempty"`
}

// settleWait bounds the wait for a cell to settle.
const settleWait = 8 * time.Minute

// runCell runs one cell from a fresh topic, group, task queue and database
// until every order settled, and checks the invariants; a direct cell
// runs with runDirectCell.
func (b *bench) runCell(ctx context.Context, cc cellConfig) (cellResult, error) {
	if cc.Direct {
		return b.runDirectCell(ctx, cc)
	}
	res := cellResult{Config: cc, Prefix: uniq.Name("b")}
	w, err := procWindow(b.cpu)
	if err != nil {
		return res, err
	}
	defer w.Drop()
	if cc.Floor {
		b.floor = newFloorTracker(res.Prefix)
	}
	db, err := newDatabase(ctx, b.cfg.DatabaseURL)
	if err != nil {
		return res, err
	}
	defer b.closeCell(ctx, cc, db)
	topic := uniq.Name("bench-events")
	// On a busy machine the broker's registration can take more than 30 s.
	tctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := mq.CreateTopic(tctx, b.namesrv, b.broker, topic, 8, b.tls); err != nil {
		return res, fmt.Errorf("%w; %s", err, makeUp)
	}
	sc, err := cellScenario(cc, res.Prefix, topic)
	if err != nil {
		return res, err
	}
	c := sc.Expected.Counts
	res.Messages, res.Events, res.Duplicates = c.Messages, c.Events, c.Duplicates
	// The CPU window: a backlog's from its first key applied, an open
	// loop's from its first publish; to the last key applied.
	windowStart := w.Start
	if cc.Offered > 0 {
		windowStart = nil
	}
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	watch := func() {
		if cc.Floor {
			b.floor.watch(res.Events, windowStart, w.End)
			return
		}
		go watchProgress(wctx, appliedKeys(db, res.Prefix), res.Events, progressInterval, windowStart, w.End)
	}
	if cc.Floor {
		watch()
	}
	p, err := mq.NewProducer(b.cfg.RocketMQNamesrv, mq.WithProducerGroup(uniq.Name("bench-pub")), mq.WithTLS(b.tls))
	if err != nil {
		return res, err
	}
	defer p.Close()
	pub := &publisher{sendLog: newSendLog(sc.Messages), p: p, topic: topic}
	if cc.Offered <= 0 {
		// A backlog: everything is in the broker before a consumer starts.
		if err := pub.run(ctx, 0); err != nil {
			return res, err
		}
	}
	var before costCounters
	if !cc.noCost {
		if before, err = readCounters(ctx, b.e.Metrics, b.cfg.TemporalNamespace, "", db); err != nil {
			return res, err
		}
	}
	stop, started, err := b.startConsumers(ctx, cc, db, topic)
	if err != nil {
		return res, err
	}
	defer stop()
	if !cc.Floor && cc.Offered <= 0 {
		watch()
	}
	if cc.Offered > 0 {
		publish := func(ctx context.Context, e fsm.Event) error {
			_, err := p.PublishEvent(ctx, topic, e)
			return err
		}
		if err := b.warmUp(ctx, publish, cc.Floor, db); err != nil {
			return res, fmt.Errorf("%s: %w", cc.Name, err)
		}
		w.Start()
		if err := pub.run(ctx, cc.Offered*float64(res.Messages)/float64(res.Events)); err != nil {
			return res, err
		}
		if !cc.Floor {
			// The last key comes after the last publish: no polling before.
			watch()
		}
	}
	res.Publish = pub.took
	if err := b.settle(ctx, cc, db, &sc.Expected, &res); err != nil {
		return res, err
	}
	if !cc.noCost {
		if err := b.measureCost(ctx, db, before, costSample(sc.Messages, costSampleOrders), &res); err != nil {
			return res, fmt.Errorf("%s: engine work: %w", cc.Name, err)
		}
	}
	return res, b.measure(ctx, db, &pub.sendLog, started, w, &res)
}

// progressInterval is how often a cell of orderflow counts its keys applied
// to see its CPU window's ends: a query of PostgreSQL's each time, during
// a backlog's drain or an open loop's last moments.
const progressInterval = 100 * time.Millisecond

// watchProgress counts with count every interval until ctx ends or want
// is reached: first runs once the count is above zero, last once it is
// want or more. A failed count is tried again at the next interval.
func watchProgress(ctx context.Context, count func(context.Context) (int, error), want int, interval time.Duration, first, last func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	started := false
	for {
		if n, err := count(ctx); err == nil {
			if n > 0 && !started && first != nil {
				first()
			}
			started = started || n > 0
			if n >= want {
				if last != nil {
					last()
				}
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// appliedKeys counts the keys of the cell's orders (IDs starting with
// prefix) that order_events holds.
func appliedKeys(db *database, prefix string) func(context.Context) (int, error) {
	return func(ctx context.Context) (int, error) {
		var n int
		err := db.DB.WithContext(ctx).Raw(`SELECT count(*) FROM order_events WHERE starts_with(order_id, ?)`, prefix+"-").Row().Scan(&n)
		if err != nil {
			return 0, fmt.Errorf("count the keys applied: %w", err)
		}
		return n, nil
	}
}

// cpuWindowWait bounds the wait for a CPU window's end once the cell
// settled: its reading is under way, or its last key was seen a moment
// ago.
const cpuWindowWait = 2 * time.Second

// closeCell terminates the cell's workflows, once its consumers stopped,
// and drops its database, if it has one (nil: none).
func (b *bench) closeCell(ctx context.Context, cc cellConfig, db *database) {
	if err := b.closeWorkflows(context.WithoutCancel(ctx), cc, db); err != nil {
		slog.Warn("bench: terminate the cell's workflows", "cell", cc.Name, "err", err)
	}
	if db == nil {
		return
	}
	if err := db.Close(); err != nil {
		slog.Warn("bench: drop database", "err", err)
	}
}

// cellScenario is the cell's scenario, expected on topic: generate's, else
// the benchmark's of cc's size, with DESIGN's distortions.
func cellScenario(cc cellConfig, prefix, topic string) (sc *scenario.Scenario, err error) {
	if cc.generate != nil {
		sc, err = cc.generate(prefix)
	} else {
		sc, err = scenario.Generate(scenario.Options{Orders: cc.Orders, Seed: cc.Seed, Prefix: prefix,
			Start: time.Now().UTC().Truncate(time.Second), DupRate: cc.DupRate, Reorder: 0.3, CancelRate: 0.2,
			OpenRate: 0.1, UpdateRate: 0.2, GapRate: 0.05, Conflicts: 5, Bad: 6})
	}
	if err != nil {
		return nil, err
	}
	if sc.Expected.Counts.Events == 0 {
		return nil, fmt.Errorf("%s: the scenario has no valid event", cc.Name)
	}
	sc.Expected.Topic = topic
	return sc, nil
}

// sendLog is a cell's messages, in the order they are sent, when each was
// sent (its publish returned, or its signal was sent: the direct floor),
// when its send began (its last attempt; publishes only) and how long
// sending them all took.
type sendLog struct {
	msgs   []scenario.Message
	sent   []time.Time
	starts []time.Time
	took   time.Duration
}

// newSendLog is the log of msgs, none sent yet.
func newSendLog(msgs []scenario.Message) sendLog {
	return sendLog{msgs: msgs, sent: make([]time.Time, len(msgs)), starts: make([]time.Time, len(msgs))}
}

// publisher publishes a cell's messages and keeps when each send began
// and returned.
type publisher struct {
	sendLog
	p     *mq.Producer
	topic string
	began time.Time // the current send's
}

// Publish sends m, noting when the send began.
func (pub *publisher) Publish(ctx context.Context, m mq.Message) (mq.Receipt, error) {
	pub.began = time.Now()
	return pub.p.Publish(ctx, m)
}

// run publishes every message at rate messages/s (0: as fast as it can).
func (pub *publisher) run(ctx context.Context, rate float64) error {
	begin := time.Now()
	err := scenario.Publish(ctx, pub, pub.msgs, scenario.PublishOptions{Topic: pub.topic, Rate: rate,
		Progress: func(n int) { pub.sent[n-1], pub.starts[n-1] = time.Now(), pub.began }})
	pub.took = time.Since(begin)
	return err
}

// settle waits until the cell's database settled with every invariant
// holding (the floor: its workflows received every event), then counts
// the signals and runs inspect.
func (b *bench) settle(ctx context.Context, cc cellConfig, db *database, exp *scenario.Expected, res *cellResult) error {
	if cc.Floor {
		if err := waitFloor(ctx, b.floor, res.Events, settleWait); err != nil {
			return fmt.Errorf("%s: %w", cc.Name, err)
		}
		b.countSignals(ctx, res)
		return nil
	}
	report, err := check.WaitSettled(ctx, db.DB, exp, check.WaitOptions{
		Wait: settleWait, Interval: 500 * time.Millisecond, Settle: time.Second,
	})
	if err != nil {
		if ctx.Err() != nil {
			// Interrupted: the report would only list what had not settled yet.
			return fmt.Errorf("%s: %w", cc.Name, ctx.Err())
		}
		if report != nil {
			var buf bytes.Buffer
			report.Write(&buf)
			return fmt.Errorf("%s did not settle with every invariant holding: %w\n%s", cc.Name, err, buf.String())
		}
		return err
	}
	res.Verified = report.OK()
	b.countSignals(ctx, res)
	if cc.inspect != nil {
		return cc.inspect(ctx, res)
	}
	return nil
}

// measure computes the cell's rate, CPU use (over w) and, open-loop,
// latencies from its effects and when its messages were sent.
func (b *bench) measure(ctx context.Context, db *database, pub *sendLog, started time.Time, w *cpuWindow, res *cellResult) error {
	var (
		first, last time.Time
		err         error
	)
	if res.Config.Floor {
		_, first, last = b.floor.received()
	} else if first, last, err = effectSpan(ctx, db); err != nil {
		return err
	}
	begin := first
	if res.Config.Offered > 0 {
		begin = pub.sent[0]
		if err := b.openLatencies(ctx, db, pub, res); err != nil {
			return err
		}
	} else {
		res.Startup = first.Sub(started)
	}
	res.Elapsed = last.Sub(begin)
	if res.Elapsed <= 0 {
		return fmt.Errorf("%s: the last effect (%s) is not after the start (%s)", res.Config.Name, last, begin)
	}
	res.Rate = float64(res.Events) / res.Elapsed.Seconds()
	sh, ok, err := w.Share(cpuWindowWait)
	if err != nil {
		slog.Warn("bench: the cell's CPU window", "cell", res.Config.Name, "err", err)
	}
	if ok {
		res.CPU = &sh
	}
	return nil
}

// openLatencies fills an open-loop cell's p50, p99 and tail from when its
// keys were applied: their order_events rows, or the floor's receipts.
func (b *bench) openLatencies(ctx context.Context, db *database, pub *sendLog, res *cellResult) error {
	applied := map[scenario.Key]time.Time{}
	if res.Config.Floor {
		applied = b.floor.applied()
	} else {
		var rows []struct {
			OrderID     string
			Version     int64
			FirstSeenAt time.Time
		}
		if err := db.DB.WithContext(ctx).Raw(`SELECT order_id, version, first_seen_at FROM order_events`).Scan(&rows).Error; err != nil {
			return fmt.Errorf("read order_events: %w", err)
		}
		for _, r := range rows {
			applied[scenario.Key{OrderID: r.OrderID, Version: r.Version}] = r.FirstSeenAt
		}
	}
	lat, last, err := latencies(pub.msgs, pub.sent, applied)
	if err != nil {
		return fmt.Errorf("%s: %w", res.Config.Name, err)
	}
	res.P50, res.P99 = quantile(lat, 0.50), quantile(lat, 0.99)
	res.Tail = max(last.Sub(pub.sent[len(pub.sent)-1]), 0)
	if !res.Config.breakdown {
		return nil
	}
	return b.measureBreakdown(ctx, pub.msgs, pub.starts, applied, res)
}

// startConsumers starts what consumes the cell's topic, the floor's
// worker or orderflow's, then the bridge, and returns how to stop them and
// when the bridge was started: the worker is ready by then.
func (b *bench) startConsumers(ctx context.Context, cc cellConfig, db *database, topic string) (stop func(), started time.Time, err error) {
	tq := uniq.Name("bench-tq")
	common := []string{"-task-queue", tq, "-database-url", db.DSN, "-temporal-address", b.cfg.TemporalAddress,
		"-temporal-namespace", b.cfg.TemporalNamespace}
	// The RocketMQ TLS settings as bench got them, flags included.
	if c := b.cfg; c.RocketMQTLS {
		common = append(common, "-rocketmq-tls=true", "-rocketmq-tls-ca-file", c.RocketMQTLSCAFile,
			"-rocketmq-tls-server-name", c.RocketMQTLSServerName, "-rocketmq-tls-cert-file", c.RocketMQTLSCertFile,
			"-rocketmq-tls-key-file", c.RocketMQTLSKeyFile)
	}
	var stopWorker func()
	if cc.Floor {
		stopWorker, err = startFloorWorker(b.tc, tq, b.floor)
	} else {
		stopWorker, err = b.startProc(ctx, cc.Name+"-worker", b.workerBin, "ORDERFLOW_WORKER_METRICS_ADDR", common, cc.Env)
	}
	if err != nil {
		return nil, started, err
	}
	args := append(slices.Clone(common), "-topic", topic, "-consumer-group", uniq.Name("bench-group"),
		"-rocketmq-namesrv", b.cfg.RocketMQNamesrv)
	args = append(args, bridgeTuning(cc)...)
	started = time.Now()
	stopBridge, err := b.startProc(ctx, cc.Name+"-bridge", b.bridgeBin, "ORDERFLOW_BRIDGE_METRICS_ADDR", append(args, cc.BridgeArgs...), cc.Env)
	if err != nil {
		stopWorker()
		return nil, started, err
	}
	return func() { stopBridge(); stopWorker() }, started, nil
}

// startProc runs bin with args and env added to its environment, logging
// to logDir/name.log, its HTTP endpoints on the free address it gets in
// addrEnv, until /readyz answers.
func (b *bench) startProc(ctx context.Context, name, bin, addrEnv string, args, env []string) (stop func(), err error) {
	base := []string{"ORDERFLOW_LOG_LEVEL=warn"}
	if b.o.goMaxProcs > 0 {
		// Before env, which may set it too (an A B B A's B): the last wins.
		base = append(base, fmt.Sprintf("GOMAXPROCS=%d", b.o.goMaxProcs))
	}
	p := procs.New(procs.Spec{Name: name, Path: bin, Args: args, Env: append(base, env...),
		LogPath: filepath.Join(b.logDir, name+".log"), AddrEnv: addrEnv, Ready: "/readyz", ReadyTimeout: 90 * time.Second})
	if err := p.Start(ctx); err != nil {
		return nil, err
	}
	if strings.HasSuffix(name, "-bridge") {
		b.bridgeMetrics = p.Addr()
	}
	return func() { _, _, _ = p.Stop(40 * time.Second) }, nil
}

// countSignals reads Signals from the bridge's /metrics, keeping the
// text in logDir.
func (b *bench) countSignals(ctx context.Context, res *cellResult) {
	text, err := get(ctx, "http://"+b.bridgeMetrics+"/metrics")
	if err == nil {
		_ = os.WriteFile(filepath.Join(b.logDir, res.Config.Name+"-bridge.metrics.txt"), []byte(text), 0o644)
		var n float64
		n, err = promSum(text, "temporal_request_total", "operation", "SignalWithStartWorkflowExecution")
		res.Signals = int(n)
	}
	if err != nil {
		slog.Warn("bench: bridge metrics", "err", err)
	}
}

// promSum adds the values of metric's samples that have the label
// name=value, in Prometheus text format.
func promSum(text, metric, name, value string) (float64, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return 0, err
	}
	var total float64
	for _, m := range families[metric].GetMetric() {
		if slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == name && l.GetValue() == value }) {
			total += m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
		}
	}
	return total, nil
}

// effectSpan is the time of the first and last database effects: a key
// recorded, a points row inserted or a message parked.
func effectSpan(ctx context.Context, db *database) (first, last time.Time, err error) {
	err = db.DB.WithContext(ctx).Raw(`SELECT LEAST(
		(SELECT min(first_seen_at) FROM order_events),
		(SELECT min(created_at) FROM points_ledger),
		(SELECT min(first_seen_at) FROM dead_letters)), GREATEST(
		(SELECT max(first_seen_at) FROM order_events),
		(SELECT max(created_at) FROM points_ledger),
		(SELECT max(first_seen_at) FROM dead_letters))`).Row().Scan(&first, &last)
	if err != nil {
		return first, last, fmt.Errorf("first and last effect: %w", err)
	}
	return first, last, nil
}

// closeWorkflows terminates the order workflows of a measured cell that
// still run: left running, their timers would fire during later cells,
// with no worker left to run their tasks.
func (b *bench) closeWorkflows(ctx context.Context, cc cellConfig, db *database) error {
	ids, err := b.cellOrders(ctx, cc.Floor, db)
	if err != nil {
		return fmt.Errorf("list the cell's orders: %w", err)
	}
	var g errgroup.Group
	g.SetLimit(16)
	for _, id := range ids {
		g.Go(func() error {
			err := b.tc.TerminateWorkflow(ctx, api.WorkflowID(id), "", "benchmark cell measured")
			var nf *serviceerror.NotFound // completed already, or never started
			if err != nil && !errors.As(err, &nf) {
				return fmt.Errorf("terminate %s: %w", api.WorkflowID(id), err)
			}
			return nil
		})
	}
	return g.Wait()
}

// cellOrders are the orders that reached Temporal in the cell: those with
// a row in order_events, or those the floor heard of.
func (b *bench) cellOrders(ctx context.Context, floor bool, db *database) ([]string, error) {
	if floor {
		return b.floor.orders(), nil
	}
	var ids []string
	err := db.DB.WithContext(ctx).Raw(`SELECT DISTINCT order_id FROM order_events`).Scan(&ids).Error
	return ids, err
}

// bridgeTuning is the bridge's -concurrency and -batch-size of the cell,
// each left out when the cell's environment sets its variable (an A B B
// A experiment's B), so that the variable takes effect.
func bridgeTuning(cc cellConfig) []string {
	var args []string
	for _, f := range []struct {
		flag, env string
		v         int
	}{
		{"-concurrency", "ORDERFLOW_BRIDGE_CONCURRENCY", cc.Concurrency},
		{"-batch-size", "ORDERFLOW_BRIDGE_BATCH_SIZE", cc.BatchSize},
	} {
		if !slices.ContainsFunc(cc.Env, func(kv string) bool { return strings.HasPrefix(kv, f.env+"=") }) {
			args = append(args, f.flag, strconv.Itoa(f.v))
		}
	}
	return args
}
