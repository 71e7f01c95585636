package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"

	"github.com/orderflow/orderflow/bridge"
	"github.com/orderflow/orderflow/config"
	"github.com/orderflow/orderflow/dedup"
	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/internal/obs"
	"github.com/orderflow/orderflow/internal/profiling"
	"github.com/orderflow/orderflow/internal/tracing"
	"github.com/orderflow/orderflow/store"
	"github.com/orderflow/orderflow/wire"
	"github.com/orderflow/orderflow/workflows"
)

// bridgeConfig is the bridge's configuration: the shared settings of package
// config and the bridge's own.
type bridgeConfig struct {
	config.Config
	// MetricsAddr is the listen address of /metrics, /healthz and /readyz.
	MetricsAddr string
	// PprofAddr is the listen address of /debug/pprof/; empty: off.
	PprofAddr string
	// Concurrency is the number of messages handled at once.
	Concurrency int
	// BatchSize is the number of messages per consumer callback.
	BatchSize int
	// BatchSignals: the events of one order in one callback go to its
	// workflow in one signal (order-events) instead of one signal each.
	BatchSignals bool
	// GracePeriod bounds the wait for in-flight messages on shutdown.
	GracePeriod time.Duration
	// RetryFor is how long one message is retried in-process (Temporal or
	// PostgreSQL unreachable) before it is handed back to the broker.
	RetryFor time.Duration
	// AttemptTimeout bounds one attempt to deliver or park a message.
	AttemptTimeout time.Duration
	// SeqLinger is how long a commit of sequence numbers that would start
	// on an idle recorder waits for more numbers (store.SeqRecorder).
	SeqLinger time.Duration
	// MaxRetryDelayLevel caps the broker's redelivery delay level.
	MaxRetryDelayLevel int
	// UndeliverableAfter bounds how long a valid event is retried: once
	// its message has been failing this long (mq.Failing), the bridge
	// parks it as undeliverable instead of handing it back.
	UndeliverableAfter time.Duration
	// Workflow are the parameters of the order workflows the bridge starts.
	Workflow workflows.Params
	// Dedup configures the duplicate filter in front of the signal; its
	// Redis is the shared setting RedisURL.
	Dedup dedupConfig
	// RocketMQTLSConf is the TLS configuration of the consumer's
	// connections, built from the RocketMQ TLS settings (nil: plain TCP).
	RocketMQTLSConf *tls.Config
}

// dedupConfig configures the bridge's duplicate filter (package dedup).
type dedupConfig struct {
	// On turns the filter on; off, every valid message is signalled.
	On bool
	// BloomCapacity and BloomFPRate size each of the Bloom filter's two
	// generations.
	BloomCapacity int
	BloomFPRate   float64
	// RedisTTL is how long Redis keeps a business key.
	RedisTTL time.Duration
	// RedisTimeout bounds one Redis call; LedgerTimeout one ledger lookup.
	RedisTimeout  time.Duration
	LedgerTimeout time.Duration
}

