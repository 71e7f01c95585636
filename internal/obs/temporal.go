package obs

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v5"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"

	"github.com/orderflow/orderflow/config"
)

// TemporalOptions returns the Temporal client options of cfg
// (config.Config.TemporalClientOptions: environment configuration, API key,
// TLS) with the SDK logging through logger, reporting its metrics into m's
// registry when m is not nil, and with the interceptors ics (tracing's, for
// example; a worker made from the client uses those that are also worker
// interceptors).
func TemporalOptions(cfg config.Config, logger *slog.Logger, m *Metrics, ics ...interceptor.ClientInterceptor) (client.Options, error) {
	opts, err := cfg.TemporalClientOptions()
	if err != nil {
		return client.Options{}, err
	}
	opts.Logger = sdklog.NewStructuredLogger(logger.With("component", "temporal-sdk"))
	if m != nil {
		opts.MetricsHandler = m.SDKHandler
	}
	opts.Interceptors = append(opts.Interceptors, ics...)
	return opts, nil
}

// NewTemporalClient dials the Temporal frontend of cfg (TemporalOptions).
// It fails when the frontend cannot be reached.
func NewTemporalClient(ctx context.Context, cfg config.Config, logger *slog.Logger, m *Metrics, ics ...interceptor.ClientInterceptor) (client.Client, error) {
	opts, err := TemporalOptions(cfg, logger, m, ics...)
	if err != nil {
		return nil, err
	}
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("obs: dial temporal %s (namespace %s): %w", opts.HostPort, opts.Namespace, err)
	}
	return c, nil
}

// DialTemporal is NewTemporalClient, retried with backoff (0.5s doubling to
// 5s, with jitter) while the frontend is unreachable, for up to wait: a
// process started together with Temporal, or during its restart, waits for
// it instead of failing at once. It returns the last error when wait has
// passed or ctx ends.
func DialTemporal(ctx context.Context, cfg config.Config, logger *slog.Logger, m *Metrics, wait time.Duration,
	ics ...interceptor.ClientInterceptor) (client.Client, error) {
	if opts, err := cfg.TemporalClientOptions(); err == nil {
		warnPlainCredentials(opts, logger)
	}
	var last error
	c, err := backoff.Retry(ctx, func() (client.Client, error) {
		c, err := NewTemporalClient(ctx, cfg, logger, m, ics...)
		last = err
		return c, err
	},
		backoff.WithBackOff(&backoff.ExponentialBackOff{InitialInterval: 500 * time.Millisecond, Multiplier: 2,
			MaxInterval: 5 * time.Second, RandomizationFactor: 0.2}),
		backoff.WithMaxElapsedTime(wait),
		backoff.WithNotify(func(err error, d time.Duration) {
			logger.Warn("temporal unreachable; retrying", "in", d.String(), "err", err)
		}))
	if err != nil && last != nil {
		return nil, last
	}
	return c, err
}

// warnPlainCredentials warns when the client would send credentials (an API
// key) to Temporal without TLS, where anyone on the path can read them.
func warnPlainCredentials(opts client.Options, logger *slog.Logger) {
	if opts.Credentials != nil && opts.ConnectionOptions.TLS == nil {
		logger.Warn("a Temporal API key is configured without TLS: it is sent in clear text; set TEMPORAL_TLS=true (or leave it empty)",
			"temporal_address", opts.HostPort)
	}
}
