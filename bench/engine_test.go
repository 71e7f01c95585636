package main

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/orderflow/orderflow/config"
)

// TestNewEngine: each engine has ports, a folder and databases of its own,
// and its variables override those the benchmark inherited (exec keeps
// the last value of a key).
func TestNewEngine(t *testing.T) {
	cfg := config.Config{DatabaseURL: "postgres://orderflow:orderflow@127.0.0.1:5433/orderflow?sslmode=disable"}
	dev, err := newEngine("dev", 8, cfg, "/repo", t.TempDir())
	if err != nil || dev.Address != "127.0.0.1:7433" || dev.Metrics != "http://127.0.0.1:7442/metrics" ||
		dev.Data != "/repo/.data/bench-temporal-dev" || len(dev.Databases) != 0 || !slices.Equal(dev.ports(), []int{7433, 7442, 8433}) {
		t.Errorf("dev engine %+v, %v", dev, err)
	}
	srv, err := newEngine("server", 8, cfg, "/repo", t.TempDir())
	if err != nil || srv.Address != "127.0.0.1:7333" || srv.Namespace != "default" || len(srv.ports()) != 11 ||
		!slices.Equal(srv.Databases, []string{"bench_temporal_server", "bench_temporal_server_visibility"}) {
		t.Errorf("server engine %+v, %v", srv, err)
	}
	for k, v := range map[string]string{"ORDERFLOW_TEMPORAL_PROFILE": "dev", "ORDERFLOW_DATA": "/elsewhere",
		"ORDERFLOW_TEMPORAL_PORT": "7233", "ORDERFLOW_TEMPORAL_DB": "temporal", "ORDERFLOW_TEMPORAL_SHARDS": "4"} {
		t.Setenv(k, v)
	}
	last := map[string]string{}
	for _, kv := range srv.env() {
		k, v, _ := strings.Cut(kv, "=")
		last[k] = v
	}
	for k, want := range map[string]string{"ORDERFLOW_TEMPORAL_PROFILE": "server", "ORDERFLOW_DATA": srv.Data,
		"ORDERFLOW_TEMPORAL_PORT": "7333", "ORDERFLOW_TEMPORAL_UI_PORT": "8333", "ORDERFLOW_TEMPORAL_DB": "bench_temporal_server",
		"ORDERFLOW_TEMPORAL_SHARDS": "8", "ORDERFLOW_PG_PORT": "5433", "PATH": os.Getenv("PATH")} {
		if last[k] != want {
			t.Errorf("%s = %q, want %q", k, last[k], want)
		}
	}
}