// parseBridgeConfig reads the defaults, then the environment (lookup), then
// the flags in args. Usage and errors go to out.
func parseBridgeConfig(args []string, lookup func(string) (string, bool), out io.Writer) (bridgeConfig, error) {
	var cfg bridgeConfig
	s := config.NewSet("starter", "Usage: starter [flags]   (run the RocketMQ -> Temporal bridge)", out)
	cfg.RegisterTemporal(s)
	cfg.RegisterDatabase(s)
	cfg.RegisterRocketMQ(s)
	cfg.RegisterConsumerGroup(s)
	cfg.RegisterGapWindow(s)
	cfg.RegisterGapMetrics(s)
	cfg.RegisterLog(s)
	cfg.RegisterRedis(s)
	b := func(flag, env, usage string) config.Setting {
		return config.Setting{Flag: flag, Env: "ORDERFLOW_BRIDGE_" + env, Usage: usage}
	}
	wf := func(flag, env, usage string) config.Setting {
		return config.Setting{Flag: flag, Env: "ORDERFLOW_WORKFLOW_" + env, Usage: usage}
	}
	s.String(&cfg.MetricsAddr, "127.0.0.1:9091", b("metrics-addr", "METRICS_ADDR", "listen address of /metrics, /healthz and /readyz"))
	s.String(&cfg.PprofAddr, "", b("pprof-addr", "PPROF_ADDR", "listen address of /debug/pprof/ (empty: off)"))
	s.Int(&cfg.Concurrency, 16, b("concurrency", "CONCURRENCY", "messages handled at once"))
	s.Int(&cfg.BatchSize, 16, b("batch-size", "BATCH_SIZE", "messages per consumer callback (a failure redelivers the whole batch); the callback's orders are delivered at once"))
	s.Bool(&cfg.BatchSignals, true, b("batch-signals", "BATCH_SIGNALS", "deliver the events of one order in one callback in one signal (false: one signal per event, for workers older than the order-events signal)"))
	s.Duration(&cfg.GracePeriod, 30*time.Second, b("grace-period", "GRACE_PERIOD", "on SIGTERM, how long to wait for in-flight messages"))
	s.Duration(&cfg.RetryFor, 15*time.Second, b("retry-for", "RETRY_FOR", "how long one message is retried in-process before it is handed back to the broker"))
	s.Duration(&cfg.AttemptTimeout, 10*time.Second, b("attempt-timeout", "ATTEMPT_TIMEOUT", "bound of one attempt to deliver an event to Temporal or park a message in PostgreSQL"))
	s.Duration(&cfg.SeqLinger, DefaultSeqLinger, b("seq-linger", "SEQ_LINGER", "how long the commit of acked messages' sequence numbers waits for more to carry, when none is under way (0: none); each number waits at most this long, its message's ack with it"))
	s.Int(&cfg.MaxRetryDelayLevel, 5, b("max-retry-delay-level", "MAX_RETRY_DELAY_LEVEL", "cap of the broker's redelivery delay level (3=10s, 4=30s, 5=1m, 6=2m ...)"))
	s.Duration(&cfg.UndeliverableAfter, DefaultUndeliverableAfter, b("undeliverable-after", "UNDELIVERABLE_AFTER", "park a valid event in dead_letters as undeliverable once its message has been failing this long (counted from the broker's redelivery delays, at most the message's age) instead of handing it back; orderflow dlq replay delivers it later"))
	s.Bool(&cfg.Dedup.On, true, b("dedup", "DEDUP", "ack a message without a signal when Redis or the ledger confirms its event was already signalled or recorded with the same content (false: signal every valid message)"))
	s.Int(&cfg.Dedup.BloomCapacity, dedup.DefaultBloomCapacity, b("dedup-bloom-capacity", "DEDUP_BLOOM_CAPACITY", "events per generation of the in-process Bloom filter (two are kept)"))
	s.Float(&cfg.Dedup.BloomFPRate, dedup.DefaultBloomFPRate, b("dedup-bloom-fp-rate", "DEDUP_BLOOM_FP_RATE", "false-positive rate of the Bloom filter (a false positive costs a ledger lookup)"))
	s.Duration(&cfg.Dedup.RedisTTL, dedup.DefaultRedisTTL, b("dedup-redis-ttl", "DEDUP_REDIS_TTL", "how long Redis keeps a delivered event's key (longer than the broker's redelivery horizon)"))
	s.Duration(&cfg.Dedup.RedisTimeout, dedup.DefaultCacheTimeout, b("dedup-redis-timeout", "DEDUP_REDIS_TIMEOUT", "bound of one Redis call (on failure the filter goes on without Redis)"))
	s.Duration(&cfg.Dedup.LedgerTimeout, dedup.DefaultLedgerTimeout, b("dedup-ledger-timeout", "DEDUP_LEDGER_TIMEOUT", "bound of one ledger lookup (on failure the event is signalled)"))
	s.Duration(&cfg.Workflow.GracePeriod, workflows.DefaultGracePeriod, wf("workflow-grace-period", "GRACE_PERIOD", "how long a finished order's workflow waits for late events"))
	s.Duration(&cfg.Workflow.IdleTimeout, workflows.DefaultIdleTimeout, wf("workflow-idle-timeout", "IDLE_TIMEOUT", "how long an open order's workflow waits without events before it completes"))
	s.Int(&cfg.Workflow.MaxEventsPerRun, 0, wf("workflow-max-events", "MAX_EVENTS", "continue-as-new after this many events in one run (0: when Temporal suggests)"))
	if err := s.Parse(args, lookup); err != nil {
		return cfg, err
	}
	cfg.NormalizeRedis()
	if len(s.Args()) > 0 {
		return cfg, fmt.Errorf("unexpected argument %q (publish and check are subcommands of the orderflow command)", s.Args()[0])
	}
	var errs []error
	for name, v := range map[string]int{"concurrency": cfg.Concurrency, "batch-size": cfg.BatchSize, "max-retry-delay-level": cfg.MaxRetryDelayLevel,
		"dedup-bloom-capacity": cfg.Dedup.BloomCapacity} {
		if v < 1 {
			errs = append(errs, fmt.Errorf("-%s: %d is not an integer >= 1", name, v))
		}
	}
	if cfg.Workflow.MaxEventsPerRun < 0 {
		errs = append(errs, fmt.Errorf("-workflow-max-events: %d is not an integer >= 0", cfg.Workflow.MaxEventsPerRun))
	}
	for name, d := range map[string]time.Duration{"grace-period": cfg.GracePeriod, "retry-for": cfg.RetryFor,
		"attempt-timeout": cfg.AttemptTimeout, "workflow-grace-period": cfg.Workflow.GracePeriod,
		"workflow-idle-timeout": cfg.Workflow.IdleTimeout, "dedup-redis-ttl": cfg.Dedup.RedisTTL,
		"dedup-redis-timeout": cfg.Dedup.RedisTimeout, "dedup-ledger-timeout": cfg.Dedup.LedgerTimeout,
		"undeliverable-after": cfg.UndeliverableAfter} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("-%s: %s is not a positive duration", name, d))
		}
	}
	if cfg.GapWindow < 0 {
		errs = append(errs, fmt.Errorf("-gap-window: %s is negative", cfg.GapWindow))
	}
	if cfg.SeqLinger < 0 || cfg.SeqLinger >= cfg.AttemptTimeout {
		errs = append(errs, fmt.Errorf("-seq-linger: %s is negative or not shorter than -attempt-timeout (%s)", cfg.SeqLinger, cfg.AttemptTimeout))
	}
	if cfg.GapSeries < 1 {
		errs = append(errs, fmt.Errorf("-gap-series: %d is not an integer >= 1", cfg.GapSeries))
	}
	for _, id := range cfg.GapProducerIDs() {
		if !fsm.ValidProducerID(id) {
			errs = append(errs, fmt.Errorf("-gap-producers: %q is not a producer ID (%s)", id, fsm.ProducerIDRule))
		}
	}
	if r := cfg.Dedup.BloomFPRate; !(r > 0 && r < 1) {
		errs = append(errs, fmt.Errorf("-dedup-bloom-fp-rate: %g is not between 0 and 1", r))
	}
	if cfg.RedisURL != "" {
		if err := dedup.CheckRedisURL(cfg.RedisURL); err != nil {
			errs = append(errs, fmt.Errorf("-redis-url: %w", err))
		}
	}
	if t, err := cfg.RocketMQTLSConfig(); err != nil {
		errs = append(errs, err)
	} else {
		cfg.RocketMQTLSConf = t
	}
	if cfg.MaxRetryDelayLevel > mq.MaxDelayLevel {
		errs = append(errs, fmt.Errorf("-max-retry-delay-level: %d is above the broker's %d levels", cfg.MaxRetryDelayLevel, mq.MaxDelayLevel))
	}
	if err := checkUndeliverableAfter(cfg.UndeliverableAfter, cfg.MaxRetryDelayLevel); err != nil {
		errs = append(errs, err)
	}
	for name, v := range map[string]string{"topic": cfg.Topic, "consumer-group": cfg.ConsumerGroup,
		"task-queue": cfg.TaskQueue, "rocketmq-namesrv": cfg.RocketMQNamesrv} {
		if v == "" {
			errs = append(errs, fmt.Errorf("-%s must not be empty", name))
		}
	}
	return cfg, errors.Join(errs...)
}

