package main

// The Temporal engines the benchmark measures (-engines), each started
// through scripts/stack.sh on ports, databases and a data folder of its
// own, emptied at every start and stop, and stopped after its phases, also
// when the run fails or is interrupted.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/orderflow/orderflow/config"
)

// referenceEngine is the engine of the untagged last line of output.
const referenceEngine = "dev"

// engineSpec describes a named engine: what it is (Doc), its
// scripts/stack.sh Temporal profile and its frontend and UI ports.
type engineSpec struct {
	Name, Doc, Profile string
	Ports              func(o options) []int
}

// engineSpecs are the engines -engines can name, in the default order.
var engineSpecs = []engineSpec{
	{Name: "dev", Profile: "dev", Ports: func(o options) []int { return o.devPorts },
		Doc: "a Temporal dev server (temporal server start-dev, SQLite; scripts/stack.sh profile dev, as make up runs it) started afresh and stopped by the benchmark"},
	{Name: "server", Profile: "server", Ports: func(o options) []int { return o.serverPorts },
		Doc: "the Temporal server (scripts/stack.sh profile server) on the local PostgreSQL, started and stopped by the benchmark"},
}

// engineNames lists the known engines for help texts.
func engineNames() string {
	var names []string
	for _, s := range engineSpecs {
		names = append(names, s.Name+": "+s.Doc)
	}
	return strings.Join(names, "; ")
}

// parseEngines parses -engines: known names, comma-separated, each once.
func parseEngines(s string) ([]engineSpec, error) {
	var out []engineSpec
	for _, f := range strings.Split(s, ",") {
		name := strings.TrimSpace(f)
		i := slices.IndexFunc(engineSpecs, func(e engineSpec) bool { return e.Name == name })
		switch {
		case i < 0:
			return nil, fmt.Errorf("unknown engine %q (known: dev, server)", name)
		case slices.ContainsFunc(out, func(e engineSpec) bool { return e.Name == name }):
			return nil, fmt.Errorf("engine %q named twice", name)
		}
		out = append(out, engineSpecs[i])
	}
	return out, nil
}

// checkEnginePorts rejects an engine's ports that are not a frontend and a
// UI port, or that overlap each other (temporalPorts).
func checkEnginePorts(name, profile string, ports []int) error {
	if len(ports) != 2 {
		return fmt.Errorf("-%s-ports must be a frontend port and a UI port, got %v", name, ports)
	}
	taken := map[int]bool{}
	for _, q := range temporalPorts(profile, ports[0], ports[1]) {
		if q < 1 || q > 65535 || taken[q] {
			return fmt.Errorf("-%s-ports: port %d is out of range or taken twice (the server profile takes the frontend port and the nine above it, the dev server the frontend port and the ninth above it)", name, q)
		}
		taken[q] = true
	}
	return nil
}

// metricsOffset is where an engine's Prometheus endpoint is from its
// frontend port: the server profile's own, the dev server's as newEngine
// sets it.
const metricsOffset = 9

// temporalPorts are the ports a Temporal of profile takes: the dev server
// its frontend, metrics and UI, the server its frontend, the nine above it
// (its other services, membership, HTTP API and metrics) and the UI.
func temporalPorts(profile string, port, ui int) []int {
	if profile != "server" {
		return []int{port, port + metricsOffset, ui}
	}
	var out []int
	for i := range 10 {
		out = append(out, port+i)
	}
	return append(out, ui)
}

// engine is one engine of a run: its frontend, the namespace the phases
// use, its Prometheus endpoint and how it is started.
type engine struct {
	engineSpec
	Address, Namespace, Metrics string
	stack                       *stackTemporal
}

// stackTemporal is an engine's Temporal beside the stack's own, in the
// folder .data/bench-temporal-<name> and, for the server profile, the
// databases bench_temporal_<name> and its _visibility twin.
type stackTemporal struct {
	Name, Profile, Data string
	Port, UIPort        int
	Databases           []string
	vars                []string // scripts/stack.sh's variables
	extra               string   // the last of them, of the profile
	script, logPath     string
	adminURL            string // DATABASE_URL
	stopOnce            sync.Once
}

// newEngine prepares spec's engine, started through the repository's
// scripts/stack.sh (root), its output logged in logDir.
func newEngine(spec engineSpec, o options, cfg config.Config, root, logDir string) (*engine, error) {
	u, err := url.Parse(cfg.DatabaseURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, fmt.Errorf("DATABASE_URL must be a postgres:// URL, got %q", cfg.DatabaseURL)
	}
	ports := spec.Ports(o)
	s := &stackTemporal{Name: spec.Name, Profile: spec.Profile, Port: ports[0], UIPort: ports[1],
		Data: filepath.Join(root, ".data", "bench-temporal-"+spec.Name), adminURL: cfg.DatabaseURL,
		script: filepath.Join(root, "scripts", "stack.sh"), logPath: filepath.Join(logDir, spec.Name+"-temporal-stack.log")}
	s.vars = []string{"ORDERFLOW_DATA=" + s.Data, "ORDERFLOW_TEMPORAL_PROFILE=" + s.Profile,
		"ORDERFLOW_TEMPORAL_PORT=" + strconv.Itoa(s.Port), "ORDERFLOW_TEMPORAL_UI_PORT=" + strconv.Itoa(s.UIPort)}
	if u.Port() != "" {
		s.vars = append(s.vars, "ORDERFLOW_PG_PORT="+u.Port())
	}
	s.extra = "ORDERFLOW_TEMPORAL_METRICS_PORT=" + strconv.Itoa(s.Port+metricsOffset)
	if spec.Profile == "server" {
		db := "bench_temporal_" + strings.ReplaceAll(spec.Name, "-", "_")
		s.Databases = []string{db, db + "_visibility"}
		s.vars = append(s.vars, "ORDERFLOW_TEMPORAL_DB="+db)
		s.extra = "ORDERFLOW_TEMPORAL_SHARDS=" + strconv.Itoa(o.serverShards)
	}
	s.vars = append(s.vars, s.extra)
	return &engine{engineSpec: spec, stack: s,
		Address: "127.0.0.1:" + strconv.Itoa(ports[0]), Namespace: config.DefaultTemporalNamespace,
		Metrics: "http://127.0.0.1:" + strconv.Itoa(ports[0]+metricsOffset) + "/metrics"}, nil
}

