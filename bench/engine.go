package main

// The Temporal engines the benchmark runs orderflow on, one after the other
// in one invocation (-engines). "dev" is a Temporal dev server
// (`temporal server start-dev`, SQLite, as `make up` runs it) and "server"
// the Temporal server (go.temporal.io/server) on the local PostgreSQL; the
// benchmark starts each itself through scripts/stack.sh (profile dev or
// server) on ports, databases and a data folder of its own, empty at every
// start, and stops it when its phases are done, also when the run fails or
// is interrupted: every run measures engines that hold nothing but its own
// workflows.

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

// referenceEngine is the engine of the last line (`orderflow bench: ...`):
// the dev server, the engine `make demo` runs on.
const referenceEngine = "dev"

// engineSpec describes a named engine.
type engineSpec struct {
	Name string
	// Doc says what the engine is, for -h and the output.
	Doc string
	// Profile is the scripts/stack.sh Temporal profile (dev or server) the
	// benchmark starts.
	Profile string
	// Ports are the engine's frontend and Web UI ports.
	Ports func(o options) []int
	// Env are further scripts/stack.sh variables of the engine.
	Env func(o options) []string
}

// engineSpecs are the engines -engines can name, in the default order.
var engineSpecs = []engineSpec{
	{Name: "dev", Profile: "dev",
		Doc:   "a Temporal dev server (temporal server start-dev, SQLite; scripts/stack.sh profile dev, as make up runs it) started afresh and stopped by the benchmark",
		Ports: func(o options) []int { return o.devPorts },
		Env: func(o options) []string {
			return []string{"ORDERFLOW_TEMPORAL_METRICS_PORT=" + strconv.Itoa(o.devPorts[0]+metricsOffset)}
		}},
	{Name: "server", Profile: "server",
		Doc:   "the Temporal server (scripts/stack.sh profile server) on the local PostgreSQL, started and stopped by the benchmark",
		Ports: func(o options) []int { return o.serverPorts },
		Env: func(o options) []string {
			return []string{"ORDERFLOW_TEMPORAL_SHARDS=" + strconv.Itoa(o.serverShards)}
		}},
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
		if i < 0 {
			var known []string
			for _, e := range engineSpecs {
				known = append(known, e.Name)
			}
			return nil, fmt.Errorf("unknown engine %q (known: %s)", name, strings.Join(known, ", "))
		}
		if slices.ContainsFunc(out, func(e engineSpec) bool { return e.Name == name }) {
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
		if q < 1 || q > 65535 {
			return fmt.Errorf("-%s-ports: port %d out of range", name, q)
		}
		if taken[q] {
			return fmt.Errorf("-%s-ports: port %d is taken twice (the server profile takes the frontend port and the nine above it, the dev server the frontend port and the ninth above it)", name, q)
		}
		taken[q] = true
	}
	return nil
}

// metricsOffset is where an engine's Prometheus endpoint is, from its
// frontend port: the server profile's own (scripts/stack/temporal-server.sh),
// and the dev server's --metrics-port, which the benchmark sets.
const metricsOffset = 9

// temporalPorts are the ports a Temporal of profile takes, from its frontend
// and UI ports (scripts/stack.sh): the dev server its frontend, metrics and
// UI, the server profile its frontend, the nine above it (its other
// services, membership, HTTP API and metrics) and the UI.
func temporalPorts(profile string, port, ui int) []int {
	if profile != "server" {
		return []int{port, port + metricsOffset, ui}
	}
	out := []int{}
	for i := range 10 {
		out = append(out, port+i)
	}
	return append(out, ui)
}

// engine is one engine of a run: where its frontend is and how it is
// started.
type engine struct {
	engineSpec
	// Address and Namespace are its frontend and the namespace the phases
	// use; Metrics its Prometheus endpoint.
	Address, Namespace, Metrics string
	stack                       *stackTemporal
}

