package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"

	"github.com/orderflow/orderflow/activities"
	"github.com/orderflow/orderflow/config"
	"github.com/orderflow/orderflow/internal/obs"
	"github.com/orderflow/orderflow/internal/profiling"
	"github.com/orderflow/orderflow/store"
	"github.com/orderflow/orderflow/workflows"
)

// options are the worker's own settings, beyond package config.
type options struct {
	MetricsAddr          string
	PprofAddr            string
	StopTimeout          time.Duration
	MaxActivities        int
	MaxWorkflowTasks     int
	ActivityPollers      int
	WorkflowPollers      int
	DBMaxOpenConns       int
	ActivitiesPerSecond  float64
	ShutdownHTTPDeadline time.Duration
	TemporalWait         time.Duration
}

// Environment variables of the worker's own settings.
const (
	envMetricsAddr = "ORDERFLOW_WORKER_METRICS_ADDR"
	envStopTimeout = "ORDERFLOW_WORKER_STOP_TIMEOUT"
	envPprofAddr   = "ORDERFLOW_WORKER_PPROF_ADDR"
)

func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

// parse reads the configuration: defaults, then environment, then flags.
func parse(args []string) (config.Config, options, error) {
	cfg := config.FromEnv()
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	var o options
	fs.StringVar(&o.MetricsAddr, "metrics-addr", envOr(envMetricsAddr, ":9090"),
		"listen address of /metrics, /healthz and /readyz (env "+envMetricsAddr+")")
	fs.StringVar(&o.PprofAddr, "pprof-addr", envOr(envPprofAddr, ""),
		"listen address of /debug/pprof/ (empty: off) (env "+envPprofAddr+")")
	stop, err := time.ParseDuration(envOr(envStopTimeout, "30s"))
	if err != nil {
		return cfg, o, fmt.Errorf("%s: %w", envStopTimeout, err)
	}
	fs.DurationVar(&o.StopTimeout, "stop-timeout", stop,
		"on SIGTERM, how long running activities may take to finish (env "+envStopTimeout+")")
	fs.DurationVar(&o.TemporalWait, "temporal-wait", time.Minute, "at start, how long to wait for an unreachable Temporal frontend")
	fs.IntVar(&o.MaxActivities, "max-concurrent-activities", 100, "activity executions running at once (0: SDK default)")
	fs.IntVar(&o.MaxWorkflowTasks, "max-concurrent-workflow-tasks", 100, "workflow tasks running at once (0: SDK default)")
	fs.IntVar(&o.ActivityPollers, "activity-pollers", 4, "activity task pollers (0: SDK default)")
	fs.IntVar(&o.WorkflowPollers, "workflow-pollers", 4, "workflow task pollers (0: SDK default)")
	fs.IntVar(&o.DBMaxOpenConns, "db-max-open-conns", 20, "PostgreSQL connections at most")
	fs.Float64Var(&o.ActivitiesPerSecond, "activities-per-second", 0, "rate limit of this worker's activities (0: none)")
	o.ShutdownHTTPDeadline = 5 * time.Second
	if err := fs.Parse(args); err != nil {
		return cfg, o, err
	}
	if fs.NArg() > 0 {
		return cfg, o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for name, v := range map[string]int{"max-concurrent-activities": o.MaxActivities, "max-concurrent-workflow-tasks": o.MaxWorkflowTasks,
		"activity-pollers": o.ActivityPollers, "workflow-pollers": o.WorkflowPollers} {
		if v < 0 {
			return cfg, o, fmt.Errorf("-%s must be >= 0, got %s", name, strconv.Itoa(v))
		}
	}
	if o.DBMaxOpenConns < 1 {
		return cfg, o, fmt.Errorf("-db-max-open-conns must be >= 1, got %d", o.DBMaxOpenConns)
	}
	if o.StopTimeout < 0 {
		return cfg, o, fmt.Errorf("-stop-timeout must be >= 0, got %s", o.StopTimeout)
	}
	return cfg, o, nil
}

// run runs the worker until ctx is cancelled (stop releases the signal
// handler, so that a second signal kills the process) or the worker fails.
func run(ctx context.Context, stop context.CancelFunc, args []string) error {
	cfg, o, err := parse(args)
	if err != nil {
		return err
	}
	logger, err := obs.LoggerFromEnv("worker")
	if err != nil {
		return err
	}
	// Libraries that log through the default logger (migrations) log JSON too.
	slog.SetDefault(logger)
	if err := serve(ctx, stop, cfg, o, logger); err != nil {
		logger.Error("worker failed", "err", err)
		return err
	}
	return nil
}

func serve(ctx context.Context, stop context.CancelFunc, cfg config.Config, o options, logger *slog.Logger) error {
	logger.Info("worker starting", "temporal", cfg.TemporalAddress, "namespace", cfg.TemporalNamespace,
		"task_queue", cfg.TaskQueue, "metrics_addr", o.MetricsAddr)

	db, err := store.Open(ctx, cfg.DatabaseURL, o.DBMaxOpenConns)
	if err != nil {
		return err
	}
	defer db.Close()
	logger.Info("database migrated")

	m, err := obs.NewMetrics()
	if err != nil {
		return err
	}
	defer m.Close()
	own, err := newMetrics(m.Registry)
	if err != nil {
		return fmt.Errorf("register metrics: %w", err)
	}

	tc, err := obs.DialTemporal(ctx, cfg, logger, m, o.TemporalWait)
	if err != nil {
		return err
	}
	defer tc.Close()

	srv, err := obs.NewServer(o.MetricsAddr, m.Registry, logger,
		obs.Check{Name: "postgres", Check: db.Ping}, obs.TemporalCheck(tc))
	if err != nil {
		return err
	}
	srv.Start()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), o.ShutdownHTTPDeadline)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			logger.Warn("http shutdown", "err", err)
		}
	}()

	stopPprof, err := profiling.Serve(o.PprofAddr, logger)
	if err != nil {
		return err
	}
	defer stopPprof()

	fatal := make(chan error, 1)
	w := worker.New(tc, cfg.TaskQueue, worker.Options{
		MaxConcurrentActivityExecutionSize:     o.MaxActivities,
		MaxConcurrentWorkflowTaskExecutionSize: o.MaxWorkflowTasks,
		MaxConcurrentActivityTaskPollers:       o.ActivityPollers,
		MaxConcurrentWorkflowTaskPollers:       o.WorkflowPollers,
		WorkerActivitiesPerSecond:              o.ActivitiesPerSecond,
		WorkerStopTimeout:                      o.StopTimeout,
		Interceptors:                           []interceptor.WorkerInterceptor{own.interceptor()},
		OnFatalError: func(err error) {
			select {
			case fatal <- err:
			default:
			}
		},
	})
	workflows.Register(w)
	w.RegisterActivity(&activities.Activities{Store: db, Metrics: own, Topic: cfg.Topic})
	if err := w.Start(); err != nil {
		return fmt.Errorf("start worker on task queue %s: %w", cfg.TaskQueue, err)
	}
	logger.Info("worker polling", "task_queue", cfg.TaskQueue, "http", srv.Addr())

	var runErr error
	select {
	case <-ctx.Done():
		logger.Info("shutdown requested; letting running activities finish", "stop_timeout", o.StopTimeout.String())
	case err := <-fatal:
		runErr = fmt.Errorf("worker fatal error: %w", err)
	}
	stop()
	begin := time.Now()
	w.Stop()
	logger.Info("worker stopped", "took", time.Since(begin).Round(time.Millisecond).String())
	if runErr != nil && !errors.Is(runErr, context.Canceled) {
		return runErr
	}
	return nil
}
