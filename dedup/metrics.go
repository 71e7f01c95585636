package dedup

import "github.com/prometheus/client_golang/prometheus"

// Redis operations, the values of the "op" label.
const (
	opGet = "get"
	opSet = "set"
)

// Metrics are the duplicate filter's Prometheus metrics.
type Metrics struct {
	lookups             *prometheus.CounterVec
	bloomFalsePositives prometheus.Counter
	redisErrors         *prometheus.CounterVec
}

// tierResults are the results each tier can give.
var tierResults = map[string][]string{
	TierInFlight: {ResultHit, ResultMiss, ResultConflict},
	TierBloom:    {ResultHit, ResultMiss},
	TierRedis:    {ResultHit, ResultMiss, ResultConflict, ResultError, ResultSkipped},
	TierLedger:   {ResultHit, ResultMiss, ResultConflict, ResultError},
}

// NewMetrics registers the filter's metrics with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := newMetrics()
	for _, c := range []prometheus.Collector{m.lookups, m.bloomFalsePositives, m.redisErrors} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func newMetrics() *Metrics {
	m := &Metrics{
		lookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orderflow_bridge_dedup_lookups_total",
			Help: "Lookups of the bridge's duplicate filter, by tier (inflight, bloom, redis, ledger) and result: hit (inflight: this process is delivering the same business key with the same content hash, the message waits for that delivery and is acked without a signal once it succeeded; bloom: maybe seen; redis, ledger: the same business key with the same content hash, the message is acked without a signal), miss, conflict (the key with another content hash), error (failed or timed out), skipped (redis cooling down after a failure).",
		}, []string{"tier", "result"}),
		bloomFalsePositives: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "orderflow_bridge_dedup_bloom_false_positives_total",
			Help: "Bloom filter hits that neither Redis nor the ledger confirmed: true false positives, copies of a conflicting event, and events signalled but not yet recorded while Redis was unavailable. The message was signalled.",
		}),
		redisErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orderflow_bridge_dedup_redis_errors_total",
			Help: "Failed or timed-out Redis calls of the duplicate filter, by operation (get, set); the filter moved on without Redis.",
		}, []string{"op"}),
	}
	for tier, results := range tierResults {
		for _, r := range results {
			m.lookups.WithLabelValues(tier, r)
		}
	}
	for _, op := range []string{opGet, opSet} {
		m.redisErrors.WithLabelValues(op)
	}
	return m
}

func (m *Metrics) lookup(tier, result string) { m.lookups.WithLabelValues(tier, result).Inc() }
