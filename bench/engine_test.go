package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/orderflow/orderflow/config"
)

func TestParseEngines(t *testing.T) {
	specs, err := parseEngines(" server , dev")
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 2 || specs[0].Name != "server" || specs[0].Profile != "server" || specs[1].Name != "dev" || specs[1].Profile != "dev" {
		t.Errorf("engines %+v, want server (profile server) then dev (profile dev), both started by the benchmark", specs)
	}
	for _, bad := range []string{"", "dev,", "dev,server,dev", "sqlite", "stack"} {
		if _, err := parseEngines(bad); err == nil {
			t.Errorf("parseEngines(%q) accepted it", bad)
		}
	}
}

func TestTemporalPorts(t *testing.T) {
	if got := temporalPorts("server", 7333, 8333); !slices.Equal(got, []int{7333, 7334, 7335, 7336, 7337, 7338, 7339, 7340, 7341, 7342, 8333}) {
		t.Errorf("server profile ports %v", got)
	}
	if got := temporalPorts("dev", 7433, 8433); !slices.Equal(got, []int{7433, 7442, 8433}) {
		t.Errorf("dev profile ports %v", got)
	}
	if err := checkEnginePorts("server", "server", []int{7333, 8333}); err != nil {
		t.Errorf("default ports: %v", err)
	}
	// The server takes 7333 to 7342: a UI on 7340 overlaps it.
	if err := checkEnginePorts("server", "server", []int{7333, 7340}); err == nil {
		t.Error("a UI port among the server's was accepted")
	}
	// The dev profile takes its frontend's port and the ninth above it
	// (metrics).
	if err := checkEnginePorts("x", "dev", []int{7333, 7334}); err != nil {
		t.Errorf("dev profile on 7333 with its UI on 7334: %v", err)
	}
	if err := checkEnginePorts("x", "dev", []int{7333, 7342}); err == nil {
		t.Error("a dev UI port on its metrics port was accepted")
	}
}

func TestNewEngine(t *testing.T) {
	cfg := config.Config{DatabaseURL: "postgres://orderflow:orderflow@127.0.0.1:5433/orderflow?sslmode=disable",
		TemporalAddress: "127.0.0.1:7999", TemporalNamespace: "ns1"}
	specs, err := parseEngines("dev,server")
	if err != nil {
		t.Fatal(err)
	}
	o := options{serverPorts: []int{7444, 8444}, serverShards: 8, devPorts: []int{7555, 8555}}
	dev, err := newEngine(specs[0], o, cfg, "/repo", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if dev.stack == nil || dev.Address != "127.0.0.1:7555" || dev.stack.Data != "/repo/.data/bench-temporal-dev" ||
		len(dev.stack.Databases) != 0 || dev.tag() != "[dev] " {
		t.Errorf("dev engine %+v, want a dev server started on 127.0.0.1:7555 in .data/bench-temporal-dev", dev)
	}
	logDir := t.TempDir()
	srv, err := newEngine(specs[1], o, cfg, "/repo", logDir)
	if err != nil {
		t.Fatal(err)
	}
	s := srv.stack
	if s == nil || srv.Address != "127.0.0.1:7444" || srv.Namespace != "default" {
		t.Fatalf("server engine %+v, want one started on 127.0.0.1:7444, namespace default", srv)
	}
	if s.Data != "/repo/.data/bench-temporal-server" || s.script != "/repo/scripts/stack.sh" ||
		s.logPath != filepath.Join(logDir, "server-temporal-stack.log") ||
		!slices.Equal(s.Databases, []string{"bench_temporal_server", "bench_temporal_server_visibility"}) {
		t.Errorf("server engine's stack %+v", s)
	}

	// Its variables override those the benchmark inherited (make exports
	// ORDERFLOW_TEMPORAL_PROFILE; a shell may have others): exec keeps the
	// last value of a key.
	t.Setenv("ORDERFLOW_TEMPORAL_PROFILE", "dev")
	t.Setenv("ORDERFLOW_DATA", "/elsewhere")
	t.Setenv("ORDERFLOW_TEMPORAL_PORT", "7233")
	t.Setenv("ORDERFLOW_TEMPORAL_DB", "temporal")
	t.Setenv("ORDERFLOW_TEMPORAL_SHARDS", "4")
	last := map[string]string{}
	for _, kv := range s.env() {
		k, v, _ := strings.Cut(kv, "=")
		last[k] = v
	}
	for k, want := range map[string]string{"ORDERFLOW_TEMPORAL_PROFILE": "server", "ORDERFLOW_DATA": s.Data,
		"ORDERFLOW_TEMPORAL_PORT": "7444", "ORDERFLOW_TEMPORAL_UI_PORT": "8444", "ORDERFLOW_TEMPORAL_DB": "bench_temporal_server",
		"ORDERFLOW_TEMPORAL_SHARDS": "8", "ORDERFLOW_PG_PORT": "5433", "PATH": os.Getenv("PATH")} {
		if last[k] != want {
			t.Errorf("%s = %q, want %q", k, last[k], want)
		}
	}
	if d := s.describe(); !strings.Contains(d, "profile server") || !strings.Contains(d, "bench_temporal_server_visibility") ||
		!strings.Contains(d, "ORDERFLOW_TEMPORAL_SHARDS=8") {
		t.Errorf("describe: %q", d)
	}
}
