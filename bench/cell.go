package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
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
type cellConfig struct {
	Name        string
	Orders      int
	Concurrency int // bridge (or direct consumer) goroutines
	BatchSize   int
	Workers     int  // worker processes (orderflow only)
	Direct      bool // the direct-consumer baseline instead of orderflow
	Seed        int64
	Profile     bool // capture CPU profiles of the first worker and the bridge
}

// cellResult is what one cell measured.
type cellResult struct {
	Config   cellConfig
	Messages int // published, duplicates, conflicts and bad messages included
	Events   int // distinct valid business keys
	Elapsed  time.Duration
	Rate     float64 // messages per second, first publish to last effect
	Publish  time.Duration
	P50, P99 time.Duration // publish to first_seen_at of each business key
	Verified bool
	// Metrics are a few of Temporal's SDK metrics of the run's processes
	// (mean seconds), when it was profiled.
	Metrics map[string]float64 `json:",omitempty"`
}

// scenarioOptions are the benchmark's scenario: DESIGN's distortions with
// 20% duplicates.
func scenarioOptions(orders int, seed int64, prefix string) scenario.Options {
	return scenario.Options{
		Orders: orders, Seed: seed, Prefix: prefix, Start: time.Now().UTC().Truncate(time.Second),
		DupRate: 0.2, Reorder: 0.3, CancelRate: 0.2, OpenRate: 0.1, UpdateRate: 0.2, GapRate: 0.05,
		Conflicts: 5, Bad: 6,
	}
}

// runCell runs one cell from a fresh topic, group, task queue and database
// until every order settled, and checks the invariants.
func (b *bench) runCell(ctx context.Context, cc cellConfig) (cellResult, error) {
	res := cellResult{Config: cc}
	db, err := newDatabase(ctx, b.cfg.DatabaseURL)
	if err != nil {
		return res, err
	}
	defer func() {
		if err := db.Close(); err != nil {
			slog.Warn("bench: drop database", "err", err)
		}
	}()
	topic := uniq.Name("bench-events")
	group := uniq.Name("bench-group")
	tq := uniq.Name("bench-tq")
	prefix := uniq.Name("b")
	if err := createTopic(ctx, b.namesrv, b.broker, topic, 8); err != nil {
		return res, err
	}
	sc, err := scenario.Generate(scenarioOptions(cc.Orders, cc.Seed, prefix))
	if err != nil {
		return res, err
	}
	exp := sc.Expected
	exp.Topic = topic
	res.Messages, res.Events = exp.Counts.Messages, exp.Counts.Events

	// Consumers first, so that consumption overlaps publishing.
	stop, pprofAddrs, err := b.startConsumers(ctx, cc, db, topic, group, tq)
	if err != nil {
		return res, err
	}
	defer stop()
	profiled := b.captureProfiles(ctx, cc.Name, pprofAddrs)
	defer profiled()

	p, err := mq.NewProducer(b.cfg.RocketMQNamesrv, mq.WithProducerGroup(uniq.Name("bench-pub")))
	if err != nil {
		return res, err
	}
	defer p.Close()
	sent := make([]time.Time, len(sc.Messages))
	begin := time.Now()
	err = scenario.Publish(ctx, p, sc.Messages, scenario.PublishOptions{Topic: topic, Progress: func(n int) {
		sent[n-1] = time.Now()
	}})
	if err != nil {
		return res, err
	}
	res.Publish = time.Since(begin)

	report, err := check.WaitSettled(ctx, db.DB, &exp, check.WaitOptions{
		Wait: b.settleWait, Interval: 500 * time.Millisecond, Settle: time.Second,
	})
	if err != nil {
		if report != nil {
			var buf bytes.Buffer
			report.Write(&buf)
			return res, fmt.Errorf("%s did not settle with every invariant holding: %w\n%s", cc.Name, err, buf.String())
		}
		return res, err
	}
	res.Verified = report.OK()
	if cc.Profile {
		res.Metrics = b.saveMetrics(ctx)
	}

	last, err := lastEffect(ctx, db)
	if err != nil {
		return res, err
	}
	res.Elapsed = last.Sub(begin)
	if res.Elapsed <= 0 {
		return res, fmt.Errorf("%s: last effect %s precedes the first publish %s", cc.Name, last, begin)
	}
	res.Rate = float64(res.Messages) / res.Elapsed.Seconds()
	res.P50, res.P99, err = latencies(ctx, db, sc.Messages, sent)
	return res, err
}

