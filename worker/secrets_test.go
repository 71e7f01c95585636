package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/orderflow/orderflow/internal/procs"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
)

// TestWorkerNeverShowsSecrets plants a secret in every secret setting —
// the database password (a role of its own), a Temporal API key, a
// RocketMQ secret key — and looks
// for them everywhere the worker speaks: -h, a usage error, a start-up
// failure, every log line of a run at debug level, /metrics, /healthz,
// /readyz and /debug/pprof/cmdline (with the secrets given as flags too).
func TestWorkerNeverShowsSecrets(t *testing.T) {
	dsn, dbPassword := testenv.NewDatabaseWithSecret(t)
	apiKey := "planted-api-key-" + time.Now().Format("150405.000000")
	// The RocketMQ secret key signs the reads of the broker-side backlog
	// (a broker without ACL ignores the signature).
	rmqSecret := "planted-rocketmq-secret-" + time.Now().Format("150405.000000")
	secrets := []string{dbPassword, apiKey, rmqSecret}
	env := []string{"DATABASE_URL=" + dsn, "TEMPORAL_API_KEY=" + apiKey, "TEMPORAL_TLS=false",
		"ROCKETMQ_ACCESS_KEY=planted-access-key", "ROCKETMQ_SECRET_KEY=" + rmqSecret,
		"ORDERFLOW_TASK_QUEUE=" + uniq.Name("secrets"), "ORDERFLOW_LOG_LEVEL=debug"}
	run := func(args ...string) (int, string) {
		code, out, err := procs.Run(context.Background(), procs.Spec{Name: "worker", Path: workerBinary(t), Args: args, Env: env})
		if err != nil {
			t.Fatal(err)
		}
		return code, out
	}

	code, out := run("-h")
	if code != 0 || !strings.Contains(out, "DATABASE_URL") {
		t.Errorf("-h: exit %d\n%s", code, out)
	}
	testenv.NoSecrets(t, "-h", out, secrets...)
	code, out = run("-no-such-flag")
	if code == 0 {
		t.Errorf("a bad flag: exit 0")
	}
	testenv.NoSecrets(t, "a usage error", out, secrets...)
	code, out = run("-database-url", strings.Replace(dsn, "127.0.0.1:", "127.0.0.1:1", 1)+"&connect_timeout=2")
	if code == 0 {
		t.Errorf("an unreachable database: exit 0")
	}
	testenv.NoSecrets(t, "a start-up failure", out, secrets...)

	pprof, err := procs.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	p := startWorker(t, dsn, uniq.Name("secrets"), "-pprof-addr", pprof,
		"-database-url", dsn, "-temporal-api-key", apiKey, "-temporal-tls", "false", "-log-level", "debug",
		"-rocketmq-secret-key", rmqSecret, "-broker-lag-interval", "1s")
	for _, path := range []string{"/metrics", "/healthz", "/readyz"} {
		status, body := p.get(path)
		if path == "/readyz" {
			status, body = p.ready() // the first run of the checks may still be under way
		}
		if status != http.StatusOK {
			t.Errorf("GET %s = %d\n%s", path, status, body)
		}
		testenv.NoSecrets(t, "GET "+path, body, secrets...)
	}
	resp, err := http.Get("http://" + pprof + "/debug/pprof/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "worker") {
		t.Errorf("GET /debug/pprof/cmdline = %d %q", resp.StatusCode, body)
	}
	testenv.NoSecrets(t, "/debug/pprof/cmdline", string(body), secrets...)
	if _, _, err := p.Stop(30 * time.Second); err != nil {
		t.Errorf("stop: %v", err)
	}
	testenv.NoSecrets(t, "the worker's log", p.Output(), secrets...)
	t.Logf("planted %d secrets; none in -h, a usage error, a start-up failure, %d bytes of debug log, /metrics, /healthz, /readyz, /debug/pprof/cmdline",
		len(secrets), len(p.Output()))
}
