package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/orderflow/orderflow/activities"
	"github.com/orderflow/orderflow/config"
	"github.com/orderflow/orderflow/internal/backlog"
	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/internal/obs"
	"github.com/orderflow/orderflow/internal/profiling"
	"github.com/orderflow/orderflow/internal/tracing"
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
	PollerAutoscaling    bool
	StickyCacheSize      int
	StickyTimeout        time.Duration
	DBMaxOpenConns       int
	ActivitiesPerSecond  float64
	ShutdownHTTPDeadline time.Duration
	TemporalWait         time.Duration
	BrokerLagInterval    time.Duration
	// WorkflowVersion is the version of workflows.ChangeLocalActivities new
	// runs record (workflows.WriteVersionProvider).
	WorkflowVersion int
	// DeploymentName, when set, turns Worker Versioning on: the worker
	// polls as version BuildID of that Worker Deployment.
	DeploymentName, BuildID string
}

// parse reads the configuration: defaults, then environment, then flags.
func parse(args []string, out io.Writer) (config.Config, options, error) {
	var cfg config.Config
	var o options
	s := config.NewSet("worker", "Usage: worker [flags]   (run OrderWorkflow and its activities)", out)
	cfg.RegisterTemporal(s)
	cfg.RegisterDatabase(s)
	cfg.RegisterLog(s)
	// The topic is recorded on the dead letters of conflicting events; the
	// RocketMQ settings and the bridge's consumer group serve the
	// broker-side backlog metric, which the worker exports whether or not
	// a bridge runs.
	cfg.RegisterRocketMQ(s)
	cfg.RegisterConsumerGroup(s)
	w := func(flag, env, usage string) config.Setting {
		return config.Setting{Flag: flag, Env: "ORDERFLOW_WORKER_" + env, Usage: usage}
	}
	s.String(&o.MetricsAddr, "127.0.0.1:9090", w("metrics-addr", "METRICS_ADDR", "listen address of /metrics, /healthz and /readyz"))
	s.String(&o.PprofAddr, "", w("pprof-addr", "PPROF_ADDR", "listen address of /debug/pprof/ (empty: off)"))
	s.Duration(&o.StopTimeout, 30*time.Second, w("stop-timeout", "STOP_TIMEOUT", "on SIGTERM, how long running activities may take to finish"))
	s.Duration(&o.TemporalWait, time.Minute, w("temporal-wait", "TEMPORAL_WAIT", "at start, how long to wait for an unreachable Temporal frontend"))
	s.Int(&o.MaxActivities, 100, w("max-concurrent-activities", "MAX_CONCURRENT_ACTIVITIES", "activity executions running at once (0: SDK default)"))
	s.Int(&o.MaxWorkflowTasks, 100, w("max-concurrent-workflow-tasks", "MAX_CONCURRENT_WORKFLOW_TASKS", "workflow tasks running at once (0: SDK default)"))
	s.Int(&o.ActivityPollers, 4, w("activity-pollers", "ACTIVITY_POLLERS", "activity task pollers (0: SDK default)"))
	s.Int(&o.WorkflowPollers, 4, w("workflow-pollers", "WORKFLOW_POLLERS", "workflow task pollers (0: SDK default)"))
	s.Bool(&o.PollerAutoscaling, false, w("poller-autoscaling", "POLLER_AUTOSCALING",
		"let the server's feedback scale each kind of poller between 1 and its -activity-pollers or -workflow-pollers "+
			"(0: 100), keeping workflow polls on the shared task queue while the sticky one has a backlog; off: that many pollers, always"))
	s.Int(&o.StickyCacheSize, 0, w("sticky-cache-size", "STICKY_CACHE_SIZE",
		"workflow executions kept in the sticky cache, whose next task needs no replay of the history (0: SDK default, 10,000)"))
	s.Duration(&o.StickyTimeout, 0, w("sticky-schedule-to-start-timeout", "STICKY_SCHEDULE_TO_START_TIMEOUT",
		"how long a run's next workflow task waits for this worker on its sticky queue before any worker may take it (0: SDK default, 5s)"))
	s.Int(&o.DBMaxOpenConns, 20, w("db-max-open-conns", "DB_MAX_OPEN_CONNS", "PostgreSQL connections at most"))
	s.Float(&o.ActivitiesPerSecond, 0, w("activities-per-second", "ACTIVITIES_PER_SECOND", "rate limit of this worker's activities (0: none)"))
	s.Duration(&o.BrokerLagInterval, backlog.DefaultInterval, w("broker-lag-interval", "BROKER_LAG_INTERVAL",
		"how often to read the consumer group's offsets from the brokers for "+backlog.LagMetric+" (0: never)"))
	s.Int(&o.WorkflowVersion, workflows.LatestVersion, w("workflow-version", "WORKFLOW_VERSION",
		fmt.Sprintf("the %s version new order runs record: %d, the newest (a fresh run loads the order with its first event's step); "+
			"%d, which workers of 0.3.0 replay; %d, which workers of 0.2.0 replay; %d, which workers of 0.1.0 replay (keep the "+
			"release's own during a rollout from it, so that a rollback strands no run)",
			workflows.ChangeLocalActivities, workflows.LatestVersion, workflows.Release030Version, workflows.Release020Version,
			workflows.Release010Version)))
	s.String(&o.DeploymentName, "", w("deployment-name", "DEPLOYMENT_NAME",
		"Worker Deployment this worker belongs to; set, it turns Worker Versioning on (the worker takes the tasks of its version "+
			"only once that version is current: `temporal worker deployment set-current-version`); empty: unversioned"))
	s.String(&o.BuildID, "", w("build-id", "BUILD_ID", "this worker's version in the Worker Deployment (empty: the binary's commit, "+
		"when it was built from a clean checkout)"))
	o.ShutdownHTTPDeadline = 5 * time.Second
	if err := s.Parse(args, nil); err != nil {
		return cfg, o, err
	}
	if len(s.Args()) > 0 {
		return cfg, o, fmt.Errorf("unexpected arguments %q", s.Args())
	}
	for name, v := range map[string]int{"max-concurrent-activities": o.MaxActivities, "max-concurrent-workflow-tasks": o.MaxWorkflowTasks,
		"activity-pollers": o.ActivityPollers, "workflow-pollers": o.WorkflowPollers, "sticky-cache-size": o.StickyCacheSize} {
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
	if err := workflows.CheckWriteVersion(o.WorkflowVersion); err != nil {
		return cfg, o, fmt.Errorf("-workflow-version: %w", err)
	}
	if o.DeploymentName != "" && o.BuildID == "" {
		if o.BuildID = buildCommit(); o.BuildID == "" {
			return cfg, o, errors.New("-build-id is required with -deployment-name: this binary was not built from a clean checkout, so it has no commit to use")
		}
	}
	if o.BrokerLagInterval < 0 {
		return cfg, o, fmt.Errorf("-broker-lag-interval must be >= 0, got %s", o.BrokerLagInterval)
	}
	if o.BrokerLagInterval > 0 {
		for name, v := range map[string]string{"rocketmq-namesrv": cfg.RocketMQNamesrv, "topic": cfg.Topic, "consumer-group": cfg.ConsumerGroup} {
			if strings.TrimSpace(v) == "" {
				return cfg, o, fmt.Errorf("-%s must not be empty (or -broker-lag-interval 0)", name)
			}
		}
	}
	return cfg, o, nil
}

// run runs the worker until ctx is cancelled (stop releases the signal
// handler, so that a second signal kills the process) or the worker fails.
func run(ctx context.Context, stop context.CancelFunc, args []string) error {
	cfg, o, err := parse(args, os.Stderr)
	if err != nil {
		return err
	}
	logger, err := obs.NewLoggerAt(os.Stderr, cfg.LogLevel, "worker")
	if err != nil {
		return err
	}
	// Libraries that log through the default logger log JSON too.
	slog.SetDefault(logger)
	if err := serve(ctx, stop, cfg, o, logger); err != nil {
		logger.Error("worker failed", "err", err)
		return err
	}
	return nil
}

func serve(ctx context.Context, stop context.CancelFunc, cfg config.Config, o options, logger *slog.Logger) error {
	logger.Info("worker starting", "task_queue", cfg.TaskQueue, "metrics_addr", o.MetricsAddr)

	// Closed last: the spans of the last activities are flushed after the
	// worker stopped.
	tr, err := tracing.Start(ctx, "orderflow-worker", logger)
	if err != nil {
		return err
	}
	defer tr.Close(logger)
	ics, err := tr.TemporalInterceptors()
	if err != nil {
		return err
	}

	db, err := store.Open(ctx, cfg.DatabaseURL, o.DBMaxOpenConns, store.WithQueryTracer(tr.QueryTracer()))
	if err != nil {
		return err
	}
	defer db.Close()
	logger.Info("database schema checked")

	m, err := obs.NewMetrics()
	if err != nil {
		return err
	}
	defer m.Close()
	own, err := newMetrics(m.Registry)
	if err != nil {
		return fmt.Errorf("register metrics: %w", err)
	}
	stopLag, err := startBrokerLag(ctx, cfg, o.BrokerLagInterval, m.Registry, logger)
	if err != nil {
		return err
	}
	defer stopLag()

	tc, err := obs.DialTemporal(ctx, cfg, logger, m, o.TemporalWait, ics...)
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

	if o.StickyCacheSize > 0 {
		// Process-wide, and read when the first worker is created.
		worker.SetStickyWorkflowCacheSize(o.StickyCacheSize)
		logger.Info("sticky workflow cache", "size", o.StickyCacheSize)
	}
	fatal := make(chan error, 1)
	wo := worker.Options{
		MaxConcurrentActivityExecutionSize:     o.MaxActivities,
		MaxConcurrentWorkflowTaskExecutionSize: o.MaxWorkflowTasks,
		WorkerActivitiesPerSecond:              o.ActivitiesPerSecond,
		WorkerStopTimeout:                      o.StopTimeout,
		StickyScheduleToStartTimeout:           o.StickyTimeout,
		PreferredVersionProvider:               workflows.WriteVersionProvider(o.WorkflowVersion),
		DeploymentOptions:                      deploymentOptions(o),
		OnFatalError: func(err error) {
			select {
			case fatal <- err:
			default:
			}
		},
	}
	setPollers(&wo, o)
	w := worker.New(tc, cfg.TaskQueue, wo)
	workflows.Register(w)
	w.RegisterActivity(&activities.Activities{Store: db, Metrics: own, Topic: cfg.Topic})
	if err := w.Start(); err != nil {
		return fmt.Errorf("start worker on task queue %s: %w", cfg.TaskQueue, err)
	}
	logger.Info("worker polling", "task_queue", cfg.TaskQueue, "http", srv.Addr(), "workflow_version", o.WorkflowVersion,
		"deployment", o.DeploymentName, "build_id", o.BuildID, "poller_autoscaling", o.PollerAutoscaling)

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

// startBrokerLag exports the consumer group's broker-side backlog on reg,
// read every interval in the background until ctx is done or the returned
// stop is called; interval 0 turns it off. The backlog never stops the
// worker: a reader that cannot even be made (a name server list the client
// refuses) fails every read instead, counted and logged like any failure.
func startBrokerLag(ctx context.Context, cfg config.Config, interval time.Duration, reg prometheus.Registerer, logger *slog.Logger) (func(), error) {
	if interval == 0 {
		return func() {}, nil
	}
	// The reader is the worker's only RocketMQ client: its failures come
	// back as errors, which the collector counts and logs once per series,
	// so the client's own log lines (one per failed connection) are off.
	mq.UseSlog(logger, slog.LevelError+4)
	tlsConf, err := cfg.RocketMQTLSConfig()
	if err != nil {
		return nil, err
	}
	r, readerErr := backlog.NewReader(backlog.Config{NameServer: cfg.RocketMQNamesrv, AccessKey: cfg.RocketMQAccessKey,
		SecretKey: cfg.RocketMQSecretKey, TLS: tlsConf, Topic: cfg.Topic, Group: cfg.ConsumerGroup})
	read := func(context.Context) (backlog.Report, error) { return backlog.Report{}, readerErr }
	if readerErr == nil {
		read = r.Read
	}
	c := backlog.NewCollector(read, interval, logger.With("topic", cfg.Topic, "group", cfg.ConsumerGroup))
	if err := reg.Register(c); err != nil {
		if r != nil {
			_ = r.Close()
		}
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(lctx)
	}()
	return func() {
		cancel()
		<-done
		if r != nil {
			_ = r.Close()
		}
	}, nil
}

// deploymentOptions are the worker's Worker Versioning options: off without
// a deployment name; otherwise version BuildID of the deployment, with
// OrderWorkflow's runs moving to the deployment's current version at their
// next workflow task (AutoUpgrade; docs/design.md says why).
func deploymentOptions(o options) worker.DeploymentOptions {
	if o.DeploymentName == "" {
		return worker.DeploymentOptions{}
	}
	return worker.DeploymentOptions{
		UseVersioning:             true,
		Version:                   worker.WorkerDeploymentVersion{DeploymentName: o.DeploymentName, BuildID: o.BuildID},
		DefaultVersioningBehavior: workflow.VersioningBehaviorAutoUpgrade,
	}
}

// buildCommit is the commit the binary was built from, or "" when it is
// unknown or the checkout had changes.
func buildCommit() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	var rev string
	for _, st := range info.Settings {
		switch {
		case st.Key == "vcs.revision":
			rev = st.Value
		case st.Key == "vcs.modified" && st.Value == "true":
			return ""
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	return rev
}

// setPollers sets how the worker polls: a fixed number of pollers of each
// kind, or, with o.PollerAutoscaling, the SDK's poller autoscaling between
// one and that number. Autoscaling matters to a steady stream: fixed
// workflow pollers all turn to the worker's sticky queue while it reports
// a backlog, so a new run's first task, which waits on the shared task
// queue, waits until that backlog clears (docs/operating.md).
func setPollers(wo *worker.Options, o options) {
	if !o.PollerAutoscaling {
		wo.MaxConcurrentActivityTaskPollers = o.ActivityPollers
		wo.MaxConcurrentWorkflowTaskPollers = o.WorkflowPollers
		return
	}
	wo.ActivityTaskPollerBehavior = worker.NewPollerBehaviorAutoscaling(worker.PollerBehaviorAutoscalingOptions{
		MaximumNumberOfPollers: o.ActivityPollers})
	wo.WorkflowTaskPollerBehavior = worker.NewPollerBehaviorAutoscaling(worker.PollerBehaviorAutoscalingOptions{
		MaximumNumberOfPollers: o.WorkflowPollers})
}
