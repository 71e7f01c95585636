package bridge

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orderflow/orderflow/message"
	"github.com/orderflow/orderflow/wire"
)

// Message results, the values of the "result" label.
const (
	ResultSignalled = "signalled"
	ResultParked    = "parked"
	ResultRetry     = "retry"
	// ResultDuplicate: the duplicate filter confirmed the event was already
	// durably signalled or recorded, or this process signalled it while the
	// message waited; acked without a signal.
	ResultDuplicate = "duplicate"
)

// Metrics are the bridge's Prometheus metrics.
type Metrics struct {
	messages      *prometheus.CounterVec
	rejections    *prometheus.CounterVec
	mismatches    *prometheus.CounterVec
	attemptErrors *prometheus.CounterVec
	eventLatency  prometheus.Histogram
	storeLatency  prometheus.Histogram
	bornToStore   prometheus.Histogram
	handleSeconds *prometheus.HistogramVec
}

// latencyBuckets span 5ms to about 20 minutes: redelivery after an outage
// takes minutes, and the time since occurred_at includes the producer's lag.
var latencyBuckets = prometheus.ExponentialBuckets(0.005, 2.5, 15)

// NewMetrics registers the bridge's metrics, and the consumer's figures c
// reads, with reg.
func NewMetrics(reg prometheus.Registerer, c *ConsumerStats) (*Metrics, error) {
	m := &Metrics{
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orderflow_bridge_messages_total",
			Help: "Messages handled, by result: signalled (delivered to Temporal, acked), duplicate (Redis or the ledger confirmed the event was already signalled or recorded with the same content, or this process signalled it while the message waited, acked without a signal), parked (dead letter committed, acked), retry (not acked, the broker delivers it again).",
		}, []string{"result"}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orderflow_bridge_rejections_total",
			Help: "Invalid messages parked in dead_letters, by rejection kind.",
		}, []string{"reason"}),
		mismatches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orderflow_bridge_envelope_mismatch_total",
			Help: "Valid messages whose keys or tag disagree with the body (the body wins), by field.",
		}, []string{"field"}),
		attemptErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orderflow_bridge_attempt_errors_total",
			Help: "Failed attempts to deliver an event to Temporal or to park a dead letter in PostgreSQL, by target.",
		}, []string{"target"}),
		eventLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "orderflow_bridge_event_latency_seconds",
			Help:    "Time from an event's occurred_at to its acceptance by Temporal.",
			Buckets: latencyBuckets,
		}),
		storeLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "orderflow_bridge_store_latency_seconds",
			Help:    "Time from the broker storing a message to the bridge acking it (signalled, duplicate or parked).",
			Buckets: latencyBuckets,
		}),
		bornToStore: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "orderflow_bridge_publish_to_store_seconds",
			Help:    "Time from the producer's send (the message's born timestamp, on the producer's clock) to the broker storing it, for each message the bridge acks.",
			Buckets: latencyBuckets,
		}),
		handleSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "orderflow_bridge_handle_seconds",
			Help:    "Time the bridge spent on one message, by result.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 14),
		}, []string{"result"}),
	}
	for _, r := range []string{ResultSignalled, ResultDuplicate, ResultParked, ResultRetry} {
		m.messages.WithLabelValues(r)
	}
	for _, k := range wire.Kinds {
		m.rejections.WithLabelValues(k)
	}
	for _, f := range []string{message.MismatchKeys, message.MismatchTag} {
		m.mismatches.WithLabelValues(f)
	}
	for _, t := range []string{targetTemporal, targetPostgres} {
		m.attemptErrors.WithLabelValues(t)
	}
	collectors := []prometheus.Collector{m.messages, m.rejections, m.mismatches, m.attemptErrors,
		m.eventLatency, m.storeLatency, m.bornToStore, m.handleSeconds, c}
	for _, col := range collectors {
		if err := reg.Register(col); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// ConsumerSource is what ConsumerStats reads from the consumer.
type ConsumerSource interface {
	InFlight() int
	Rejected() int64
	Lag() map[string]int64
}

// ConsumerStats exports the consumer's own figures when scraped: callbacks
// in flight, messages handed back during shutdown, and the lag per topic.
type ConsumerStats struct {
	src      func() ConsumerSource
	inFlight *prometheus.Desc
	rejected *prometheus.Desc
	lag      *prometheus.Desc
}

// NewConsumerStats reads the consumer src returns (nil before it exists)
// at each scrape.
func NewConsumerStats(src func() ConsumerSource) *ConsumerStats {
	return &ConsumerStats{
		src: src,
		inFlight: prometheus.NewDesc("orderflow_bridge_in_flight",
			"Messages being handled now.", nil, nil),
		rejected: prometheus.NewDesc("orderflow_bridge_shutdown_handed_back_total",
			"Messages handed back unprocessed because the bridge was stopping.", nil, nil),
		lag: prometheus.NewDesc("orderflow_bridge_consumer_lag",
			"Messages stored but not yet consumed in the queues this instance holds, per topic (the client learns queue ends from its pulls; the retry topic appears as %RETRY%group).",
			[]string{"topic"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (s *ConsumerStats) Describe(ch chan<- *prometheus.Desc) {
	ch <- s.inFlight
	ch <- s.rejected
	ch <- s.lag
}

// Collect implements prometheus.Collector.
func (s *ConsumerStats) Collect(ch chan<- prometheus.Metric) {
	src := s.src()
	if src == nil {
		ch <- prometheus.MustNewConstMetric(s.inFlight, prometheus.GaugeValue, 0)
		ch <- prometheus.MustNewConstMetric(s.rejected, prometheus.CounterValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(s.inFlight, prometheus.GaugeValue, float64(src.InFlight()))
	ch <- prometheus.MustNewConstMetric(s.rejected, prometheus.CounterValue, float64(src.Rejected()))
	for topic, lag := range src.Lag() {
		ch <- prometheus.MustNewConstMetric(s.lag, prometheus.GaugeValue, float64(lag), topic)
	}
}

// ProducerGaps are the suspected losses of one producer's sequence: its
// holes open longer than the window, and the messages in them.
type ProducerGaps struct {
	ProducerID string
	Gaps       int64
	Missing    int64
}

// GapsFunc reads the suspected losses of every producer seen.
type GapsFunc func(ctx context.Context) ([]ProducerGaps, error)

// DefaultGapSeries is how many producers get series of their own unless
// NewSequenceStats is told otherwise.
const DefaultGapSeries = 20

// SequenceStats exports the suspected losses. They are the database's view,
// the same on every bridge. Refresh reads them (run it in the background,
// see obs.Server.AddRefresher); a scrape serves the last reading, with its
// age, and costs no database round trip.
//
// The label set is bounded: only watched producers with suspected losses
// get series of their own (orderflow_sequence_gaps and
// orderflow_sequence_missing_messages, by producer_id), at most a fixed
// number of them, those missing the most messages. Totals without the label
// count every producer: the watched ones (every producer, unless an
// allow-list names the watched ones) and, apart, the unwatched ones, whose
// losses never raise a per-producer series.
type SequenceStats struct {
	read    GapsFunc
	log     *slog.Logger
	series  int
	watched map[string]bool // nil: every producer is watched

	gaps, missing, age, producers *prometheus.Desc
	watchedProducers, watchedGaps, watchedMissing,
	unwatchedProducers, unwatchedGaps, unwatchedMissing *prometheus.Desc

	mu   sync.Mutex
	last gapReading
	at   time.Time
}

// gapTotals sums the suspected losses of a set of producers.
type gapTotals struct {
	producers, gaps, missing int64
}

func (t *gapTotals) add(p ProducerGaps) {
	t.producers++
	t.gaps += p.Gaps
	t.missing += p.Missing
}

// gapReading is one reading, ready to serve.
type gapReading struct {
	known              int
	top                []ProducerGaps // watched, with suspected losses, most missing first
	watched, unwatched gapTotals
}

// SequenceReadTimeout bounds one reading of the suspected losses.
const SequenceReadTimeout = 5 * time.Second

// NewSequenceStats reads the suspected losses with read at each Refresh
// (within SequenceReadTimeout; on failure it keeps the last reading and logs
// a warning). At most series producers (DefaultGapSeries when series < 1)
// get series of their own; watched, when not empty, lists the producer IDs
// whose losses alert (empty: every producer's).
func NewSequenceStats(read GapsFunc, log *slog.Logger, series int, watched []string) *SequenceStats {
	if series < 1 {
		series = DefaultGapSeries
	}
	s := &SequenceStats{read: read, log: log, series: series}
	if len(watched) > 0 {
		s.watched = map[string]bool{}
		for _, id := range watched {
			s.watched[id] = true
		}
	}
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	s.gaps = desc("orderflow_sequence_gaps",
		"Holes in a watched producer's sequence open longer than the gap window (suspected losses), per producer; only producers with such holes, "+
			"at most -gap-series of them (those missing the most messages).", "producer_id")
	s.missing = desc("orderflow_sequence_missing_messages",
		"Messages in the holes of orderflow_sequence_gaps, per producer (the same producers).", "producer_id")
	s.age = desc("orderflow_sequence_gaps_age_seconds",
		"Seconds since the suspected losses were last read (absent before the first reading).")
	s.producers = desc("orderflow_sequence_producers", "Producers whose sequence numbers are recorded (retired by orderflow prune).")
	s.watchedProducers = desc("orderflow_sequence_watched_gap_producers",
		"Watched producers (every producer unless -gap-producers lists them) with suspected losses.")
	s.watchedGaps = desc("orderflow_sequence_watched_gaps", "Holes open longer than the gap window, over every watched producer.")
	s.watchedMissing = desc("orderflow_sequence_watched_missing_messages", "Messages in those holes, over every watched producer.")
	s.unwatchedProducers = desc("orderflow_sequence_unwatched_gap_producers",
		"Producers left out of -gap-producers with suspected losses (0 without -gap-producers).")
	s.unwatchedGaps = desc("orderflow_sequence_unwatched_gaps", "Holes open longer than the gap window, over the unwatched producers.")
	s.unwatchedMissing = desc("orderflow_sequence_unwatched_missing_messages", "Messages in those holes, over the unwatched producers.")
	return s
}

// Refresh reads the suspected losses and keeps them for the next scrapes.
func (s *SequenceStats) Refresh(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, SequenceReadTimeout)
	defer cancel()
	ps, err := s.read(ctx)
	if err != nil {
		s.log.Warn("cannot read the producers' sequence gaps for /metrics", "err", err)
		return
	}
	r := s.summarize(ps)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last, s.at = r, time.Now()
}

// summarize splits a reading into the watched and unwatched producers'
// totals and the watched producers that get series of their own.
func (s *SequenceStats) summarize(ps []ProducerGaps) gapReading {
	r := gapReading{known: len(ps)}
	for _, p := range ps {
		switch {
		case p.Gaps == 0:
		case s.watched == nil || s.watched[p.ProducerID]:
			r.watched.add(p)
			r.top = append(r.top, p)
		default:
			r.unwatched.add(p)
		}
	}
	sort.Slice(r.top, func(i, j int) bool {
		a, b := r.top[i], r.top[j]
		if a.Missing != b.Missing {
			return a.Missing > b.Missing
		}
		return a.ProducerID < b.ProducerID
	})
	if len(r.top) > s.series {
		r.top = r.top[:s.series]
	}
	return r
}

// Describe implements prometheus.Collector.
func (s *SequenceStats) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{s.gaps, s.missing, s.age, s.producers, s.watchedProducers, s.watchedGaps,
		s.watchedMissing, s.unwatchedProducers, s.unwatchedGaps, s.unwatchedMissing} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: it serves the last reading.
func (s *SequenceStats) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	r, at := s.last, s.at
	s.mu.Unlock()
	if at.IsZero() {
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(s.age, time.Since(at).Seconds())
	gauge(s.producers, float64(r.known))
	for _, t := range []struct {
		totals                   gapTotals
		producers, gaps, missing *prometheus.Desc
	}{
		{r.watched, s.watchedProducers, s.watchedGaps, s.watchedMissing},
		{r.unwatched, s.unwatchedProducers, s.unwatchedGaps, s.unwatchedMissing},
	} {
		gauge(t.producers, float64(t.totals.producers))
		gauge(t.gaps, float64(t.totals.gaps))
		gauge(t.missing, float64(t.totals.missing))
	}
	for _, p := range r.top {
		gauge(s.gaps, float64(p.Gaps), p.ProducerID)
		gauge(s.missing, float64(p.Missing), p.ProducerID)
	}
}