// DefaultSeqLinger is -seq-linger's default: in a steady stream of tens of
// messages a second, a few numbers share each commit, and an ack waits at
// most 50 ms more.
const DefaultSeqLinger = 50 * time.Millisecond

// DefaultUndeliverableAfter is -undeliverable-after's default.
const DefaultUndeliverableAfter = time.Hour

// checkUndeliverableAfter refuses a bound the broker's redelivery schedule
// (at delay levels capped at maxLevel) would reach only after more than a
// tenth of the redeliveries after which the broker moves a message to the
// group's %DLQ%, which orderflow never reads.
func checkUndeliverableAfter(d time.Duration, maxLevel int) error {
	if d <= 0 || maxLevel < 1 {
		return nil // reported with the other settings
	}
	if n := mq.RedeliveriesFor(d, maxLevel); n > mq.DefaultMaxReconsumeTimes/10 {
		return fmt.Errorf("-undeliverable-after: %s takes %d redeliveries at -max-retry-delay-level %d, too close to the %d after which the broker moves a message to its %%DLQ%% topic",
			d, n, maxLevel, mq.DefaultMaxReconsumeTimes)
	}
	return nil
}

// Bridge consumes order events from RocketMQ and hands each to Temporal (or
// parks it in dead_letters), serving metrics and health over HTTP.
type Bridge struct {
	cfg      bridgeConfig
	log      *slog.Logger
	consumer *mq.Consumer
	server   *obs.Server

	stopOnce sync.Once
	stopErr  error
}

