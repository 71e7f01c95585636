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

// Server serves /metrics (the registry), /healthz (200 while the process
// serves) and /readyz (200 when every check passes, 503 otherwise, with a
// JSON body naming each check's result). The readiness checks are exported
// on /metrics too (see ReadyMetric), so that alerts see a process that runs
// but is not ready.
type Server struct {
	logger *slog.Logger
	srv    *http.Server
	ln     net.Listener

	mu     sync.Mutex
	checks []Check
	done   chan error
}

// Names of the readiness metrics: ReadyMetric is 1 when every readiness
// check passes (when /readyz answers 200), 0 otherwise; ReadyCheckMetric is
// 1 or 0 per check, labelled check. The checks run at each scrape.
const (
	ReadyMetric      = "orderflow_ready"
	ReadyCheckMetric = "orderflow_ready_check"
)

// NewServer listens on addr (":0" picks a free port; see Addr), registers
// the readiness metrics on reg and prepares the handlers. Call Start to
// serve and Shutdown to stop.
func NewServer(addr string, reg *prometheus.Registry, logger *slog.Logger, checks ...Check) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("obs: listen on %s: %w", addr, err)
	}
	s := &Server{logger: logger, ln: ln, checks: checks}
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
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	return s, nil
}

// AddCheck adds a readiness check.
func (s *Server) AddCheck(c Check) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checks = append(s.checks, c)
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Start serves in the background.
func (s *Server) Start() {
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

// CheckResult is one check's entry in the /readyz body.
type CheckResult struct {
	Name  string `json:"name"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// RunChecks runs every readiness check (each bounded by CheckTimeout) and
// reports whether all passed.
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
		r := CheckResult{Name: c.Name, OK: err == nil}
		if err != nil {
			ok = false
			r.Error = err.Error()
		}
		results = append(results, r)
	}
	return ok, results
}

func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	ok, results := s.RunChecks(r.Context())
	w.Header().Set("Content-Type", "application/json")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
		s.logger.Warn("not ready", "checks", results)
	}
	_ = json.NewEncoder(w).Encode(struct {
		Ready  bool          `json:"ready"`
		Checks []CheckResult `json:"checks"`
	}{ok, results})
}

// readiness exports the server's readiness checks as gauges, running them
// at each scrape.
type readiness struct {
	s     *Server
	ready *prometheus.Desc
	check *prometheus.Desc
}

func newReadiness(s *Server) *readiness {
	return &readiness{
		s: s,
		ready: prometheus.NewDesc(ReadyMetric,
			"1 when every readiness check passes (/readyz answers 200), 0 otherwise; the checks run at each scrape.", nil, nil),
		check: prometheus.NewDesc(ReadyCheckMetric,
			"1 when the readiness check passes, 0 otherwise, by check.", []string{"check"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (r *readiness) Describe(ch chan<- *prometheus.Desc) {
	ch <- r.ready
	ch <- r.check
}

// Collect implements prometheus.Collector.
func (r *readiness) Collect(ch chan<- prometheus.Metric) {
	ok, results := r.s.RunChecks(context.Background())
	ch <- prometheus.MustNewConstMetric(r.ready, prometheus.GaugeValue, boolValue(ok))
	for _, c := range results {
		ch <- prometheus.MustNewConstMetric(r.check, prometheus.GaugeValue, boolValue(c.OK), c.Name)
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
