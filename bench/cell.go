package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/orderflow/orderflow/check"
	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/internal/procs"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/scenario"
)

// cellConfig is one measured run: a fresh scenario on a fresh topic and
// consumer group and a fresh database, consumed either by orderflow (bridge
// and worker processes) or by the direct consumer.
//
// A cell runs in one of two modes. By default it drains a backlog: the
// whole scenario is published before the consumers start, so the rate is the
// consumers' and not the publisher's. With Offered > 0 it is open-loop: the
// consumers start first, one warm-up event goes through, then the scenario
// is published at a steady rate whatever the consumers do, and the latency
// of each business key is measured.
type cellConfig struct {
	Name        string
	Orders      int
	Concurrency int // bridge (or direct consumer) goroutines
	BatchSize   int
	Workers     int  // worker processes (orderflow only)
	Direct      bool // the direct-consumer baseline instead of orderflow
	Seed        int64
	// DupRate is the scenario's share of messages sent twice.
	DupRate float64
	// Offered, when > 0, runs the cell open-loop at this many distinct
	// events per second (duplicates, conflicts and bad messages come on
	// top, in the scenario's proportions).
	Offered float64 `json:",omitempty"`
	// Fraction is Offered as a share of the e2e backlog rate.
	Fraction float64 `json:",omitempty"`
	// BridgeArgs are extra flags of this cell's bridge.
	BridgeArgs []string `json:",omitempty"`
	// Floor runs the engine's floor (floorWorkflow, in the benchmark's
	// process) behind the bridge instead of orderflow's worker processes.
	Floor bool `json:",omitempty"`
	// generate, when set, builds the scenario instead of scenarioOptions.
	generate func(prefix string) (*scenario.Scenario, error)
	// inspect, when set, runs once the cell settled, while its consumers
	// still run (a query needs a worker).
	inspect func(ctx context.Context, r *cellResult) error
}

// cellResult is what one cell measured. Rates count distinct valid events
// (business keys), the unit the baseline and orderflow share.
type cellResult struct {
	Config cellConfig
	// Prefix starts the run's order IDs.
	Prefix     string
	Messages   int // published, duplicates, conflicts and bad messages included
	Events     int // distinct valid business keys
	Duplicates int
	// Publish is how long publishing took.
	Publish time.Duration
	// Startup is, for a backlog, the time from the consumer's start to its
	// first database effect (process start, connections, rebalance).
	Startup time.Duration `json:",omitempty"`
	// Elapsed is, for a backlog, the time from the first database effect
	// to the last; open-loop, from the first publish to the last effect.
	Elapsed time.Duration
	// Rate is distinct events per second over Elapsed; MessageRate the
	// same for every message published.
	Rate, MessageRate float64
	// PublishRate is the rate the open-loop publisher kept, in messages/s.
	PublishRate float64 `json:",omitempty"`
	// P50, P95 and P99 are the open-loop latencies from a business key's
	// first publish to its order_events row.
	P50, P95, P99 time.Duration `json:",omitempty"`
	Verified      bool
	// Hot is what the hot-order cell found in Temporal.
	Hot *hotResult `json:",omitempty"`
	// Signals counts the bridge's SignalWithStart requests (attempts
	// included) and WorkflowTasks the workflow tasks the workers ran; 0
	// for the direct consumer.
	Signals       int `json:",omitempty"`
	WorkflowTasks int `json:",omitempty"`
	// CPU is the machine's CPU use by process group over the drain (a
	// backlog's first to last effect, an open loop's first publish to
	// last effect), from the samples that enclose it.
	CPU *cpuShare `json:",omitempty"`
	// Cost is the engine's work per event; nil for the direct consumer.
	Cost *engineCost `json:",omitempty"`
}

// scenarioOptions are the benchmark's scenario: DESIGN's distortions with
// dupRate duplicates (the e2e and baseline runs use 20%).
func scenarioOptions(orders int, seed int64, prefix string, dupRate float64) scenario.Options {
	return scenario.Options{
		Orders: orders, Seed: seed, Prefix: prefix, Start: time.Now().UTC().Truncate(time.Second),
		DupRate: dupRate, Reorder: 0.3, CancelRate: 0.2, OpenRate: 0.1, UpdateRate: 0.2, GapRate: 0.05,
		Conflicts: 5, Bad: 6,
	}
}

