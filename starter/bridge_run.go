package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/orderflow/orderflow/config"
	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/internal/obs"
	"github.com/orderflow/orderflow/internal/profiling"
	"github.com/orderflow/orderflow/message"
	"github.com/orderflow/orderflow/store"
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
	// GracePeriod bounds the wait for in-flight messages on shutdown.
	GracePeriod time.Duration
	// RetryFor is how long one message is retried in-process (Temporal or
	// PostgreSQL unreachable) before it is handed back to the broker.
	RetryFor time.Duration
	// AttemptTimeout bounds one attempt to deliver or park a message.
	AttemptTimeout time.Duration
	// MaxRetryDelayLevel caps the broker's redelivery delay level.
	MaxRetryDelayLevel int
	// Workflow are the parameters of the order workflows the bridge starts.
	Workflow workflows.Params
}

// bridgeSetting is one bridge-specific setting: a flag and its variable.
type bridgeSetting struct {
	env, flag, def, usage string
}

var bridgeSettings = []bridgeSetting{
	{"ORDERFLOW_BRIDGE_METRICS_ADDR", "metrics-addr", ":9091", "listen address of /metrics, /healthz and /readyz"},
	{"ORDERFLOW_BRIDGE_PPROF_ADDR", "pprof-addr", "", "listen address of /debug/pprof/ (empty: off)"},
	{"ORDERFLOW_BRIDGE_CONCURRENCY", "concurrency", "16", "messages handled at once"},
	{"ORDERFLOW_BRIDGE_BATCH_SIZE", "batch-size", "1", "messages per consumer callback (a failure redelivers the whole batch)"},
	{"ORDERFLOW_BRIDGE_GRACE_PERIOD", "grace-period", "30s", "on SIGTERM, how long to wait for in-flight messages"},
	{"ORDERFLOW_BRIDGE_RETRY_FOR", "retry-for", "15s", "how long one message is retried in-process before it is handed back to the broker"},
	{"ORDERFLOW_BRIDGE_ATTEMPT_TIMEOUT", "attempt-timeout", "10s", "bound of one attempt to deliver an event to Temporal or park a message in PostgreSQL"},
	{"ORDERFLOW_BRIDGE_MAX_RETRY_DELAY_LEVEL", "max-retry-delay-level", "5", "cap of the broker's redelivery delay level (3=10s, 4=30s, 5=1m, 6=2m ...)"},
	{"ORDERFLOW_WORKFLOW_GRACE_PERIOD", "workflow-grace-period", workflows.DefaultGracePeriod.String(), "how long a finished order's workflow waits for late events"},
	{"ORDERFLOW_WORKFLOW_IDLE_TIMEOUT", "workflow-idle-timeout", workflows.DefaultIdleTimeout.String(), "how long an open order's workflow waits without events before it completes"},
	{"ORDERFLOW_WORKFLOW_MAX_EVENTS", "workflow-max-events", "0", "continue-as-new after this many events in one run (0: when Temporal suggests)"},
}

// parseBridgeConfig reads the environment, then the flags in args.
func parseBridgeConfig(args []string, getenv func(string) string, out io.Writer) (bridgeConfig, error) {
	cfg := bridgeConfig{Config: config.FromEnv()}
	fs := flag.NewFlagSet("starter", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprintf(out, "Usage: starter [flags]   (run the RocketMQ -> Temporal bridge)\n"+
			"       starter publish ... | starter check ...\n\nFlags (each also read from the environment variable shown):\n")
		fs.PrintDefaults()
	}
	cfg.RegisterFlags(fs)
	vals := make(map[string]*string, len(bridgeSettings))
	for _, s := range bridgeSettings {
		v := s.def
		if e := getenv(s.env); e != "" {
			v = e
		}
		vals[s.flag] = fs.String(s.flag, v, s.usage+" (env "+s.env+")")
	}
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected argument %q (subcommands: publish, check)", fs.Arg(0))
	}
	var errs []error
	intVal := func(name string, min int) int {
		n, err := strconv.Atoi(*vals[name])
		if err != nil || n < min {
			errs = append(errs, fmt.Errorf("-%s: %q is not an integer >= %d", name, *vals[name], min))
		}
		return n
	}
	durVal := func(name string) time.Duration {
		d, err := time.ParseDuration(*vals[name])
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("-%s: %q is not a positive duration", name, *vals[name]))
		}
		return d
	}
	cfg.MetricsAddr = *vals["metrics-addr"]
	cfg.PprofAddr = *vals["pprof-addr"]
	cfg.Concurrency = intVal("concurrency", 1)
	cfg.BatchSize = intVal("batch-size", 1)
	cfg.GracePeriod = durVal("grace-period")
	cfg.RetryFor = durVal("retry-for")
	cfg.AttemptTimeout = durVal("attempt-timeout")
	cfg.MaxRetryDelayLevel = intVal("max-retry-delay-level", 1)
	cfg.Workflow.GracePeriod = durVal("workflow-grace-period")
	cfg.Workflow.IdleTimeout = durVal("workflow-idle-timeout")
	cfg.Workflow.MaxEventsPerRun = intVal("workflow-max-events", 0)
	if cfg.MaxRetryDelayLevel > 18 {
		errs = append(errs, fmt.Errorf("-max-retry-delay-level: %d is above the broker's 18 levels", cfg.MaxRetryDelayLevel))
	}
	for name, v := range map[string]string{"topic": cfg.Topic, "consumer-group": cfg.ConsumerGroup,
		"task-queue": cfg.TaskQueue, "rocketmq-namesrv": cfg.RocketMQNamesrv, "temporal-address": cfg.TemporalAddress} {
		if v == "" {
			errs = append(errs, fmt.Errorf("-%s must not be empty", name))
		}
	}
	return cfg, errors.Join(errs...)
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
	Deliver  DeliverFunc
	Park     ParkFunc
	// Checks are the readiness checks besides the consumer's.
	Checks []obs.Check
}