// newEngine prepares spec's engine of a run, started through the
// repository's scripts/stack.sh (root) with its logs in logDir.
func newEngine(spec engineSpec, o options, cfg config.Config, root, logDir string) (*engine, error) {
	ports := spec.Ports(o)
	var extra []string
	if spec.Env != nil {
		extra = spec.Env(o)
	}
	s, err := newStackTemporal(spec.Name, spec.Profile, root, logDir, cfg.DatabaseURL, ports[0], ports[1], extra)
	if err != nil {
		return nil, err
	}
	return &engine{engineSpec: spec, stack: s,
		Address: "127.0.0.1:" + strconv.Itoa(ports[0]), Namespace: config.DefaultTemporalNamespace,
		Metrics: "http://127.0.0.1:" + strconv.Itoa(ports[0]+metricsOffset) + "/metrics"}, nil
}

// prepareEngines makes the run's engines and resets each (nothing left
// from an interrupted run, its ports free), before the long phases; the
// caller stops the engines returned, also on an error.
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

// stackTemporal is a Temporal that the benchmark starts and stops through
// scripts/stack.sh, beside the stack's own: in a data folder of its own
// (.data/bench-temporal-<name>), on ports of its own and, for the server
// profile, on PostgreSQL databases of its own (bench_temporal_<name> and
// its _visibility twin). The folder and the databases are emptied before it
// starts and after it stops, so that no run inherits another's workflows:
// the server profile creates its schemas afresh in about a second and a
// half.
type stackTemporal struct {
	Name, Profile string
	Data          string
	Port, UIPort  int
	// Databases are the server profile's databases (none for dev).
	Databases []string
	extra     []string
	script    string
	logPath   string // scripts/stack.sh's output
	adminURL  string // DATABASE_URL: the PostgreSQL it runs on
	pgPort    string
	stopOnce  sync.Once
}

func newStackTemporal(name, profile, root, logDir, adminURL string, port, ui int, extra []string) (*stackTemporal, error) {
	u, err := url.Parse(adminURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, fmt.Errorf("DATABASE_URL must be a postgres:// URL, got %q", adminURL)
	}
	s := &stackTemporal{Name: name, Profile: profile, Port: port, UIPort: ui,
		Data:     filepath.Join(root, ".data", "bench-temporal-"+name),
		extra:    extra,
		script:   filepath.Join(root, "scripts", "stack.sh"),
		logPath:  filepath.Join(logDir, name+"-temporal-stack.log"),
		adminURL: adminURL, pgPort: u.Port()}
	if profile == "server" {
		db := "bench_temporal_" + strings.ReplaceAll(name, "-", "_")
		s.Databases = []string{db, db + "_visibility"}
	}
	return s, nil
}

// env is scripts/stack.sh's environment for this Temporal: the variables
// that pick its profile, data folder, ports and databases override any the
// benchmark inherited (exec keeps the last of duplicate keys; make exports
// ORDERFLOW_TEMPORAL_PROFILE).
func (s *stackTemporal) env() []string {
	env := append(os.Environ(), "ORDERFLOW_DATA="+s.Data, "ORDERFLOW_TEMPORAL_PROFILE="+s.Profile,
		"ORDERFLOW_TEMPORAL_PORT="+strconv.Itoa(s.Port), "ORDERFLOW_TEMPORAL_UI_PORT="+strconv.Itoa(s.UIPort))
	if s.pgPort != "" {
		env = append(env, "ORDERFLOW_PG_PORT="+s.pgPort)
	}
	if len(s.Databases) > 0 {
		env = append(env, "ORDERFLOW_TEMPORAL_DB="+s.Databases[0])
	}
	return append(env, s.extra...)
}