// runCell runs one cell from a fresh topic, group, task queue and database
// until every order settled, and checks the invariants.
func (b *bench) runCell(ctx context.Context, cc cellConfig) (cellResult, error) {
	res := cellResult{Config: cc, Prefix: uniq.Name("b")}
	if cc.Floor {
		b.floor = newFloorTracker()
	}
	db, err := newDatabase(ctx, b.cfg.DatabaseURL)
	if err != nil {
		return res, err
	}
	defer b.closeCell(ctx, cc, db)
	topic := uniq.Name("bench-events")
	if err := createTopic(ctx, b.namesrv, b.broker, topic, 8); err != nil {
		return res, err
	}
	sc, err := cellScenario(cc, res.Prefix, topic)
	if err != nil {
		return res, err
	}
	c := sc.Expected.Counts
	res.Messages, res.Events, res.Duplicates = c.Messages, c.Events, c.Duplicates
	p, err := mq.NewProducer(b.cfg.RocketMQNamesrv, mq.WithProducerGroup(uniq.Name("bench-pub")))
	if err != nil {
		return res, err
	}
	defer p.Close()
	pub := &publisher{p: p, topic: topic, msgs: sc.Messages, sent: make([]time.Time, len(sc.Messages))}
	if cc.Offered <= 0 {
		// A backlog: everything is in the broker before a consumer starts.
		if err := pub.run(ctx, 0); err != nil {
			return res, err
		}
	}
	var before costCounters
	if !cc.Direct {
		if before, err = readCounters(ctx, b.engineMetrics, b.cfg.TemporalNamespace, "", db); err != nil {
			return res, err
		}
	}
	stop, started, err := b.startConsumers(ctx, cc, db, topic, uniq.Name("bench-group"), uniq.Name("bench-tq"))
	if err != nil {
		return res, err
	}
	defer stop()
	if cc.Offered > 0 {
		if err := pub.openLoop(ctx, cc, db, &res); err != nil {
			return res, err
		}
	}
	res.Publish = pub.took
	if err := b.settle(ctx, cc, db, &sc.Expected, &res); err != nil {
		return res, err
	}
	if !cc.Direct {
		if err := b.measureCost(ctx, db, before, costSample(sc.Messages, costSampleOrders), &res); err != nil {
			return res, fmt.Errorf("%s: engine work: %w", cc.Name, err)
		}
	}
	return res, b.measure(ctx, db, pub, started, &res)
}

// closeCell terminates the cell's workflows that still run, once its
// consumers stopped, and drops its database: the workflows must not
// outlive it.
func (b *bench) closeCell(ctx context.Context, cc cellConfig, db *database) {
	if !cc.Direct {
		began := time.Now()
		n, t, err := b.closeWorkflows(context.WithoutCancel(ctx), cc, db)
		if err != nil {
			slog.Warn("bench: terminate the cell's workflows", "cell", cc.Name, "err", err)
		}
		if b.cleanup != nil {
			b.cleanup.add(n, t, time.Since(began))
		}
	}
	if err := db.Close(); err != nil {
		slog.Warn("bench: drop database", "err", err)
	}
}

// cellScenario is the cell's scenario (generate, else the benchmark's
// scenario of cc's size), expected on topic.
func cellScenario(cc cellConfig, prefix, topic string) (*scenario.Scenario, error) {
	generate := cc.generate
	if generate == nil {
		generate = func(prefix string) (*scenario.Scenario, error) {
			return scenario.Generate(scenarioOptions(cc.Orders, cc.Seed, prefix, cc.DupRate))
		}
	}
	sc, err := generate(prefix)
	if err != nil {
		return nil, err
	}
	if sc.Expected.Counts.Events == 0 {
		return nil, fmt.Errorf("%s: the scenario has no valid event", cc.Name)
	}
	sc.Expected.Topic = topic
	return sc, nil
}

// publisher publishes a cell's messages and keeps when each send returned.
type publisher struct {
	p     *mq.Producer
	topic string
	msgs  []scenario.Message
	sent  []time.Time
	took  time.Duration
}

// run publishes every message at rate messages/s (0: as fast as it can).
func (pub *publisher) run(ctx context.Context, rate float64) error {
	begin := time.Now()
	err := scenario.Publish(ctx, pub.p, pub.msgs, scenario.PublishOptions{Topic: pub.topic, Rate: rate,
		Progress: func(n int) { pub.sent[n-1] = time.Now() }})
	pub.took = time.Since(begin)
	return err
}

