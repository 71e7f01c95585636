package obs

import (
	"context"
	"fmt"
	"log/slog"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/orderflow/orderflow/config"
)

// NewTemporalClient dials the Temporal frontend of cfg (address and
// namespace) with the SDK logging through logger and, when m is not nil,
// reporting its metrics into m's registry. It fails when the frontend cannot
// be reached.
func NewTemporalClient(ctx context.Context, cfg config.Config, logger *slog.Logger, m *Metrics) (client.Client, error) {
	opts := client.Options{
		HostPort:  cfg.TemporalAddress,
		Namespace: cfg.TemporalNamespace,
		Logger:    sdklog.NewStructuredLogger(logger.With("component", "temporal-sdk")),
	}
	if m != nil {
		opts.MetricsHandler = m.SDKHandler
	}
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("obs: dial temporal %s (namespace %s): %w", cfg.TemporalAddress, cfg.TemporalNamespace, err)
	}
	return c, nil
}