// prepareEngines makes the run's engines and resets each; the caller stops
// the engines returned, also on an error.
func prepareEngines(ctx context.Context, o options, cfg config.Config, logDir string) ([]*engine, error) {
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	var engines []*engine
	for _, spec := range o.engines {
		e, err := newEngine(spec, o, cfg, root, logDir)
		if err != nil {
			return engines, fmt.Errorf("engine %s: %w", spec.Name, err)
		}
		engines = append(engines, e)
		if err := e.stack.reset(ctx); err != nil {
			return engines, err
		}
	}
	return engines, nil
}

// tag prefixes the engine's lines of output.
func (e *engine) tag() string { return "[" + e.Name + "] " }

// env is scripts/stack.sh's environment, this Temporal's variables last,
// overriding those inherited (make exports ORDERFLOW_TEMPORAL_PROFILE).
func (s *stackTemporal) env() []string { return append(os.Environ(), s.vars...) }

// reset stops what an interrupted run left running, empties the folder and
// the databases, and checks that nothing else holds the ports.
func (s *stackTemporal) reset(ctx context.Context) error {
	if err := s.stackDo(ctx, "down"); err != nil {
		return err
	}
	if err := s.clear(ctx); err != nil {
		return err
	}
	for _, p := range temporalPorts(s.Profile, s.Port, s.UIPort) {
		if dialCheck("", "127.0.0.1:"+strconv.Itoa(p)) == nil {
			return fmt.Errorf("the %s engine's port %d is taken by another program (set -%s-ports, or leave %s out of -engines)", s.Name, p, s.Name, s.Name)
		}
	}
	return nil
}

// clear removes the data folder and drops the databases.
func (s *stackTemporal) clear(ctx context.Context) error {
	if err := os.RemoveAll(s.Data); err != nil {
		return err
	}
	// The stopped server's connections may outlive it for a moment, and
	// only their role may end them: try again until they are gone.
	var err error
	for range 20 {
		if err = dropDatabases(ctx, s.adminURL, s.Databases...); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("temporal engine %s: %w", s.Name, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
	return fmt.Errorf("temporal engine %s: %w", s.Name, err)
}

// up starts this Temporal and waits until it serves; it returns how long
// that took.
func (s *stackTemporal) up(ctx context.Context) (time.Duration, error) {
	began := time.Now()
	err := s.stackDo(ctx, "up")
	return time.Since(began), err
}

// down stops this Temporal once, outliving the run's context, keeps its
// logs beside the run's and empties its folder and databases.
func (s *stackTemporal) down() {
	s.stopOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := s.stackDo(ctx, "down"); err != nil {
			slog.Warn("bench: stop Temporal", "engine", s.Name, "err", err)
			return
		}
		logs, _ := filepath.Glob(filepath.Join(s.Data, "logs", "temporal*.log"))
		for _, f := range logs {
			if data, err := os.ReadFile(f); err == nil {
				_ = os.WriteFile(filepath.Join(filepath.Dir(s.logPath), s.Name+"-"+filepath.Base(f)), data, 0o644)
			}
		}
		if err := s.clear(ctx); err != nil {
			slog.Warn("bench: empty Temporal's data", "engine", s.Name, "err", err)
		}
	})
}

// describe is the one-line account of where this Temporal runs; its data
// folder is named from the repository's root, so that a results file
// carries no path of the machine that ran it.
func (s *stackTemporal) describe() string {
	d := fmt.Sprintf("scripts/stack.sh profile %s, frontend 127.0.0.1:%d, UI :%d, data .data/%s", s.Profile, s.Port, s.UIPort, filepath.Base(s.Data))
	if len(s.Databases) > 0 {
		d += ", databases " + strings.Join(s.Databases, " and ") + " created afresh"
	}
	return d + ", " + s.extra
}

// stackDo runs `scripts/stack.sh <verb> temporal` for this Temporal,
// appending its output to the log.
func (s *stackTemporal) stackDo(ctx context.Context, verb string) error {
	cmd := exec.CommandContext(ctx, s.script, verb, "temporal")
	cmd.Env = s.env()
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	began := time.Now()
	err := cmd.Run()
	if lf, lerr := os.OpenFile(s.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); lerr == nil {
		fmt.Fprintf(lf, "=== %s scripts/stack.sh %s temporal\n%s=== took %s, error: %v\n",
			began.UTC().Format(time.RFC3339), verb, buf.Bytes(), time.Since(began).Round(100*time.Millisecond), err)
		_ = lf.Close()
	}
	if err != nil {
		lines := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
		return fmt.Errorf("temporal engine %s: scripts/stack.sh %s temporal: %w\n%s", s.Name, verb, err,
			strings.Join(lines[max(0, len(lines)-5):], "\n"))
	}
	return nil
}

// repoRoot is the nearest folder up from the working directory with
// scripts/stack.sh.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	for ; err == nil; dir = filepath.Dir(dir) {
		if _, serr := os.Stat(filepath.Join(dir, "scripts", "stack.sh")); serr == nil {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			err = errors.New("the benchmark needs the repository's scripts/stack.sh: run it from the repository (make bench)")
		}
	}
	return "", err
}