// newBridge wires a bridge; Start starts it.
func newBridge(cfg bridgeConfig, d bridgeDeps) (*Bridge, error) {
	b := &Bridge{cfg: cfg, log: d.Log}
	stats := newConsumerStats(func() consumerSource {
		if b.consumer == nil {
			return nil
		}
		return b.consumer
	})
	m, err := newBridgeMetrics(d.Registry, stats)
	if err != nil {
		return nil, fmt.Errorf("bridge metrics: %w", err)
	}
	retry := defaultRetry
	retry.For = cfg.RetryFor
	retry.Attempt = cfg.AttemptTimeout
	h := &handler{log: d.Log, deliver: d.Deliver, park: d.Park, metrics: m, retry: retry, now: time.Now}
	b.consumer, err = mq.NewConsumer(mq.ConsumerConfig{
		NameServer:         cfg.RocketMQNamesrv,
		Topic:              cfg.Topic,
		Group:              cfg.ConsumerGroup,
		Goroutines:         cfg.Concurrency,
		BatchSize:          cfg.BatchSize,
		MaxRetryDelayLevel: cfg.MaxRetryDelayLevel,
		MaxInflatedBody:    message.MaxBodySize,
	}, h.handle)
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
	return b, nil
}

// Start serves HTTP and starts consuming.
func (b *Bridge) Start() error {
	b.server.Start()
	if err := b.consumer.Start(); err != nil {
		_ = b.server.Shutdown(context.Background())
		return err
	}
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
	cfg, err := parseBridgeConfig(args, os.Getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "starter: %v\n", err)
		return 2
	}
	log, err := obs.LoggerFromEnv("bridge")
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

	db, err := store.Open(ctx, cfg.DatabaseURL, cfg.Concurrency+2)
	if err != nil {
		return err
	}
	defer db.Close()

	// A lazy client connects on first use, so the bridge starts (and keeps
	// its messages unacked) while Temporal is unreachable.
	tc, err := client.NewLazyClient(client.Options{
		HostPort:       cfg.TemporalAddress,
		Namespace:      cfg.TemporalNamespace,
		Logger:         sdklog.NewStructuredLogger(log.With("component", "temporal-sdk")),
		MetricsHandler: metrics.SDKHandler,
	})
	if err != nil {
		return fmt.Errorf("temporal client for %s: %w", cfg.TemporalAddress, err)
	}
	defer tc.Close()

	b, err := newBridge(cfg, bridgeDeps{
		Log:      log,
		Registry: metrics.Registry,
		Deliver:  temporalDeliver(tc, cfg.TaskQueue, cfg.Workflow),
		Park:     storePark(db),
		Checks:   []obs.Check{obs.TemporalCheck(tc), {Name: "postgres", Check: db.Ping}},
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

// temporalDeliver delivers events with workflows.Deliver.
func temporalDeliver(c client.Client, taskQueue string, p workflows.Params) DeliverFunc {
	return func(ctx context.Context, e fsm.Event) error {
		return workflows.Deliver(ctx, c, taskQueue, p, e)
	}
}

// storePark parks dead letters in the database.
func storePark(s *store.Store) ParkFunc {
	return func(ctx context.Context, dl message.DeadLetter) error {
		_, err := s.ParkDeadLetter(ctx, dl)
		return err
	}
}
