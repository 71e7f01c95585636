package backlog

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultInterval is how often Collector reads the brokers' offsets.
const DefaultInterval = 15 * time.Second

// Metric names Collector exports.
const (
	LagMetric    = "orderflow_broker_lag_messages"
	ErrorsMetric = "orderflow_broker_lag_read_errors_total"
)

// ReadFunc reads a backlog report (Reader.Read).
type ReadFunc func(context.Context) (Report, error)

// Collector exports the broker-side backlog to Prometheus: one gauge per
// queue, read in the background by Run every interval (never during a
// scrape, so a slow or unreachable broker cannot slow /metrics down), and
// a counter of failed reads. After a failed read the last figures stay
// exported until they are older than four intervals; then no series is
// exported until a read succeeds again.
type Collector struct {
	read     ReadFunc
	interval time.Duration
	log      *slog.Logger

	lag    *prometheus.Desc
	errors prometheus.Counter

	mu      sync.Mutex
	last    Report
	ok      time.Time // when last was read
	failing bool      // the latest read failed
}

// NewCollector returns a collector that reads with read every interval
// (DefaultInterval when <= 0) once Run runs; failures are logged on log.
func NewCollector(read ReadFunc, interval time.Duration, log *slog.Logger) *Collector {
	if interval <= 0 {
		interval = DefaultInterval
	}
	return &Collector{
		read:     read,
		interval: interval,
		log:      log,
		lag: prometheus.NewDesc(LagMetric,
			"Messages stored on the broker that the consumer group has not consumed, per queue of the topic and of the group's retry topic: "+
				"max offset - committed offset (max - min where the group has committed none), read from the brokers' offsets.",
			[]string{"group", "topic", "broker", "queue"}, nil),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: ErrorsMetric,
			Help: "Reads of the brokers' offsets for " + LagMetric + " that failed (name server or broker unreachable, topic missing).",
		}),
	}
}

// Run reads at once, then every interval, until ctx is done.
func (c *Collector) Run(ctx context.Context) {
	t := time.NewTicker(c.interval)
	defer t.Stop()
	for {
		c.Refresh(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Refresh reads once, bounded by the interval, and keeps the report. Every
// failure is counted; the first of a series is logged as a warning (the
// others at debug level), and the recovery after it.
func (c *Collector) Refresh(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, c.interval)
	defer cancel()
	rep, err := c.read(rctx)
	if err != nil && ctx.Err() != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.errors.Inc()
		level := slog.LevelWarn
		if c.failing {
			level = slog.LevelDebug
		}
		c.failing = true
		c.log.Log(ctx, level, "cannot read the broker-side backlog; "+ErrorsMetric+" counts the failed reads", "err", err)
		return
	}
	if c.failing {
		c.log.Info("broker-side backlog readable again", "total", rep.Total)
	}
	c.last, c.ok, c.failing = rep, time.Now(), false
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.lag
	c.errors.Describe(ch)
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.errors.Collect(ch)
	c.mu.Lock()
	rep, ok := c.last, c.ok
	c.mu.Unlock()
	if ok.IsZero() || time.Since(ok) > 4*c.interval {
		return
	}
	for _, q := range rep.Queues {
		ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(q.Lag),
			rep.Group, q.Topic, q.Broker, strconv.Itoa(q.Queue))
	}
}
