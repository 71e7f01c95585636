package obs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.temporal.io/sdk/client"
)

// Check is one named readiness check. Check returns nil when the dependency
// is usable.
type Check struct {
	Name  string
	Check func(ctx context.Context) error
}

// TemporalCheck is a readiness check that asks the Temporal frontend for its
// health.
func TemporalCheck(c client.Client) Check {
	return Check{Name: "temporal", Check: func(ctx context.Context) error {
		if _, err := c.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
			return fmt.Errorf("check health: %w", err)
		}
		return nil
	}}
}

// CheckTimeout bounds each readiness check.
const CheckTimeout = 3 * time.Second

// DefaultCheckInterval is how often the server runs its readiness checks and
// refreshers in the background; requests serve the last result.
const DefaultCheckInterval = 5 * time.Second

// DefaultMaxInFlight caps the requests the server handles at once; more are
// answered 503 at once.
const DefaultMaxInFlight = 8

// Refresher is work the server runs in the background at its check interval,
// such as a collector reading the database, so that scrapes serve a cached
// result and cost no round trip.
type Refresher interface {
	Refresh(ctx context.Context)
}

// Server serves /metrics (the registry), /healthz (200 while the process
// serves) and /readyz (200 when every check passed at the last run, 503
// otherwise, with a JSON body naming each check's state and the result's
// age; the checks' errors go to the log only). The checks and the
// refreshers run in the background at the check interval, never per
// request, and at most MaxInFlight requests are handled at once. The
// readiness checks are exported on /metrics too (see ReadyMetric), so that
// alerts see a process that runs but is not ready.
type Server struct {
	logger *slog.Logger
	srv    *http.Server
	ln     net.Listener

	interval time.Duration
	inFlight chan struct{}

	mu         sync.Mutex
	checks     []Check
	refreshers []Refresher
	last       readyState
	done       chan error
	stopLoop   context.CancelFunc
	loopDone   chan struct{}
	recheck    chan struct{}
}

// readyState is the result of the last run of the checks; at is zero before
// the first run.
type readyState struct {
	ok      bool
	results []CheckResult
	at      time.Time
}

// Names of the readiness metrics: ReadyMetric is 1 when every readiness
// check passes (when /readyz answers 200), 0 otherwise; ReadyCheckMetric is
// 1 or 0 per check, labelled check. The checks run at each scrape.
const (
	ReadyMetric      = "orderflow_ready"
	ReadyCheckMetric = "orderflow_ready_check"
	ReadyAgeMetric   = "orderflow_ready_age_seconds"
)

// NewServer listens on addr (":0" picks a free port; see Addr), registers
// the readiness metrics on reg and prepares the handlers. Call Start to
// serve and Shutdown to stop.
func NewServer(addr string, reg *prometheus.Registry, logger *slog.Logger, checks ...Check) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("obs: listen on %s: %w", addr, err)
	}
	s := &Server{logger: logger, ln: ln, checks: checks, interval: DefaultCheckInterval,
		inFlight: make(chan struct{}, DefaultMaxInFlight), recheck: make(chan struct{}, 1)}
	if err := reg.Register(newReadiness(s)); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("obs: register readiness metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", s.ready)
	s.srv = &http.Server{Handler: s.limit(mux), ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second}
	return s, nil
}

// SetCheckInterval sets how often the checks and refreshers run (default
// DefaultCheckInterval). Call it before Start.
func (s *Server) SetCheckInterval(d time.Duration) { s.interval = d }

// SetMaxInFlight sets how many requests are handled at once (default
// DefaultMaxInFlight); more are answered 503. Call it before Start.
func (s *Server) SetMaxInFlight(n int) { s.inFlight = make(chan struct{}, n) }

// AddRefresher adds background work run at the check interval. Call it
// before Start.
func (s *Server) AddRefresher(r Refresher) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refreshers = append(s.refreshers, r)
}

// limit answers 503 to a request beyond the in-flight cap.
func (s *Server) limit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case s.inFlight <- struct{}{}:
			defer func() { <-s.inFlight }()
			next.ServeHTTP(w, r)
		default:
			http.Error(w, "too many requests in flight", http.StatusServiceUnavailable)
		}
	})
}

// NotReadyInterval is how often the checks run again while the last run
// found the process not ready (at start, in an outage), when shorter than
// the check interval, so that readiness is seen soon after it comes.
const NotReadyInterval = time.Second

// loop runs the checks and refreshers now and then at every interval (every
// NotReadyInterval while not ready) until ctx ends.
func (s *Server) loop(ctx context.Context) {
	defer close(s.loopDone)
	for {
		s.runOnce(ctx)
		next := s.interval
		if !s.lastState().ok {
			next = min(next, NotReadyInterval)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(next):
		case <-s.recheck:
		}
	}
}

// Recheck runs the checks again soon, without waiting for the interval:
// call it when a dependency the checks watch changes state (the consumer
// has started). It does not wait for the run.
func (s *Server) Recheck() {
	select {
	case s.recheck <- struct{}{}:
	default:
	}
}

