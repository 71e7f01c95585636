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
	if err != nil || len(specs) != 2 || specs[0].Profile != "server" || specs[1].Profile != "dev" {
		t.Errorf("engines %+v, %v; want server then dev", specs, err)
	}
	for _, bad := range []string{"", "dev,", "dev,server,dev", "sqlite"} {
		if _, err := parseEngines(bad); err == nil {
			t.Errorf("parseEngines(%q) accepted it", bad)
		}
	}
}

func TestEnginePorts(t *testing.T) {
	if got := temporalPorts("server", 7333, 8333); !slices.Equal(got, []int{7333, 7334, 7335, 7336, 7337, 7338, 7339, 7340, 7341, 7342, 8333}) {
		t.Errorf("server profile ports %v", got)
	}
	if got := temporalPorts("dev", 7433, 8433); !slices.Equal(got, []int{7433, 7442, 8433}) {
		t.Errorf("dev profile ports %v", got)
	}
	for _, c := range []struct {
		profile string
		ports   []int
		ok      bool
	}{{"server", []int{7333, 8333}, true}, {"server", []int{7333, 7340}, false}, {"dev", []int{7333, 7334}, true},
		{"dev", []int{7333, 7342}, false}, {"dev", []int{7333}, false}, {"dev", []int{70000, 8000}, false}} {
		if err := checkEnginePorts("x", c.profile, c.ports); (err == nil) != c.ok {
			t.Errorf("%s on %v: %v, want ok=%v", c.profile, c.ports, err, c.ok)
		}
	}
}

func TestNewEngine(t *testing.T) {
	cfg := config.Config{DatabaseURL: "postgres://orderflow:orderflow@127.0.0.1:5433/orderflow?sslmode=disable"}
	specs, err := parseEngines("dev,server")
	if err != nil {
		t.Fatal(err)
	}
	o := options{serverPorts: []int{7444, 8444}, serverShards: 8, devPorts: []int{7555, 8555}}
	dev, err := newEngine(specs[0], o, cfg, "/repo", t.TempDir())
	if err != nil || dev.Address != "127.0.0.1:7555" || dev.Metrics != "http://127.0.0.1:7564/metrics" ||
		dev.stack.Data != "/repo/.data/bench-temporal-dev" || len(dev.stack.Databases) != 0 || dev.tag() != "[dev] " {
		t.Errorf("dev engine %+v, %v", dev, err)
	}
	logDir := t.TempDir()
	srv, err := newEngine(specs[1], o, cfg, "/repo", logDir)
	if err != nil {
		t.Fatal(err)
	}
	s := srv.stack
	if srv.Address != "127.0.0.1:7444" || srv.Namespace != "default" || s.script != "/repo/scripts/stack.sh" ||
		s.logPath != filepath.Join(logDir, "server-temporal-stack.log") ||
		!slices.Equal(s.Databases, []string{"bench_temporal_server", "bench_temporal_server_visibility"}) {
		t.Errorf("server engine %+v, stack %+v", srv, s)
	}
	// Its variables override those the benchmark inherited: exec keeps the
	// last value of a key.
	for k, v := range map[string]string{"ORDERFLOW_TEMPORAL_PROFILE": "dev", "ORDERFLOW_DATA": "/elsewhere",
		"ORDERFLOW_TEMPORAL_PORT": "7233", "ORDERFLOW_TEMPORAL_DB": "temporal", "ORDERFLOW_TEMPORAL_SHARDS": "4"} {
		t.Setenv(k, v)
	}
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
	if d := s.describe(); d != "scripts/stack.sh profile server, frontend 127.0.0.1:7444, UI :8444, data .data/bench-temporal-server, "+
		"databases bench_temporal_server and bench_temporal_server_visibility created afresh, ORDERFLOW_TEMPORAL_SHARDS=8" {
		t.Errorf("describe: %q", d)
	}
}