// bridgeDeps are the bridge's connections.
type bridgeDeps struct {
	Log      *slog.Logger
	Registry *prometheus.Registry
	Deliver  bridge.DeliverFunc
	Park     bridge.ParkFunc
	// Record, when set, records the sequence numbers of the messages acked.
	Record bridge.RecordFunc
	// Receipts, when set, records the receipts of the messages the bridge
	// settles itself (recovery points).
	Receipts bridge.ReceiptFunc
	// Gaps, when set, reads the suspected losses for /metrics.
	Gaps bridge.GapsFunc
	// DeliverMany, when set, delivers several events of one order in one
	// signal (with -batch-signals).
	DeliverMany bridge.DeliverManyFunc
	// Dedup is the duplicate filter in front of Deliver; nil: none.
	Dedup *dedup.Filter
	// Checks are the readiness checks besides the consumer's.
	Checks []obs.Check
}

// newBridge wires a bridge; Start starts it.
func newBridge(cfg bridgeConfig, d bridgeDeps) (*Bridge, error) {
	b := &Bridge{cfg: cfg, log: d.Log}
	stats := bridge.NewConsumerStats(func() bridge.ConsumerSource {
		if b.consumer == nil {
			return nil
		}
		return b.consumer
	})
	m, err := bridge.NewMetrics(d.Registry, stats)
	if err != nil {
		return nil, fmt.Errorf("bridge metrics: %w", err)
	}
	retry := bridge.DefaultRetry
	retry.For = cfg.RetryFor
	retry.Attempt = cfg.AttemptTimeout
	h := bridge.NewHandler(d.Log, d.Deliver, d.Park, m, retry).WithDeliveryBound(cfg.UndeliverableAfter, cfg.MaxRetryDelayLevel)
	if d.Record != nil {
		h.WithRecorder(d.Record)
	}
	if d.Receipts != nil {
		h.WithReceipts(d.Receipts)
	}
	if d.Dedup != nil {
		h.WithDedup(d.Dedup)
	}
	if d.DeliverMany != nil && cfg.BatchSignals {
		h.WithDeliverMany(d.DeliverMany).WithSignalBudget(deliverySize, workflows.SignalBudget)
	}
	var seq *bridge.SequenceStats
	if d.Gaps != nil {
		seq = bridge.NewSequenceStats(d.Gaps, d.Log, cfg.GapSeries, cfg.GapProducerIDs())
		if err := d.Registry.Register(seq); err != nil {
			return nil, fmt.Errorf("bridge metrics: %w", err)
		}
	}
	b.consumer, err = mq.NewBatchConsumer(mq.ConsumerConfig{
		NameServer:         cfg.RocketMQNamesrv,
		Topic:              cfg.Topic,
		Group:              cfg.ConsumerGroup,
		Goroutines:         cfg.Concurrency,
		BatchSize:          cfg.BatchSize,
		MaxRetryDelayLevel: cfg.MaxRetryDelayLevel,
		MaxInflatedBody:    wire.MaxBodySize,
		AccessKey:          cfg.RocketMQAccessKey,
		SecretKey:          cfg.RocketMQSecretKey,
		TLS:                cfg.RocketMQTLSConf,
		SentBack:           h.SentBack(cfg.AttemptTimeout),
	}, h.HandleBatch)
	if err != nil {
		return nil, err
	}
	checks := append([]obs.Check{{Name: "consumer", Check: func(context.Context) error {
		if !b.consumer.Started() {
			return errors.New("consumer not running")
		}
		return nil
	}}}, d.Checks...)
	b.server, err = obs.NewServer(cfg.MetricsAddr, d.Registry, d.Log, checks...)
	if err != nil {
		return nil, err
	}
	if seq != nil {
		b.server.AddRefresher(seq)
	}
	return b, nil
}