// runOnce runs the checks, keeps their result, and runs the refreshers.
func (s *Server) runOnce(ctx context.Context) {
	ok, results := s.RunChecks(ctx)
	if ctx.Err() != nil {
		return
	}
	s.mu.Lock()
	s.last = readyState{ok: ok, results: results, at: time.Now()}
	refreshers := append([]Refresher(nil), s.refreshers...)
	s.mu.Unlock()
	for _, r := range refreshers {
		r.Refresh(ctx)
	}
}

// lastState is the result of the last run of the checks.
func (s *Server) lastState() readyState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// AddCheck adds a readiness check.
func (s *Server) AddCheck(c Check) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checks = append(s.checks, c)
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Start serves in the background and starts running the checks and
// refreshers at the check interval.
func (s *Server) Start() {
	lctx, cancel := context.WithCancel(context.Background())
	s.stopLoop, s.loopDone = cancel, make(chan struct{})
	go s.loop(lctx)
	s.done = make(chan error, 1)
	go func() {
		err := s.srv.Serve(s.ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		if err != nil {
			s.logger.Error("http server stopped", "addr", s.Addr(), "err", err)
		}
		s.done <- err
	}()
	s.logger.Info("http server listening", "addr", s.Addr())
}

// Shutdown stops the server, waiting for in-flight requests until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	if s.stopLoop != nil {
		s.stopLoop()
		<-s.loopDone
	}
	if err := s.srv.Shutdown(ctx); err != nil {
		return fmt.Errorf("obs: http shutdown: %w", err)
	}
	if s.done != nil {
		if err := <-s.done; err != nil {
			return fmt.Errorf("obs: http serve: %w", err)
		}
	} else {
		_ = s.ln.Close()
	}
	return nil
}

// CheckResult is one check's entry in the /readyz body: its name and state.
// The error is logged, never served: it may name hosts, users or databases.
type CheckResult struct {
	Name  string `json:"name"`
	OK    bool   `json:"ok"`
	Error error  `json:"-"`
}

// RunChecks runs every readiness check (each bounded by CheckTimeout),
// logs the failures and reports whether all passed.
func (s *Server) RunChecks(ctx context.Context) (bool, []CheckResult) {
	s.mu.Lock()
	checks := append([]Check(nil), s.checks...)
	s.mu.Unlock()
	ok := true
	results := make([]CheckResult, 0, len(checks))
	for _, c := range checks {
		cctx, cancel := context.WithTimeout(ctx, CheckTimeout)
		err := c.Check(cctx)
		cancel()
		r := CheckResult{Name: c.Name, OK: err == nil, Error: err}
		if err != nil {
			ok = false
			s.logger.Warn("readiness check failed", "check", c.Name, "err", err)
		}
		results = append(results, r)
	}
	return ok, results
}

// ready serves the last result of the checks; before the first run it
// answers 503 with no checks.
func (s *Server) ready(w http.ResponseWriter, _ *http.Request) {
	st := s.lastState()
	ready := st.ok && !st.at.IsZero()
	body := struct {
		Ready      bool          `json:"ready"`
		AgeSeconds *float64      `json:"age_seconds,omitempty"`
		Checks     []CheckResult `json:"checks"`
	}{Ready: ready, Checks: st.results}
	if !st.at.IsZero() {
		age := time.Since(st.at).Seconds()
		body.AgeSeconds = &age
	}
	if body.Checks == nil {
		body.Checks = []CheckResult{}
	}
	w.Header().Set("Content-Type", "application/json")
	if !ready {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(body)
}

// readiness exports the last result of the server's readiness checks as
// gauges, with its age.
type readiness struct {
	s     *Server
	ready *prometheus.Desc
	check *prometheus.Desc
	age   *prometheus.Desc
}

func newReadiness(s *Server) *readiness {
	return &readiness{
		s: s,
		ready: prometheus.NewDesc(ReadyMetric,
			"1 when every readiness check passed at the last run (/readyz answers 200), 0 otherwise; the checks run in the background.", nil, nil),
		check: prometheus.NewDesc(ReadyCheckMetric,
			"1 when the readiness check passed at the last run, 0 otherwise, by check.", []string{"check"}, nil),
		age: prometheus.NewDesc(ReadyAgeMetric,
			"Seconds since the readiness checks last ran (absent before the first run).", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (r *readiness) Describe(ch chan<- *prometheus.Desc) {
	ch <- r.ready
	ch <- r.check
	ch <- r.age
}

// Collect implements prometheus.Collector.
func (r *readiness) Collect(ch chan<- prometheus.Metric) {
	st := r.s.lastState()
	ch <- prometheus.MustNewConstMetric(r.ready, prometheus.GaugeValue, boolValue(st.ok && !st.at.IsZero()))
	if !st.at.IsZero() {
		ch <- prometheus.MustNewConstMetric(r.age, prometheus.GaugeValue, time.Since(st.at).Seconds())
	}
	for _, c := range st.results {
		ch <- prometheus.MustNewConstMetric(r.check, prometheus.GaugeValue, boolValue(c.OK), c.Name)
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
