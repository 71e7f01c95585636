package main

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"

	"github.com/orderflow/orderflow/activities"
	"github.com/orderflow/orderflow/fsm"
)

// metrics are the worker's own Prometheus metrics: events by outcome,
// points awarded and activity latency. It implements activities.Recorder.
type metrics struct {
	events          *prometheus.CounterVec
	pointsRows      *prometheus.CounterVec
	points          *prometheus.CounterVec
	activityLatency *prometheus.HistogramVec
}

var _ activities.Recorder = (*metrics)(nil)

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orderflow_events_total",
			Help: "Order events applied by the worker, by outcome (duplicate counts repeats that reached the database).",
		}, []string{"outcome"}),
		pointsRows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orderflow_points_rows_total",
			Help: "Points ledger rows inserted, by kind.",
		}, []string{"kind"}),
		points: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orderflow_points_awarded_total",
			Help: "Absolute points moved by inserted ledger rows, by kind (refunds take these back).",
		}, []string{"kind"}),
		activityLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "orderflow_activity_duration_seconds",
			Help:    "Duration of one activity attempt, by activity and result.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"activity", "result"}),
	}
	for _, c := range []prometheus.Collector{m.events, m.pointsRows, m.points, m.activityLatency} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, o := range fsm.Outcomes {
		m.events.WithLabelValues(string(o))
	}
	for _, k := range []fsm.PointsKind{fsm.Purchase, fsm.Refund} {
		m.pointsRows.WithLabelValues(string(k))
		m.points.WithLabelValues(string(k))
	}
	return m, nil
}

// ObserveOutcome implements activities.Recorder.
func (m *metrics) ObserveOutcome(o fsm.Outcome) { m.events.WithLabelValues(string(o)).Inc() }

// ObservePoints implements activities.Recorder.
func (m *metrics) ObservePoints(k fsm.PointsKind, points int64) {
	m.pointsRows.WithLabelValues(string(k)).Inc()
	if points < 0 {
		points = -points
	}
	m.points.WithLabelValues(string(k)).Add(float64(points))
}

// interceptor returns a worker interceptor timing every activity attempt.
func (m *metrics) interceptor() interceptor.WorkerInterceptor {
	return &latencyInterceptor{hist: m.activityLatency}
}

type latencyInterceptor struct {
	interceptor.WorkerInterceptorBase
	hist *prometheus.HistogramVec
}

func (l *latencyInterceptor) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	i := &latencyActivity{hist: l.hist}
	i.Next = next
	return i
}

type latencyActivity struct {
	interceptor.ActivityInboundInterceptorBase
	hist *prometheus.HistogramVec
}

func (l *latencyActivity) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	start := time.Now()
	res, err := l.Next.ExecuteActivity(ctx, in)
	result := "ok"
	if err != nil {
		result = "error"
	}
	l.hist.WithLabelValues(activity.GetInfo(ctx).ActivityType.Name, result).Observe(time.Since(start).Seconds())
	return res, err
}