// Start serves HTTP and starts consuming.
func (b *Bridge) Start() error {
	b.server.Start()
	if err := b.consumer.Start(); err != nil {
		_ = b.server.Shutdown(context.Background())
		return err
	}
	b.server.Recheck()
	b.log.Info("bridge consuming", "topic", b.cfg.Topic, "group", b.cfg.ConsumerGroup,
		"namesrv", b.cfg.RocketMQNamesrv, "concurrency", b.cfg.Concurrency, "http", b.server.Addr())
	return nil
}

// Addr is the address the HTTP server listens on.
func (b *Bridge) Addr() string { return b.server.Addr() }

// Stop stops taking messages, waits up to the grace period for those in
// flight, shuts the consumer down and then the HTTP server. It is
// idempotent.
func (b *Bridge) Stop() error {
	b.stopOnce.Do(func() { b.stopErr = b.stop() })
	return b.stopErr
}

func (b *Bridge) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.GracePeriod)
	defer cancel()
	start := time.Now()
	b.log.Info("bridge stopping", "in_flight", b.consumer.InFlight(), "grace_period", b.cfg.GracePeriod)
	errC := b.consumer.Stop(ctx)
	hctx, hcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer hcancel()
	errH := b.server.Shutdown(hctx)
	b.log.Info("bridge stopped", "took", time.Since(start).Round(time.Millisecond).String(), "handed_back", b.consumer.Rejected())
	return errors.Join(errC, errH)
}

