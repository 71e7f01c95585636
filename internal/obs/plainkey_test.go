package obs

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/orderflow/orderflow/config"
)

// TestDialTemporalWarnsOfAPIKeyWithoutTLS: a Temporal API key with TLS
// forced off is warned of at start, without the key; with TLS (the default
// with a key) there is no warning.
func TestDialTemporalWarnsOfAPIKeyWithoutTLS(t *testing.T) {
	const key = "plain-key-6f1c"
	for _, tc := range []struct {
		tls  string
		warn bool
	}{{"false", true}, {"", false}, {"true", false}} {
		cfg := config.Defaults()
		cfg.TemporalAddress = "127.0.0.1:1"
		cfg.TemporalAPIKey = key
		cfg.TemporalTLS = tc.tls
		var buf bytes.Buffer
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, _ = DialTemporal(ctx, cfg, NewLogger(&buf, slog.LevelInfo, "t"), nil, time.Millisecond)
		if got := strings.Contains(buf.String(), "without TLS"); got != tc.warn {
			t.Errorf("TEMPORAL_TLS=%q: warned %v, want %v; log:\n%s", tc.tls, got, tc.warn, buf.String())
		}
		if strings.Contains(buf.String(), key) {
			t.Errorf("TEMPORAL_TLS=%q: the log shows the key", tc.tls)
		}
	}
}
