package main

// The broker's flush cost: what SYNC_FLUSH (a message is on disk before the
// producer's send is acknowledged) costs against ASYNC_FLUSH, measured in one
// run on two temporary RocketMQ name servers and brokers that
// scripts/stack.sh starts beside the stack's own, with the same settings but
// flushDiskType. Each is read back from the running broker (mqadmin
// getBrokerConfig) before anything is measured.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/scenario"
)

// The two flush types, as broker.conf spells them.
const (
	asyncFlush = "ASYNC_FLUSH"
	syncFlush  = "SYNC_FLUSH"
)

// flushPlan is what the flush step measures (flags -flush...).
type flushPlan struct {
	Enabled bool
	// Messages is how many messages each send measurement sends to each
	// broker; Senders how many goroutines send at once in the concurrent one.
	Messages, Senders int
	// Orders is the size of the e2e backlog drained on each broker (0: the
	// e2e phase's -orders). The default, 300 orders (about 1,500 events),
	// is smaller than the e2e phase's 1,100: two full drains would add
	// about two minutes to a run that must stay within 20.
	Orders int
	// AsyncPorts and SyncPorts are each temporary stack's name server and
	// broker ports.
	AsyncPorts, SyncPorts []int
}

// checkPorts rejects port lists that are not two ports each, or that
// overlap: a broker also takes the port two below its own and the one
// above (scripts/stack.sh).
func (p flushPlan) checkPorts() error {
	seen := map[int]bool{}
	for name, ports := range map[string][]int{"flush-async-ports": p.AsyncPorts, "flush-sync-ports": p.SyncPorts} {
		if len(ports) != 2 {
			return fmt.Errorf("-%s must be a name server port and a broker port, got %v", name, ports)
		}
		for _, q := range []int{ports[0], ports[1] - 2, ports[1], ports[1] + 1} {
			if q < 1 || q > 65535 {
				return fmt.Errorf("-%s: port %d out of range", name, q)
			}
			if seen[q] {
				return fmt.Errorf("-flush-async-ports and -flush-sync-ports overlap on port %d (a broker also takes its port - 2 and + 1)", q)
			}
			seen[q] = true
		}
	}
	return nil
}

// flushBroker is one temporary RocketMQ name server and broker (the single
// profile of scripts/stack.sh) in a data folder of its own.
type flushBroker struct {
	Flush       string `json:"flush_disk_type"`
	Data        string `json:"data"`
	NamesrvPort int    `json:"namesrv_port"`
	BrokerPort  int    `json:"broker_port"`
	script      string
	logPath     string // scripts/stack.sh's output
}

func newFlushBroker(root, logDir, flush string, ports []int) *flushBroker {
	kind := strings.ToLower(strings.TrimSuffix(flush, "_FLUSH"))
	return &flushBroker{Flush: flush, NamesrvPort: ports[0], BrokerPort: ports[1],
		Data:    filepath.Join(root, ".data", "bench-"+kind+"-flush"),
		script:  filepath.Join(root, "scripts", "stack.sh"),
		logPath: filepath.Join(logDir, "flush-"+kind+"-stack.log")}
}

func (f *flushBroker) namesrv() string { return "127.0.0.1:" + strconv.Itoa(f.NamesrvPort) }
func (f *flushBroker) broker() string  { return "127.0.0.1:" + strconv.Itoa(f.BrokerPort) }

// env is scripts/stack.sh's environment for this broker: the variables that
// pick the data folder, the ports, the profile and the flush type override
// any the benchmark inherited (exec keeps the last of duplicate keys).
func (f *flushBroker) env() []string {
	return append(os.Environ(), "ORDERFLOW_DATA="+f.Data, "ORDERFLOW_ROCKETMQ_PROFILE=single",
		"ORDERFLOW_NAMESRV_PORT="+strconv.Itoa(f.NamesrvPort), "ORDERFLOW_BROKER_PORT="+strconv.Itoa(f.BrokerPort),
		"ORDERFLOW_BROKER_IP=127.0.0.1", "ORDERFLOW_BROKER_FLUSH="+f.Flush)
}

