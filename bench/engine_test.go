package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/orderflow/orderflow/config"
)

// TestNewEngine: each engine has ports, a folder and (the server) a
// PostgreSQL with databases of its own,
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
	if err != nil || srv.Address != "127.0.0.1:7333" || srv.Namespace != "default" || len(srv.ports()) != 12 || !slices.Contains(srv.ports(), 7343) ||
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
		"ORDERFLOW_TEMPORAL_SHARDS": "8", "ORDERFLOW_PG_PORT": "5433", "ORDERFLOW_TEMPORAL_PG_PORT": "7343", "PATH": os.Getenv("PATH")} {
		if last[k] != want {
			t.Errorf("%s = %q, want %q", k, last[k], want)
		}
	}
}

// TestEngineStore: the server engine's PostgreSQL keeps its data in the
// engine's folder, its postmaster is the first line of postmaster.pid
// there, and clear removes the folder; the dev engine has none.
func TestEngineStore(t *testing.T) {
	cfg := config.Config{DatabaseURL: "postgres://orderflow:orderflow@127.0.0.1:5432/orderflow"}
	root := t.TempDir()
	dev, err := newEngine("dev", 4, cfg, root, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if pid, err := dev.storePID(); pid != 0 || err != nil || dev.StoreData != "" {
		t.Errorf("dev engine: postmaster %d, %v, data %q; want none", pid, err, dev.StoreData)
	}
	srv, err := newEngine("server", 4, cfg, root, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, ".data", "bench-temporal-server", "temporal-server", "postgres"); srv.StoreData != want {
		t.Errorf("server's PostgreSQL in %q, want %q", srv.StoreData, want)
	}
	if _, err := srv.storePID(); err == nil {
		t.Error("a postmaster without postmaster.pid")
	}
	if err := os.MkdirAll(srv.StoreData, 0o700); err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(srv.StoreData, "postmaster.pid")
	for text, want := range map[string]int{"4242\n" + srv.StoreData + "\n1700000000\n7343\n": 4242, "\n": 0, "x\n": 0} {
		if err := os.WriteFile(pidFile, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if pid, err := srv.storePID(); pid != want || (err == nil) != (want > 0) {
			t.Errorf("postmaster.pid %q: %d, %v; want %d", text, pid, err, want)
		}
	}
	if err := srv.clear(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(srv.Data); !os.IsNotExist(err) {
		t.Errorf("after clear, the engine's folder: %v", err)
	}
	// Kept elsewhere, behind a link (user postgres cannot reach the
	// folder): clear removes both.
	elsewhere := filepath.Join(t.TempDir(), "temporal-postgres")
	if err := os.MkdirAll(filepath.Join(elsewhere, "base"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(srv.StoreData), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, srv.StoreData); err != nil {
		t.Fatal(err)
	}
	if err := srv.clear(); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{srv.Data, elsewhere} {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("after clear, %s: %v", dir, err)
		}
	}
}