// openLoop waits until one event of another prefix went through the live
// pipeline, then publishes at the cell's offered rate (duplicates,
// conflicts and bad messages on top) and records the rate it kept.
func (pub *publisher) openLoop(ctx context.Context, cc cellConfig, db *database, res *cellResult) error {
	if err := warmUp(ctx, pub.p, db, pub.topic); err != nil {
		return fmt.Errorf("%s: %w", cc.Name, err)
	}
	if err := pub.run(ctx, cc.Offered*float64(res.Messages)/float64(res.Events)); err != nil {
		return err
	}
	if d := pub.sent[len(pub.sent)-1].Sub(pub.sent[0]); d > 0 {
		res.PublishRate = float64(len(pub.sent)-1) / d.Seconds()
	}
	return nil
}

// settle waits until the cell's database settled with every invariant
// holding (the floor: until its workflows received every event), then
// reads what Temporal and the processes say of the cell.
func (b *bench) settle(ctx context.Context, cc cellConfig, db *database, exp *scenario.Expected, res *cellResult) error {
	if cc.Floor {
		if err := waitFloor(ctx, b.floor, res.Events, b.settleWait); err != nil {
			return fmt.Errorf("%s: %w", cc.Name, err)
		}
		b.countRequests(ctx, res)
		return nil
	}
	report, err := check.WaitSettled(ctx, db.DB, exp, check.WaitOptions{
		Wait: b.settleWait, Interval: 500 * time.Millisecond, Settle: time.Second,
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
	if !cc.Direct {
		b.countRequests(ctx, res)
	}
	if cc.inspect != nil {
		if err := cc.inspect(ctx, res); err != nil {
			return err
		}
	}
	return nil
}

// measure computes the cell's rates, CPU use and, open-loop, latencies
// from its database effects. A backlog's clock starts at the first effect
// (Startup is reported apart); an open loop's at the first publish.
func (b *bench) measure(ctx context.Context, db *database, pub *publisher, started time.Time, res *cellResult) error {
	var (
		first, last time.Time
		err         error
	)
	if res.Config.Floor {
		_, first, last = b.floor.received()
	} else if first, last, err = effectSpan(ctx, db); err != nil {
		return err
	}
	open := res.Config.Offered > 0
	begin := first
	if open {
		begin = pub.sent[0]
	} else {
		res.Startup = first.Sub(started)
	}
	res.Elapsed = last.Sub(begin)
	if res.Elapsed <= 0 {
		return fmt.Errorf("%s: the last effect (%s) is not after the start (%s)", res.Config.Name, last, begin)
	}
	res.Rate = float64(res.Events) / res.Elapsed.Seconds()
	res.MessageRate = float64(res.Messages) / res.Elapsed.Seconds()
	if b.cpu != nil {
		if sh, ok := b.cpu.Window(begin, last); ok {
			res.CPU = &sh
		}
	}
	if open {
		lat, err := latencies(ctx, db, pub.msgs, pub.sent)
		if err != nil {
			return err
		}
		res.P50, res.P95, res.P99 = quantile(lat, 0.50), quantile(lat, 0.95), quantile(lat, 0.99)
	}
	return nil
}

// startConsumers starts what consumes the cell's topic and returns how to
// stop it and when the consumer of the topic (the bridge or the direct
// consumer) was started: the worker processes are ready by then.
func (b *bench) startConsumers(ctx context.Context, cc cellConfig, db *database, topic, group, tq string) (stop func(), started time.Time, err error) {
	if cc.Direct {
		started = time.Now()
		d, err := startDirect(ctx, db.DSN, b.cfg.RocketMQNamesrv, topic, group, cc.Concurrency, cc.BatchSize)
		if err != nil {
			return nil, started, err
		}
		return d.Stop, started, nil
	}
	var running []func()
	stopAll := func() {
		// Bridge first (it was started last), then the workers.
		for i := len(running) - 1; i >= 0; i-- {
			running[i]()
		}
	}
	b.metricsAddrs = map[string]string{}
	// start runs bin with args, its JSON logs going to logDir/name.log, its
	// HTTP endpoints on a free address passed through addrEnv, and waits
	// until its /readyz answers 200.
	start := func(name, bin, addrEnv string, args []string) error {
		p := procs.New(procs.Spec{Name: name, Path: bin, Args: args, Env: []string{"ORDERFLOW_LOG_LEVEL=warn"},
			LogPath: filepath.Join(b.logDir, name+".log"), AddrEnv: addrEnv, Ready: "/readyz", ReadyTimeout: 90 * time.Second})
		if err := p.Start(ctx); err != nil {
			stopAll()
			return err
		}
		running = append(running, func() { _, _, _ = p.Stop(40 * time.Second) })
		b.metricsAddrs[name] = p.Addr()
		return nil
	}
	common := []string{"-task-queue", tq, "-database-url", db.DSN, "-temporal-address", b.cfg.TemporalAddress,
		"-temporal-namespace", b.cfg.TemporalNamespace}
	if cc.Floor {
		stopFloor, err := startFloorWorker(b.tc, tq, b.floor)
		if err != nil {
			return nil, started, err
		}
		running = append(running, stopFloor)
	}
	for i := 0; i < cc.Workers && !cc.Floor; i++ {
		args := append(slices.Clone(common), b.workerArgs...)
		if err := start(fmt.Sprintf("%s-worker%d", cc.Name, i+1), b.workerBin, "ORDERFLOW_WORKER_METRICS_ADDR", args); err != nil {
			return nil, started, err
		}
	}
	args := append(slices.Clone(common), "-topic", topic, "-consumer-group", group,
		"-rocketmq-namesrv", b.cfg.RocketMQNamesrv,
		"-concurrency", strconv.Itoa(cc.Concurrency), "-batch-size", strconv.Itoa(cc.BatchSize))
	args = append(args, b.bridgeArgs...)
	args = append(args, cc.BridgeArgs...)
	started = time.Now()
	if err := start(cc.Name+"-bridge", b.bridgeBin, "ORDERFLOW_BRIDGE_METRICS_ADDR", args); err != nil {
		return nil, started, err
	}
	return stopAll, started, nil
}

// fetch writes the body of url to path.
func fetch(ctx context.Context, url, path string) error {
	body, err := get(ctx, url)
	if err != nil {
		return err
	}
	return os.WriteFile(path, []byte(body), 0o644)
}

// countRequests reads, from the processes' /metrics once the cell settled
// (each kept in logDir), the bridge's SignalWithStart requests and the
// workflow tasks the workers ran (Temporal's SDK metrics).
func (b *bench) countRequests(ctx context.Context, res *cellResult) {
	for name, addr := range b.metricsAddrs {
		path := filepath.Join(b.logDir, name+".metrics.txt")
		if err := fetch(ctx, "http://"+addr+"/metrics", path); err != nil {
			slog.Warn("bench: metrics", "process", name, "err", err)
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		if strings.HasSuffix(name, "-bridge") {
			res.Signals += int(promSum(string(data), "temporal_request_total", `operation="SignalWithStartWorkflowExecution"`))
		} else {
			res.WorkflowTasks += int(promSum(string(data), "temporal_workflow_task_execution_latency_seconds_count", ""))
		}
	}
}

// promSum adds the values of the samples of metric whose labels contain
// filter, in Prometheus text format.
func promSum(text, metric, filter string) float64 {
	var total float64
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, metric+"{") && !strings.HasPrefix(line, metric+" ") {
			continue
		}
		if filter != "" && !strings.Contains(line, filter) {
			continue
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			total += v
		}
	}
	return total
}

// effectSpan is the time of the run's first and last database effects:
// the earliest and latest business key recorded, points row inserted or
// message parked.
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

// latencies returns, sorted, the time from each business key's first
// publish (the producer's send returned) to its order_events row
// (first_seen_at: the start of the transaction that recorded it; the same
// host's clock).
func latencies(ctx context.Context, db *database, msgs []scenario.Message, sent []time.Time) ([]time.Duration, error) {
	published := make(map[scenario.Key]time.Time, len(msgs))
	for i, m := range msgs {
		if m.Kind == scenario.KindBad {
			continue
		}
		k := m.Event.Key()
		if t, ok := published[k]; !ok || sent[i].Before(t) {
			published[k] = sent[i]
		}
	}
	rows, err := db.DB.WithContext(ctx).Raw(`SELECT order_id, version, first_seen_at FROM order_events`).Rows()
	if err != nil {
		return nil, fmt.Errorf("read order_events: %w", err)
	}
	defer rows.Close()
	var lat []time.Duration
	for rows.Next() {
		var (
			k scenario.Key
			t time.Time
		)
		if err := rows.Scan(&k.OrderID, &k.Version, &t); err != nil {
			return nil, fmt.Errorf("read order_events: %w", err)
		}
		if p, ok := published[k]; ok {
			lat = append(lat, max(t.Sub(p), 0))
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read order_events: %w", err)
	}
	if len(lat) != len(published) {
		return nil, fmt.Errorf("%d of %d published business keys recorded", len(lat), len(published))
	}
	slices.Sort(lat)
	return lat, nil
}

// quantile returns the q-quantile (nearest rank) of sorted, 0 when empty.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