// runBridge runs the bridge until ctx is cancelled (SIGTERM or SIGINT) and
// returns the exit code. stopSignals restores default signal handling once
// shutdown begins, so a second signal ends the process at once.
func runBridge(ctx context.Context, stopSignals func(), args []string, stderr io.Writer) int {
	cfg, err := parseBridgeConfig(args, os.LookupEnv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "starter: %v\n", err)
		return 2
	}
	log, err := obs.NewLoggerAt(os.Stderr, cfg.LogLevel, "bridge")
	if err != nil {
		fmt.Fprintf(stderr, "starter: %v\n", err)
		return 2
	}
	slog.SetDefault(log)
	mq.UseSlog(log, slog.LevelWarn)
	if err := serveBridge(ctx, stopSignals, cfg, log); err != nil {
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			log.Info("stopped during start-up")
			return 0
		}
		log.Error("bridge failed", "err", err)
		return 1
	}
	return 0
}

func serveBridge(ctx context.Context, stopSignals func(), cfg bridgeConfig, log *slog.Logger) error {
	metrics, err := obs.NewMetrics()
	if err != nil {
		return err
	}
	defer metrics.Close()
	stopPprof, err := profiling.Serve(cfg.PprofAddr, log)
	if err != nil {
		return err
	}
	defer stopPprof()
	// Closed last: the spans of the last messages are flushed after the
	// bridge stopped.
	tr, err := tracing.Start(ctx, "orderflow-bridge", log)
	if err != nil {
		return err
	}
	defer tr.Close(log)
	ics, err := tr.TemporalInterceptors()
	if err != nil {
		return err
	}

	db, err := store.Open(ctx, cfg.DatabaseURL, cfg.Concurrency+2, store.WithQueryTracer(tr.QueryTracer()))
	if err != nil {
		return err
	}
	defer db.Close()

	// A lazy client connects on first use, so the bridge starts (and keeps
	// its messages unacked) while Temporal is unreachable.
	opts, err := obs.TemporalOptions(cfg.Config, log, metrics, ics...)
	if err != nil {
		return err
	}
	tc, err := client.NewLazyClient(opts)
	if err != nil {
		return fmt.Errorf("temporal client for %s: %w", opts.HostPort, err)
	}
	defer tc.Close()

	var filter *dedup.Filter
	if cfg.Dedup.On {
		var closeRedis func()
		filter, closeRedis, err = openDedup(ctx, cfg, opts.Namespace, db, metrics.Registry, log)
		if err != nil {
			return err
		}
		defer closeRedis()
	}

	if err := seedRecoveryPoints(ctx, cfg, db, log); err != nil {
		return err
	}
	stopPoints := movePoints(db, log)
	defer stopPoints()

	b, err := newBridge(cfg, bridgeDeps{
		Log:         log,
		Registry:    metrics.Registry,
		Deliver:     temporalDeliver(tc, cfg.TaskQueue, cfg.Workflow),
		DeliverMany: temporalDeliverMany(tc, cfg.TaskQueue, cfg.Workflow),
		Park:        storePark(db),
		Record:      storeRecord(db.NewSeqRecorder(cfg.AttemptTimeout, cfg.SeqLinger), log),
		Receipts:    db.RecordReceipts,
		Gaps:        storeGaps(db, cfg.GapWindow),
		Dedup:       filter,
		Checks:      []obs.Check{obs.TemporalCheck(tc), {Name: "postgres", Check: db.Ping}},
	})
	if err != nil {
		return err
	}
	if err := b.Start(); err != nil {
		return err
	}
	<-ctx.Done()
	stopSignals()
	return b.Stop()
}

