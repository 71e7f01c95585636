package main

// The Temporal engines the benchmark measures (-engines), each started
// through scripts/stack.sh on ports and a data folder of its own (the
// server's with its PostgreSQL instance, apart from orderflow's), emptied
// at every start and stop, and stopped after its phases, also when the run
// fails or is interrupted.

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/orderflow/orderflow/config"
)

// referenceEngine is the engine of the untagged last line of output.
const referenceEngine = "dev"

// metricsOffset is where an engine's Prometheus endpoint is from its
// frontend port; storeOffset is where the server engine's PostgreSQL is
// (ORDERFLOW_TEMPORAL_PG_PORT; scripts/stack/temporal-server.sh's default
// too).
const (
	metricsOffset = 9
	storeOffset   = 10
)

// engine is one Temporal engine of a run, beside the stack's own, with
// ports, a data folder and (the server) a PostgreSQL instance and
// databases of its own.
type engine struct {
	Name, Doc                   string
	Port, UIPort                int
	Address, Namespace, Metrics string
	Data                        string
	Databases                   []string
	// StoreData is the data folder of the server's PostgreSQL ("" for
	// the dev server, whose SQLite is inside its process).
	StoreData       string
	vars            []string // scripts/stack.sh's variables
	extra           string   // the last of them, of the profile
	script, logPath string
	stopOnce        sync.Once
}

// engineNames are the engines -engines can name, in the default order.
var engineNames = []string{"dev", "server"}

// newEngine prepares the named engine of root's scripts/stack.sh, logging
// in logDir: dev, the dev server (SQLite) on 7433; server, the Temporal
// server on 7333 and the nine ports above it, with a PostgreSQL of its own
// on the tenth. The stack's PostgreSQL port (cfg's DATABASE_URL) is passed
// on, so that the script refuses to take it.
func newEngine(name string, shards int, cfg config.Config, root, logDir string) (*engine, error) {
	u, err := url.Parse(cfg.DatabaseURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, fmt.Errorf("DATABASE_URL must be a postgres:// URL, got %q", cfg.DatabaseURL)
	}
	e := &engine{Name: name, Port: 7433, UIPort: 8433, Namespace: config.DefaultTemporalNamespace,
		Doc:    "a Temporal dev server (temporal server start-dev, SQLite; scripts/stack.sh profile dev, as make up runs it) started afresh and stopped by the benchmark",
		Data:   filepath.Join(root, ".data", "bench-temporal-"+name),
		script: filepath.Join(root, "scripts", "stack.sh"), logPath: filepath.Join(logDir, name+"-temporal-stack.log")}
	e.extra = "ORDERFLOW_TEMPORAL_METRICS_PORT=" + strconv.Itoa(e.Port+metricsOffset)
	if name == "server" {
		e.Port, e.UIPort = 7333, 8333
		e.Doc = "the Temporal server (scripts/stack.sh profile server) on a PostgreSQL instance of its own, apart from orderflow's, started and stopped by the benchmark"
		db := "bench_temporal_server"
		e.Databases = []string{db, db + "_visibility"}
		e.StoreData = filepath.Join(e.Data, "temporal-server", "postgres")
		e.extra = "ORDERFLOW_TEMPORAL_SHARDS=" + strconv.Itoa(shards)
	}
	e.Address = "127.0.0.1:" + strconv.Itoa(e.Port)
	e.Metrics = "http://127.0.0.1:" + strconv.Itoa(e.Port+metricsOffset) + "/metrics"
	e.vars = []string{"ORDERFLOW_DATA=" + e.Data, "ORDERFLOW_TEMPORAL_PROFILE=" + name,
		"ORDERFLOW_TEMPORAL_PORT=" + strconv.Itoa(e.Port), "ORDERFLOW_TEMPORAL_UI_PORT=" + strconv.Itoa(e.UIPort)}
	if u.Port() != "" {
		e.vars = append(e.vars, "ORDERFLOW_PG_PORT="+u.Port())
	}
	if e.Databases != nil {
		e.vars = append(e.vars, "ORDERFLOW_TEMPORAL_DB="+e.Databases[0], "ORDERFLOW_TEMPORAL_PG_PORT="+strconv.Itoa(e.Port+storeOffset))
	}
	e.vars = append(e.vars, e.extra)
	return e, nil
}

// prepareEngines makes the run's engines and resets each; the caller stops
// the engines returned, also on an error.
func prepareEngines(ctx context.Context, o options, cfg config.Config, logDir string) ([]*engine, error) {
	root, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	var engines []*engine
	for _, name := range o.engines {
		e, err := newEngine(name, o.serverShards, cfg, root, logDir)
		if err != nil {
			return engines, fmt.Errorf("engine %s: %w", name, err)
		}
		engines = append(engines, e)
		if err := e.reset(ctx); err != nil {
			return engines, err
		}
	}
	return engines, nil
}

// tag prefixes the engine's lines of output.
func (e *engine) tag() string { return "[" + e.Name + "] " }