// stack runs scripts/stack.sh with args for this broker, appending its
// output to the broker's log in the benchmark's log directory.
func (f *flushBroker) stack(ctx context.Context, args ...string) (string, error) {
	out, err := runStack(ctx, f.script, f.env(), f.logPath, args...)
	if err != nil {
		return out, fmt.Errorf("%s broker: %w", f.Flush, err)
	}
	return out, nil
}

// runStack runs scripts/stack.sh (script) with args and env, appending its
// output to logPath, and returns the output.
func runStack(ctx context.Context, script string, env []string, logPath string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, script, args...)
	cmd.Env = env
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	began := time.Now()
	err := cmd.Run()
	if lf, lerr := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); lerr == nil {
		fmt.Fprintf(lf, "=== %s scripts/stack.sh %s\n", began.UTC().Format(time.RFC3339), strings.Join(args, " "))
		_, _ = lf.Write(buf.Bytes())
		fmt.Fprintf(lf, "=== took %s, error: %v\n", time.Since(began).Round(100*time.Millisecond), err)
		_ = lf.Close()
	}
	if err != nil {
		return buf.String(), fmt.Errorf("scripts/stack.sh %s: %w\n%s", strings.Join(args, " "), err, lastLines(buf.String(), 5))
	}
	return buf.String(), nil
}

// reset stops what may run from this broker's data folder (a run that was
// killed) and removes the folder, so that every run starts from an empty
// store, then checks that nothing else holds its ports.
func (f *flushBroker) reset(ctx context.Context) error {
	if _, err := f.stack(ctx, "down", "rocketmq"); err != nil {
		return err
	}
	if err := os.RemoveAll(f.Data); err != nil {
		return err
	}
	for _, p := range []int{f.NamesrvPort, f.BrokerPort - 2, f.BrokerPort, f.BrokerPort + 1} {
		if dialCheck("", "127.0.0.1:"+strconv.Itoa(p)) == nil {
			return fmt.Errorf("the %s broker's port %d is taken by another program (set -flush-async-ports / -flush-sync-ports, or -flush=false)", f.Flush, p)
		}
	}
	return nil
}

// up starts the name server and the broker and checks the flush type the
// running broker reports.
func (f *flushBroker) up(ctx context.Context) error {
	if _, err := f.stack(ctx, "up", "rocketmq"); err != nil {
		return err
	}
	got, err := brokerFlushType(ctx, f, f.broker())
	if err != nil {
		return err
	}
	if got != f.Flush {
		return fmt.Errorf("the broker at %s runs with flushDiskType=%s, want %s", f.broker(), got, f.Flush)
	}
	return nil
}

// down stops the broker and the name server; it outlives the benchmark's
// context, so that an interrupted run leaves no JVM behind.
func (f *flushBroker) down() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := f.stack(ctx, "down", "rocketmq"); err != nil {
		slog.Warn("bench: stop the temporary broker", "flush", f.Flush, "err", err)
	}
}

// brokerFlushType asks the broker at addr for its effective flushDiskType
// (scripts/stack.sh mqadmin getBrokerConfig, run with f's environment).
func brokerFlushType(ctx context.Context, f *flushBroker, addr string) (string, error) {
	out, err := f.stack(ctx, "mqadmin", "getBrokerConfig", "-b", addr)
	if err != nil {
		return "", err
	}
	t, ok := parseFlushDiskType(out)
	if !ok {
		return "", fmt.Errorf("mqadmin getBrokerConfig -b %s printed no flushDiskType (output in %s)", addr, f.logPath)
	}
	return t, nil
}