// reset stops what an interrupted run may have left running from this
// Temporal's data folder, empties the folder and the databases, and checks
// that nothing else holds its ports.
func (s *stackTemporal) reset(ctx context.Context) error {
	if _, err := runStack(ctx, s.script, s.env(), s.logPath, "down", "temporal"); err != nil {
		return fmt.Errorf("temporal engine %s: %w", s.Name, err)
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
	if len(s.Databases) > 0 {
		if err := dropDatabases(ctx, s.adminURL, s.Databases...); err != nil {
			return fmt.Errorf("temporal engine %s: %w", s.Name, err)
		}
	}
	return nil
}

// up starts this Temporal and waits until it serves (scripts/stack.sh up
// temporal: schemas, server, namespace default with the search attribute
// OrderStatus, UI); it returns how long that took.
func (s *stackTemporal) up(ctx context.Context) (time.Duration, error) {
	began := time.Now()
	if _, err := runStack(ctx, s.script, s.env(), s.logPath, "up", "temporal"); err != nil {
		return 0, fmt.Errorf("temporal engine %s: %w", s.Name, err)
	}
	return time.Since(began), nil
}

// down stops this Temporal and empties its data folder and databases; it
// outlives the run's context, so that an interrupted run leaves no server
// behind, and does its work once.
func (s *stackTemporal) down() {
	s.stopOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if _, err := runStack(ctx, s.script, s.env(), s.logPath, "down", "temporal"); err != nil {
			slog.Warn("bench: stop Temporal", "engine", s.Name, "err", err)
			return
		}
		// Its logs are in the folder: keep them beside the run's.
		for _, f := range []string{"temporal-server.log", "temporal-server-schema.log", "temporal-ui.log", "temporal.log"} {
			if data, err := os.ReadFile(filepath.Join(s.Data, "logs", f)); err == nil {
				_ = os.WriteFile(filepath.Join(filepath.Dir(s.logPath), s.Name+"-"+f), data, 0o644)
			}
		}
		if err := s.clear(ctx); err != nil && !errors.Is(err, context.Canceled) {
			slog.Warn("bench: empty Temporal's data", "engine", s.Name, "err", err)
		}
	})
}

// describe is the one-line account of where this Temporal runs.
func (s *stackTemporal) describe() string {
	// The data folder is named from the repository's root, so that the
	// results file carries no path of the machine that ran it.
	d := fmt.Sprintf("scripts/stack.sh profile %s, frontend 127.0.0.1:%d, UI :%d, data .data/%s", s.Profile, s.Port, s.UIPort, filepath.Base(s.Data))
	if len(s.Databases) > 0 {
		d += ", databases " + strings.Join(s.Databases, " and ") + " created afresh"
	}
	if len(s.extra) > 0 {
		d += ", " + strings.Join(s.extra, " ")
	}
	return d
}

// runStack runs scripts/stack.sh (script) with args and env, appending its
// output to logPath, and returns the output.
func runStack(ctx context.Context, script string, env []string, logPath string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, script, args...)
	cmd.Env = env
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	began := time.Now()
	err := cmd.Run()
	if lf, lerr := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); lerr == nil {
		fmt.Fprintf(lf, "=== %s scripts/stack.sh %s\n", began.UTC().Format(time.RFC3339), strings.Join(args, " "))
		_, _ = lf.Write(buf.Bytes())
		fmt.Fprintf(lf, "=== took %s, error: %v\n", time.Since(began).Round(100*time.Millisecond), err)
		_ = lf.Close()
	}
	if err != nil {
		lines := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
		return buf.String(), fmt.Errorf("scripts/stack.sh %s: %w\n%s", strings.Join(args, " "), err,
			strings.Join(lines[max(0, len(lines)-5):], "\n"))
	}
	return buf.String(), nil
}

// repoRoot is the repository the benchmark runs in: the nearest folder up
// from the working directory with go.mod and scripts/stack.sh.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if fileExists(filepath.Join(dir, "go.mod")) && fileExists(filepath.Join(dir, "scripts", "stack.sh")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("the benchmark needs the repository's scripts/stack.sh: run it from the repository (make bench)")
		}
		dir = parent
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
