package obs

import (
	"fmt"
	"io"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/uber-go/tally/v4"
	tallyprom "github.com/uber-go/tally/v4/prometheus"
	"go.temporal.io/sdk/client"
	sdktally "go.temporal.io/sdk/contrib/tally"
)

// Metrics is a process's Prometheus registry. It holds the Go runtime and
// process collectors, the project's own collectors (register them on
// Registry) and, through SDKHandler, the Temporal SDK's metrics.
type Metrics struct {
	// Registry is what /metrics serves.
	Registry *prometheus.Registry
	// SDKHandler is the Temporal SDK metrics handler feeding Registry; pass
	// it to client.Options.MetricsHandler (NewTemporalClient does).
	SDKHandler client.MetricsHandler

	closer io.Closer
}

// sdkReportInterval is how often the SDK's tally scope flushes to Prometheus.
const sdkReportInterval = time.Second

// NewMetrics returns a fresh registry with the runtime collectors and the
// Temporal SDK bridge. Close it when the process stops.
func NewMetrics() (*Metrics, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, fmt.Errorf("obs: register go collector: %w", err)
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, fmt.Errorf("obs: register process collector: %w", err)
	}
	var regErr error
	reporter := tallyprom.NewReporter(tallyprom.Options{
		Registerer:      reg,
		OnRegisterError: func(err error) { regErr = err },
		// Histograms, not summaries: they aggregate across processes in
		// Prometheus queries (histogram_quantile over every worker).
		DefaultTimerType:        tallyprom.HistogramTimerType,
		DefaultHistogramBuckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	})
	scope, closer := tally.NewRootScope(tally.ScopeOptions{
		CachedReporter:  reporter,
		Separator:       tallyprom.DefaultSeparator,
		SanitizeOptions: &sdktally.PrometheusSanitizeOptions,
	}, sdkReportInterval)
	scope = sdktally.NewPrometheusNamingScope(scope)
	if regErr != nil {
		_ = closer.Close()
		return nil, fmt.Errorf("obs: temporal metrics reporter: %w", regErr)
	}
	return &Metrics{Registry: reg, SDKHandler: sdktally.NewMetricsHandler(scope), closer: closer}, nil
}

// Close stops the SDK metrics reporting loop.
func (m *Metrics) Close() error {
	if m == nil || m.closer == nil {
		return nil
	}
	if err := m.closer.Close(); err != nil {
		return fmt.Errorf("obs: close metrics scope: %w", err)
	}
	return nil
}