// openDedup builds the duplicate filter: the Bloom filter, Redis when
// cfg.RedisURL is set (keys under orderflow:dedup:<namespace>:) and the
// ledger. An unreachable Redis is logged, not fatal: the filter goes on
// without it. The returned function closes Redis.
func openDedup(ctx context.Context, cfg bridgeConfig, namespace string, ledger dedup.Ledger, reg prometheus.Registerer,
	log *slog.Logger) (*dedup.Filter, func(), error) {
	m, err := dedup.NewMetrics(reg)
	if err != nil {
		return nil, nil, fmt.Errorf("duplicate filter metrics: %w", err)
	}
	o := dedup.Options{
		Bloom:         dedup.NewBloom(uint(cfg.Dedup.BloomCapacity), cfg.Dedup.BloomFPRate),
		Ledger:        ledger,
		CacheTimeout:  cfg.Dedup.RedisTimeout,
		LedgerTimeout: cfg.Dedup.LedgerTimeout,
		Metrics:       m,
		Log:           log,
	}
	if cfg.RedisURL == "" {
		log.Info("duplicate filter: Bloom filter and ledger, no Redis (REDIS_URL is empty)")
		return dedup.New(o), func() {}, nil
	}
	dedup.UseSlog(log)
	r, err := dedup.OpenRedis(cfg.RedisURL, dedup.RedisOptions{KeyPrefix: dedup.KeyPrefix(namespace),
		TTL: cfg.Dedup.RedisTTL, Timeout: cfg.Dedup.RedisTimeout, PoolSize: cfg.Concurrency + 2})
	if err != nil {
		return nil, nil, err
	}
	o.Cache = r
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := r.Ping(pctx); err != nil {
		log.Warn("duplicate filter: Redis does not answer; the bridge goes on without it until it does",
			"redis", r.Addr(), "err", err)
	} else {
		log.Info("duplicate filter: Bloom filter, Redis and ledger", "redis", r.Addr(), "ttl", r.TTL().String())
	}
	return dedup.New(o), func() { _ = r.Close() }, nil
}

// temporalDeliver delivers events with workflows.Deliver.
func temporalDeliver(c client.Client, taskQueue string, p workflows.Params) bridge.DeliverFunc {
	return func(ctx context.Context, e fsm.Event, src wire.Envelope) error {
		return workflows.Deliver(ctx, c, taskQueue, p, e, &src)
	}
}

// temporalDeliverMany delivers several events of one order with
// workflows.DeliverBatch.
func temporalDeliverMany(c client.Client, taskQueue string, p workflows.Params) bridge.DeliverManyFunc {
	return func(ctx context.Context, orderID string, items []bridge.Item) error {
		ds := make([]workflows.Delivery, len(items))
		for i, it := range items {
			ds[i] = workflows.Delivery{Event: it.Event, Source: &it.Source}
		}
		return workflows.DeliverBatch(ctx, c, taskQueue, p, orderID, ds)
	}
}

// deliverySize is an event's size in an order-events signal, as the SDK's
// default data converter encodes it (workflows.EncodedSize).
func deliverySize(it bridge.Item) (int, error) {
	return workflows.EncodedSize(workflows.Delivery{Event: it.Event, Source: &it.Source})
}

// storePark parks dead letters in the database.
func storePark(s *store.Store) bridge.ParkFunc {
	return func(ctx context.Context, dl wire.DeadLetter) error {
		_, err := s.ParkDeadLetter(ctx, dl)
		return err
	}
}

// storeRecord records sequence numbers in the database, the numbers of
// concurrent messages in one commit. A number the store refuses (a
// producer ID too long to keep) is logged and skipped: repeating cannot
// help.
func storeRecord(r *store.SeqRecorder, log *slog.Logger) bridge.RecordFunc {
	return func(ctx context.Context, producerID string, seq int64) error {
		err := r.Record(ctx, producerID, seq)
		if errors.Is(err, store.ErrInvalid) {
			log.Warn("sequence number not recorded", "err", err)
			return nil
		}
		return err
	}
}

// storeGaps reads the holes open for window or longer, per producer.
func storeGaps(s *store.Store, window time.Duration) bridge.GapsFunc {
	return func(ctx context.Context) ([]bridge.ProducerGaps, error) {
		ps, err := s.SequenceGaps(ctx, "")
		if err != nil {
			return nil, err
		}
		out := make([]bridge.ProducerGaps, 0, len(ps))
		for _, p := range ps {
			g := bridge.ProducerGaps{ProducerID: p.ProducerID}
			for _, h := range p.Suspected(window) {
				g.Gaps++
				g.Missing += h.Missing()
			}
			out = append(out, g)
		}
		return out, nil
	}
}