// parseFlushDiskType finds "flushDiskType = VALUE" in mqadmin
// getBrokerConfig's output.
func parseFlushDiskType(out string) (string, bool) {
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if ok && strings.TrimSpace(k) == "flushDiskType" {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// repoRoot is the repository the benchmark runs in: the nearest folder up
// from the working directory with go.mod and scripts/stack.sh.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if fileExists(filepath.Join(dir, "go.mod")) && fileExists(filepath.Join(dir, "scripts", "stack.sh")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("the flush step and the engines the benchmark starts need scripts/stack.sh: run the benchmark from the repository (make bench), or pass -flush=false -engines dev")
		}
		dir = parent
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// sendResult is one send measurement on one broker.
type sendResult struct {
	Senders int `json:"senders"`
	// Messages were acknowledged (SEND_OK); Errors were not, after the
	// client's retries.
	Messages int     `json:"messages"`
	Errors   int     `json:"errors"`
	Seconds  float64 `json:"seconds"`
	// Rate is acknowledged messages per second of sending.
	Rate float64 `json:"rate"`
	// P50 and P99 are the latency of one send, from the call to the
	// broker's acknowledgement, in milliseconds.
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`
}

// flushSide is everything measured on one of the two brokers.
type flushSide struct {
	Broker     *flushBroker `json:"broker"`
	Sequential sendResult   `json:"send_sequential"`
	Concurrent sendResult   `json:"send_concurrent"`
	E2E        cellResult   `json:"e2e"`
}

// flushResult is the flush step's record in results.json. Ratios are
// sync/async.
type flushResult struct {
	Messages int `json:"messages"`
	Senders  int `json:"senders"`
	// StackBroker and StackFlush are the broker the other phases ran on and
	// the flushDiskType it reported ("" when it could not be asked).
	StackBroker  string             `json:"stack_broker"`
	StackFlush   string             `json:"stack_flush_disk_type,omitempty"`
	Async        flushSide          `json:"async"`
	Sync         flushSide          `json:"sync"`
	Ratio        map[string]float64 `json:"ratio_sync_async"`
	StartSeconds float64            `json:"start_seconds"`
	// Engine is the Temporal engine of the e2e drains.
	Engine string `json:"engine"`
	Took   string `json:"took"`
}

// flushBodies are n event bodies of the contract's size, each of its own
// order (so that the hash selector spreads them over the queues).
func flushBodies(n int) [][]byte {
	prefix := uniq.Name("flush")
	at := time.Now().UTC().Truncate(time.Microsecond)
	out := make([][]byte, n)
	for i := range out {
		e := fsm.Event{EventID: fmt.Sprintf("%s-e%d", prefix, i), OrderID: fmt.Sprintf("%s-o%d", prefix, i),
			UserID: int64(1 + i%1000), Status: fsm.Created, Version: 1, AmountCents: int64(100 + i%50000),
			OccurredAt: at, ProducerID: "bench-flush", Seq: int64(i + 1)}
		out[i], _ = json.Marshal(e) // an fsm.Event always encodes
	}
	return out
}

// sendBatch publishes msgs with senders goroutines, each sending one message
// at a time synchronously, and returns the latency of each acknowledged
// send, the number that failed, how long it took, and the first failure.
func sendBatch(ctx context.Context, p scenario.Publisher, msgs []mq.Message, senders int) (lat []time.Duration, failed int, elapsed time.Duration, firstErr error) {
	var (
		next  atomic.Int64
		nerr  atomic.Int64
		once  sync.Once
		wg    sync.WaitGroup
		perGo = make([][]time.Duration, senders)
	)
	begin := time.Now()
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= int64(len(msgs)) {
					return
				}
				t := time.Now()
				_, err := p.Publish(ctx, msgs[i])
				d := time.Since(t)
				if err != nil {
					nerr.Add(1)
					once.Do(func() { firstErr = err })
					continue
				}
				perGo[s] = append(perGo[s], d)
			}
		}()
	}
	wg.Wait()
	elapsed = time.Since(begin)
	for _, l := range perGo {
		lat = append(lat, l...)
	}
	return lat, int(nerr.Load()), elapsed, firstErr
}

// measureSends sends n messages to each broker with senders goroutines. To
// spread a drift of the machine's load over both sides alike, it sends in
// halves in the order async, sync, sync, async (side 0 is async).
func measureSends(ctx context.Context, pubs [2]scenario.Publisher, msgs [2][]mq.Message, n, senders int) ([2]sendResult, error) {
	var (
		res     [2]sendResult
		lat     [2][]time.Duration
		elapsed [2]time.Duration
	)
	h := n / 2
	for _, step := range []struct{ side, from, to int }{{0, 0, h}, {1, 0, h}, {1, h, n}, {0, h, n}} {
		l, failed, d, firstErr := sendBatch(ctx, pubs[step.side], msgs[step.side][step.from:step.to], senders)
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if failed > 0 {
			slog.Warn("bench: flush step: sends failed", "side", step.side, "failed", failed, "first", firstErr)
		}
		lat[step.side] = append(lat[step.side], l...)
		res[step.side].Errors += failed
		elapsed[step.side] += d
	}
	for i := range res {
		if len(lat[i]) == 0 {
			return res, fmt.Errorf("no send of %d was acknowledged", n)
		}
		slices.Sort(lat[i])
		res[i].Senders = senders
		res[i].Messages = len(lat[i])
		res[i].Seconds = elapsed[i].Seconds()
		res[i].Rate = float64(len(lat[i])) / elapsed[i].Seconds()
		res[i].P50 = msec(quantile(lat[i], 0.50))
		res[i].P99 = msec(quantile(lat[i], 0.99))
	}
	return res, nil
}

func msec(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// flushWarmUp is how many messages each broker gets, unmeasured, before the
// send measurements (routes, connections, the broker's JIT).
const flushWarmUp = 200

// prepareFlush checks, before the long phases, that the flush step can run:
// the repository's scripts/stack.sh is there, any broker an interrupted run
// left is stopped, and the ports are free.
func prepareFlush(ctx context.Context, plan flushPlan, logDir string) ([2]*flushBroker, error) {
	var fbs [2]*flushBroker
	root, err := repoRoot()
	if err != nil {
		return fbs, err
	}
	fbs[0] = newFlushBroker(root, logDir, asyncFlush, plan.AsyncPorts)
	fbs[1] = newFlushBroker(root, logDir, syncFlush, plan.SyncPorts)
	for _, f := range fbs {
		if err := f.reset(ctx); err != nil {
			return fbs, err
		}
	}
	return fbs, nil
}

// runFlush measures the flush cost on the two temporary brokers and prints
// the `flush:` block; the brokers are stopped when it returns.
func (b *bench) runFlush(ctx context.Context, plan flushPlan, o options, fbs [2]*flushBroker, out io.Writer) (*flushResult, error) {
	began := time.Now()
	var stopOnce sync.Once
	stop := func() {
		stopOnce.Do(func() {
			var wg sync.WaitGroup
			for _, f := range fbs {
				wg.Add(1)
				go func() { defer wg.Done(); f.down() }()
			}
			wg.Wait()
		})
	}
	defer stop()
	res, err := b.measureFlush(ctx, plan, o, fbs, out)
	if err != nil {
		return nil, err
	}
	stop()
	res.Took = time.Since(began).Round(time.Second).String()
	fmt.Fprintf(out, "flush:    sync/async: send rate %.2f with 1 sender, %.2f with %d; e2e %.2f; the step took %s (starting and stopping the brokers included)\n",
		res.Ratio["send_sequential_rate"], res.Ratio["send_concurrent_rate"], plan.Senders, res.Ratio["e2e_rate"], res.Took)
	return res, nil
}

// measureFlush starts the two brokers and measures on them.
func (b *bench) measureFlush(ctx context.Context, plan flushPlan, o options, fbs [2]*flushBroker, out io.Writer) (*flushResult, error) {
	began := time.Now()
	res := &flushResult{Messages: plan.Messages, Senders: plan.Senders, StackBroker: b.broker, Engine: b.engine,
		Async: flushSide{Broker: fbs[0]}, Sync: flushSide{Broker: fbs[1]}}

	// Start both (each start waits on JVMs and the admin tool, so the two
	// overlap well), and ask the stack's broker its flush type meanwhile.
	var (
		wg    sync.WaitGroup
		errs  [3]error
		stack string
	)
	for i, f := range fbs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = f.up(ctx) }()
	}
	// The admin tool runs with the async broker's environment (it needs
	// one), logging apart.
	chk := *fbs[0]
	chk.logPath = filepath.Join(filepath.Dir(chk.logPath), "flush-stack-broker-config.log")
	wg.Add(1)
	go func() { defer wg.Done(); stack, errs[2] = brokerFlushType(ctx, &chk, b.broker) }()
	wg.Wait()
	if err := errors.Join(errs[0], errs[1]); err != nil {
		return nil, err
	}
	res.StackFlush = stack
	switch {
	case errs[2] != nil:
		slog.Warn("bench: flush type of the stack's broker", "broker", b.broker, "err", errs[2])
		stack = "not known: " + errs[2].Error()
	case stack != syncFlush:
		stack += "; the stack's default is SYNC_FLUSH, and a broker started before keeps its setting until `scripts/stack.sh down rocketmq && make up`"
	}
	res.StartSeconds = time.Since(began).Seconds()
	fmt.Fprintf(out, "flush:    the broker's flush cost, on two temporary RocketMQ name servers + brokers beside the stack's (scripts/stack.sh, single profile, data %s and %s), alike but for flushDiskType, as each running broker reported it: %s on %s/%d, %s on %s/%d; started in %.0fs; the drains below run on Temporal engine %s. The other phases ran on %s (flushDiskType %s)\n",
		relPath(fbs[0].Data), relPath(fbs[1].Data), fbs[0].Flush, fbs[0].namesrv(), fbs[0].BrokerPort,
		fbs[1].Flush, fbs[1].namesrv(), fbs[1].BrokerPort, res.StartSeconds, b.engine, b.broker, stack)

	// Producer send rate and latency.
	var (
		pubs [2]scenario.Publisher
		msgs [2][]mq.Message
	)
	bodies := flushBodies(flushWarmUp + plan.Messages)
	for i, f := range fbs {
		topic := uniq.Name("bench-flush")
		if err := createTopic(ctx, []string{f.namesrv()}, f.broker(), topic, 8); err != nil {
			return nil, fmt.Errorf("%s broker: %w", f.Flush, err)
		}
		p, err := mq.NewProducer(f.namesrv(), mq.WithProducerGroup(uniq.Name("bench-flush-pub")))
		if err != nil {
			return nil, err
		}
		defer p.Close()
		pubs[i] = p
		for _, body := range bodies {
			m, err := mq.EventMessage(topic, body)
			if err != nil {
				return nil, err
			}
			msgs[i] = append(msgs[i], m)
		}
		if _, failed, _, firstErr := sendBatch(ctx, p, msgs[i][:flushWarmUp], 1); failed > 0 {
			return nil, fmt.Errorf("%s broker: warm-up: %d of %d sends failed: %w", f.Flush, failed, flushWarmUp, firstErr)
		}
		msgs[i] = msgs[i][flushWarmUp:]
	}
	fmt.Fprintf(out, "flush:    send: %d messages (event bodies, one order each, topic of 8 queues) to each broker, each sent synchronously (acknowledged SEND_OK) by 1 sender, then by %d at once, in halves in the order async, sync, sync, async, after %d unmeasured; latency of one send\n",
		plan.Messages, plan.Senders, flushWarmUp)
	fmt.Fprintf(out, "| figure | %s | %s | sync/async |\n|---|---|---|---|\n", fbs[0].Flush, fbs[1].Flush)
	res.Ratio = map[string]float64{}
	for _, senders := range []int{1, plan.Senders} {
		sr, err := measureSends(ctx, pubs, msgs, plan.Messages, senders)
		if err != nil {
			return nil, fmt.Errorf("send measurement (%d senders): %w", senders, err)
		}
		key, what := "send_sequential", "send, 1 sender"
		if senders == 1 {
			res.Async.Sequential, res.Sync.Sequential = sr[0], sr[1]
		} else {
			key, what = "send_concurrent", fmt.Sprintf("send, %d senders", senders)
			res.Async.Concurrent, res.Sync.Concurrent = sr[0], sr[1]
		}
		res.Ratio[key+"_rate"] = sr[1].Rate / sr[0].Rate
		res.Ratio[key+"_p50"] = sr[1].P50 / sr[0].P50
		res.Ratio[key+"_p99"] = sr[1].P99 / sr[0].P99
		fmt.Fprintf(out, "| %s: messages/s | %.1f%s | %.1f%s | %.2f |\n", what, sr[0].Rate, failedNote(sr[0]), sr[1].Rate, failedNote(sr[1]), res.Ratio[key+"_rate"])
		fmt.Fprintf(out, "| %s: p50 / p99 | %.2f / %.2f ms | %.2f / %.2f ms | %.2f / %.2f |\n", what,
			sr[0].P50, sr[0].P99, sr[1].P50, sr[1].P99, res.Ratio[key+"_p50"], res.Ratio[key+"_p99"])
	}

	// The e2e backlog drain on each, the async broker first.
	orders := plan.Orders
	if orders == 0 {
		orders = o.orders
	}
	for i, f := range fbs {
		fb := *b
		fb.cfg.RocketMQNamesrv, fb.namesrv, fb.broker = f.namesrv(), []string{f.namesrv()}, f.broker()
		kind := strings.ToLower(strings.TrimSuffix(f.Flush, "_FLUSH"))
		r, err := fb.runCell(ctx, cellConfig{Name: "flush-" + kind + "-e2e", Orders: orders, Concurrency: o.concurrency,
			BatchSize: o.batch, Workers: o.workers, Seed: o.seed, DupRate: 0.2})
		if err != nil {
			return nil, fmt.Errorf("e2e on the %s broker: %w", f.Flush, err)
		}
		if i == 0 {
			res.Async.E2E = r
		} else {
			res.Sync.E2E = r
		}
	}
	a, s := res.Async.E2E, res.Sync.E2E
	res.Ratio["e2e_rate"] = s.Rate / a.Rate
	res.Ratio["e2e_publish_seconds"] = s.Publish.Seconds() / a.Publish.Seconds()
	fmt.Fprintf(out, "| e2e backlog drain (%d orders, %d distinct events, %d messages; bridge and %d worker(s), async broker first, each settled with all invariants holding): events/s | %.1f | %.1f | %.2f |\n",
		a.Config.Orders, a.Events, a.Messages, a.Config.Workers, a.Rate, s.Rate, res.Ratio["e2e_rate"])
	fmt.Fprintf(out, "| e2e backlog publishing (%d messages by 1 sender, before the drain): s | %.2f | %.2f | %.2f |\n",
		a.Messages, a.Publish.Seconds(), s.Publish.Seconds(), res.Ratio["e2e_publish_seconds"])
	return res, nil
}

// failedNote notes failed sends in a table cell.
func failedNote(r sendResult) string {
	if r.Errors == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d failed)", r.Errors)
}

// relPath is p relative to the working directory when it is inside it.
func relPath(p string) string {
	wd, err := os.Getwd()
	if err != nil {
		return p
	}
	if r, err := filepath.Rel(wd, p); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return p
}