// startConsumers starts what consumes the cell's topic and returns how to
// stop it, and the pprof addresses of the processes it profiles.
func (b *bench) startConsumers(ctx context.Context, cc cellConfig, db *database, topic, group, tq string) (func(), map[string]string, error) {
	if cc.Direct {
		d, err := startDirect(ctx, db.DSN, b.cfg.RocketMQNamesrv, topic, group, cc.Concurrency, cc.BatchSize)
		if err != nil {
			return nil, nil, err
		}
		return d.Stop, nil, nil
	}
	pprofAddrs := map[string]string{}
	pprofFlag := func(name string) []string {
		if !cc.Profile {
			return nil
		}
		addr, err := procs.FreeAddr()
		if err != nil {
			return nil
		}
		pprofAddrs[name] = addr
		return []string{"-pprof-addr", addr}
	}
	var started []*procs.Proc
	stopAll := func() {
		// Bridge first (it was started last), then the workers.
		for i := len(started) - 1; i >= 0; i-- {
			_, _, _ = started[i].Stop(40 * time.Second)
		}
	}
	metricsAddrs := map[string]string{}
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
		started = append(started, p)
		metricsAddrs[name] = p.Addr()
		return nil
	}
	common := []string{"-task-queue", tq, "-database-url", db.DSN, "-temporal-address", b.cfg.TemporalAddress,
		"-temporal-namespace", b.cfg.TemporalNamespace}
	for i := 0; i < cc.Workers; i++ {
		args := append(slices.Clone(common), b.tuning.workerFlags()...)
		args = append(args, b.workerArgs...)
		name := fmt.Sprintf("%s-worker%d", cc.Name, i+1)
		if i == 0 {
			args = append(args, pprofFlag(name)...)
		}
		if err := start(name, b.workerBin, "ORDERFLOW_WORKER_METRICS_ADDR", args); err != nil {
			return nil, nil, err
		}
	}
	args := append(slices.Clone(common), "-topic", topic, "-consumer-group", group,
		"-rocketmq-namesrv", b.cfg.RocketMQNamesrv,
		"-concurrency", strconv.Itoa(cc.Concurrency), "-batch-size", strconv.Itoa(cc.BatchSize))
	args = append(args, b.bridgeArgs...)
	args = append(args, pprofFlag(cc.Name+"-bridge")...)
	if err := start(cc.Name+"-bridge", b.bridgeBin, "ORDERFLOW_BRIDGE_METRICS_ADDR", args); err != nil {
		return nil, nil, err
	}
	b.metricsAddrs = metricsAddrs
	return stopAll, pprofAddrs, nil
}

// profileSeconds is the length of the CPU profiles captured under load.
const profileSeconds = 15

// captureProfiles fetches a CPU profile from each pprof address in the
// background, starting now, into logDir/<name>.cpu.pprof; the returned
// function waits for them.
func (b *bench) captureProfiles(ctx context.Context, cell string, addrs map[string]string) func() {
	var wg sync.WaitGroup
	for name, addr := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := filepath.Join(b.logDir, name+".cpu.pprof")
			if err := fetch(ctx, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, profileSeconds), path); err != nil {
				slog.Warn("bench: CPU profile", "process", name, "err", err)
			}
		}()
	}
	return wg.Wait
}

// fetch writes the body of url to path.
func fetch(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// sdkMeans are the SDK histograms whose means the profiled run reports:
// the bridge's SignalWithStart call, and the worker's workflow task
// schedule-to-start, execution and local activity latencies.
var sdkMeans = []struct{ process, metric, filter string }{
	{"bridge", "temporal_request_latency_seconds", `operation="SignalWithStartWorkflowExecution"`},
	{"worker1", "temporal_workflow_task_schedule_to_start_latency_seconds", ""},
	{"worker1", "temporal_workflow_task_execution_latency_seconds", ""},
	{"worker1", "temporal_request_latency_seconds", `operation="RespondWorkflowTaskCompleted"`},
	{"worker1", "temporal_local_activity_execution_latency_seconds", ""},
	{"worker1", "temporal_activity_execution_latency_seconds", ""},
}

// saveMetrics writes each process's /metrics into logDir and returns the
// means of sdkMeans, keyed "process:metric".
func (b *bench) saveMetrics(ctx context.Context) map[string]float64 {
	out := map[string]float64{}
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
		for _, m := range sdkMeans {
			if !strings.HasSuffix(name, m.process) {
				continue
			}
			sum := promSum(string(data), m.metric+"_sum", m.filter)
			n := promSum(string(data), m.metric+"_count", m.filter)
			if n > 0 {
				out[m.process+":"+m.metric] = sum / n
				out[m.process+":"+m.metric+"_count"] = n
			}
		}
	}
	return out
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

// lastEffect is the time of the run's last database effect: the latest
// business key recorded, points row inserted or message parked.
func lastEffect(ctx context.Context, db *database) (time.Time, error) {
	var t time.Time
	err := db.DB.WithContext(ctx).Raw(`SELECT GREATEST(
		(SELECT max(first_seen_at) FROM order_events),
		(SELECT max(created_at) FROM points_ledger),
		(SELECT max(first_seen_at) FROM dead_letters))`).Row().Scan(&t)
	if err != nil {
		return t, fmt.Errorf("last effect: %w", err)
	}
	return t, nil
}

// latencies returns the median and 99th percentile of the time from a
// business key's first publish to its order_events row (first_seen_at: the
// start of the transaction that recorded it).
func latencies(ctx context.Context, db *database, msgs []scenario.Message, sent []time.Time) (p50, p99 time.Duration, err error) {
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
		return 0, 0, fmt.Errorf("read order_events: %w", err)
	}
	defer rows.Close()
	var lat []time.Duration
	for rows.Next() {
		var (
			k scenario.Key
			t time.Time
		)
		if err := rows.Scan(&k.OrderID, &k.Version, &t); err != nil {
			return 0, 0, err
		}
		if p, ok := published[k]; ok {
			lat = append(lat, max(t.Sub(p), 0))
		}
	}
	if err := rows.Err(); err != nil {
		return 0, 0, err
	}
	if len(lat) == 0 {
		return 0, 0, errors.New("no business key recorded")
	}
	slices.Sort(lat)
	q := func(f float64) time.Duration { return lat[min(len(lat)-1, int(f*float64(len(lat))))] }
	return q(0.50), q(0.99), nil
}
