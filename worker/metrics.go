package main

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orderflow/orderflow/activities"
	"github.com/orderflow/orderflow/fsm"
)

// metrics are the worker's own Prometheus metrics: events by outcome and
// points awarded. It implements activities.Recorder. (Activity and local
// activity latency are the SDK's: temporal_activity_execution_latency and
// temporal_local_activity_execution_latency.)
type metrics struct {
	events     *prometheus.CounterVec
	pointsRows *prometheus.CounterVec
	points     *prometheus.CounterVec
	storeToRow prometheus.Histogram
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
		storeToRow: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "orderflow_event_store_to_row_seconds",
			Help:    "Time from the broker storing an event's message to the commit of its order_events row (the event's first delivery to reach the database).",
			Buckets: prometheus.ExponentialBuckets(0.005, 2.5, 15),
		}),
	}
	for _, c := range []prometheus.Collector{m.events, m.pointsRows, m.points, m.storeToRow} {
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

// ObserveStoreToRow implements activities.Recorder.
func (m *metrics) ObserveStoreToRow(d time.Duration) { m.storeToRow.Observe(d.Seconds()) }

// ObservePoints implements activities.Recorder.
func (m *metrics) ObservePoints(k fsm.PointsKind, points int64) {
	m.pointsRows.WithLabelValues(string(k)).Inc()
	if points < 0 {
		points = -points
	}
	m.points.WithLabelValues(string(k)).Add(float64(points))
}