// env is scripts/stack.sh's environment, this Temporal's variables last,
// overriding those inherited (make exports ORDERFLOW_TEMPORAL_PROFILE).
func (e *engine) env() []string { return append(os.Environ(), e.vars...) }

// ports are the ports the engine takes: the dev server its frontend,
// metrics and UI, the server its frontend, the ten above it (its other
// services, membership, HTTP API, metrics and its PostgreSQL) and the UI.
func (e *engine) ports() []int {
	if e.Name != "server" {
		return []int{e.Port, e.Port + metricsOffset, e.UIPort}
	}
	var out []int
	for i := range storeOffset + 1 {
		out = append(out, e.Port+i)
	}
	return append(out, e.UIPort)
}

// reset stops what an interrupted run left running, empties the folder
// (with the server's PostgreSQL and its databases), and checks that
// nothing else holds the ports.
func (e *engine) reset(ctx context.Context) error {
	if err := e.stackDo(ctx, "down"); err != nil {
		return err
	}
	if err := e.clear(); err != nil {
		return err
	}
	for _, p := range e.ports() {
		if dialCheck("", "127.0.0.1:"+strconv.Itoa(p)) == nil {
			return fmt.Errorf("the %s engine's port %d is taken by another program (stop it, or leave %s out of -engines)", e.Name, p, e.Name)
		}
	}
	return nil
}

// clear removes the data folder, where the server's PostgreSQL keeps its
// databases; when the script kept them elsewhere (user postgres cannot
// reach the folder: a symbolic link to /var/lib/orderflow), that too.
func (e *engine) clear() error {
	if fi, err := os.Lstat(e.StoreData); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		if target, err := os.Readlink(e.StoreData); err == nil && filepath.IsAbs(target) {
			if err := os.RemoveAll(target); err != nil {
				return fmt.Errorf("temporal engine %s: %w", e.Name, err)
			}
		}
	}
	if err := os.RemoveAll(e.Data); err != nil {
		return fmt.Errorf("temporal engine %s: %w", e.Name, err)
	}
	return nil
}

// storePID is the postmaster of the server's running PostgreSQL, from
// the first line of its postmaster.pid; 0 for the dev server.
func (e *engine) storePID() (int, error) {
	if e.StoreData == "" {
		return 0, nil
	}
	data, err := os.ReadFile(filepath.Join(e.StoreData, "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("temporal engine %s: its PostgreSQL's postmaster: %w", e.Name, err)
	}
	first, _, _ := strings.Cut(string(data), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("temporal engine %s: its PostgreSQL's postmaster.pid begins with %q, not a process ID", e.Name, first)
	}
	return pid, nil
}

// down stops this Temporal once, outliving the run's context, keeps its
// logs beside the run's and empties its folder (and databases).
func (e *engine) down() {
	e.stopOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := e.stackDo(ctx, "down"); err != nil {
			slog.Warn("bench: stop Temporal", "engine", e.Name, "err", err)
			return
		}
		logs, _ := filepath.Glob(filepath.Join(e.Data, "logs", "temporal*.log"))
		for _, f := range logs {
			if data, err := os.ReadFile(f); err == nil {
				_ = os.WriteFile(filepath.Join(filepath.Dir(e.logPath), e.Name+"-"+filepath.Base(f)), data, 0o644)
			}
		}
		if err := e.clear(); err != nil {
			slog.Warn("bench: empty Temporal's data", "engine", e.Name, "err", err)
		}
	})
}

// describe is the one-line account of where this Temporal runs, with no
// path of the machine.
func (e *engine) describe() string {
	d := fmt.Sprintf("scripts/stack.sh profile %s, frontend 127.0.0.1:%d, UI :%d, data .data/%s", e.Name, e.Port, e.UIPort, filepath.Base(e.Data))
	if len(e.Databases) > 0 {
		d += fmt.Sprintf(", databases %s created afresh in a PostgreSQL of its own on :%d", strings.Join(e.Databases, " and "), e.Port+storeOffset)
	}
	return d + ", " + e.extra
}

// stackDo runs `scripts/stack.sh <verb> temporal` for this Temporal,
// appending its output to the log.
func (e *engine) stackDo(ctx context.Context, verb string) error {
	cmd := exec.CommandContext(ctx, e.script, verb, "temporal")
	cmd.Env = e.env()
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	began := time.Now()
	err := cmd.Run()
	if lf, lerr := os.OpenFile(e.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); lerr == nil {
		fmt.Fprintf(lf, "=== %s scripts/stack.sh %s temporal\n%s=== took %s, error: %v\n",
			began.UTC().Format(time.RFC3339), verb, buf.Bytes(), time.Since(began).Round(100*time.Millisecond), err)
		_ = lf.Close()
	}
	if err != nil {
		lines := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
		return fmt.Errorf("temporal engine %s: scripts/stack.sh %s temporal: %w\n%s", e.Name, verb, err,
			strings.Join(lines[max(0, len(lines)-5):], "\n"))
	}
	return nil
}
