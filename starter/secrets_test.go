package main

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/procs"
	"github.com/orderflow/orderflow/internal/testenv"
)

// TestBridgeNeverShowsSecrets plants a secret in every secret setting — the
// database password (a role of its own), a Temporal API key, a RocketMQ
// secret key and a Redis password (the test server has none, so any
// password is accepted) — and looks for them everywhere the bridge speaks: -h, a usage
// error, a start-up failure, every log line of a run at debug level that
// signals an event, /metrics, /healthz, /readyz and /debug/pprof/cmdline
// (with the secrets given as flags too).
func TestBridgeNeverShowsSecrets(t *testing.T) {
	e := newEnv(t, 1)
	e.startWorker(t)
	e.terminate(t, 1)
	dsn, dbPassword := testenv.NewDatabaseWithSecret(t)
	e.dsn = dsn
	stamp := time.Now().Format("150405.000000")
	apiKey, secretKey, redisPassword := "planted-api-key-"+stamp, "planted-secret-key-"+stamp, "planted-redis-pw-"+stamp
	secrets := []string{dbPassword, apiKey, secretKey, redisPassword}
	ru, err := url.Parse(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	ru.User = url.UserPassword("", redisPassword)
	redisURL := ru.String()
	bin := buildBridge(t)
	env := []string{"DATABASE_URL=" + dsn, "TEMPORAL_API_KEY=" + apiKey, "TEMPORAL_TLS=false",
		"ROCKETMQ_ACCESS_KEY=orderflow-test", "ROCKETMQ_SECRET_KEY=" + secretKey, "REDIS_URL=" + redisURL,
		"ORDERFLOW_LOG_LEVEL=debug"}
	run := func(args ...string) (int, string) {
		code, out, err := procs.Run(context.Background(), procs.Spec{Name: "bridge", Path: bin, Args: args, Env: env})
		if err != nil {
			t.Fatal(err)
		}
		return code, out
	}
	code, out := run("-h")
	if code != 0 || !strings.Contains(out, "ROCKETMQ_SECRET_KEY") {
		t.Errorf("-h: exit %d\n%s", code, out)
	}
	testenv.NoSecrets(t, "-h", out, secrets...)
	code, out = run("-concurrency", "many")
	if code != 2 {
		t.Errorf("a bad flag: exit %d, want 2", code)
	}
	testenv.NoSecrets(t, "a usage error", out, secrets...)
	code, out = run("-redis-url", "redis://:"+redisPassword+"@127.0.0.1:port/0")
	if code != 2 || !strings.Contains(out, "-redis-url") {
		t.Errorf("a Redis URL that does not parse: exit %d, want 2\n%s", code, out)
	}
	testenv.NoSecrets(t, "a bad Redis URL", out, secrets...)
	code, out = run("-database-url", strings.Replace(dsn, "127.0.0.1:", "127.0.0.1:1", 1)+"&connect_timeout=2",
		"-rocketmq-namesrv", e.namesrv, "-topic", e.topic, "-consumer-group", e.group)
	if code == 0 {
		t.Errorf("an unreachable database: exit 0")
	}
	testenv.NoSecrets(t, "a start-up failure", out, secrets...)

	addr, err := procs.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	pprof, err := procs.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	p := procs.New(procs.Spec{Name: "bridge", Path: bin, Env: append(env,
		"TEMPORAL_ADDRESS="+testenv.TemporalAddress(), "TEMPORAL_NAMESPACE="+testenv.TemporalNamespace(),
		"ORDERFLOW_TASK_QUEUE="+e.taskQueue, "ROCKETMQ_NAMESRV="+e.namesrv, "ORDERFLOW_TOPIC="+e.topic,
		"ORDERFLOW_CONSUMER_GROUP="+e.group, "ORDERFLOW_BRIDGE_METRICS_ADDR="+addr),
		Args: []string{"-pprof-addr", pprof, "-database-url", dsn, "-temporal-api-key", apiKey,
			"-rocketmq-secret-key", secretKey, "-redis-url", redisURL},
		ReadyOutput: `"msg":"bridge consuming"`, ReadyTimeout: 60 * time.Second})
	t.Cleanup(func() {
		if p.Running() {
			_ = p.Kill()
		}
	})
	if err := p.Start(context.Background()); err != nil {
		t.Fatalf("start bridge: %v\n%s", err, p.Output())
	}
	ev := e.event(0, 1, fsm.Created)
	e.publish(t, ev)
	e.waitAccounted(t, []fsm.Key{ev.Key()}, 0, time.Minute)
	// A copy: the duplicate filter confirms it through Redis, with the
	// planted password.
	e.publish(t, ev)

	get := func(url string) string {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s = %d\n%s", url, resp.StatusCode, b)
		}
		return string(b)
	}
	deadline := time.Now().Add(30 * time.Second)
	for metric(t, addr, `orderflow_bridge_dedup_lookups_total{result="hit",tier="redis"}`) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the copy was not confirmed by Redis: redis hits %v", metric(t, addr, `orderflow_bridge_dedup_lookups_total{result="hit",tier="redis"}`))
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, path := range []string{"/metrics", "/healthz", "/readyz"} {
		testenv.NoSecrets(t, "GET "+path, get("http://"+addr+path), secrets...)
	}
	if body := get("http://" + pprof + "/debug/pprof/cmdline"); !strings.Contains(body, "starter") {
		t.Errorf("/debug/pprof/cmdline = %q", body)
	} else {
		testenv.NoSecrets(t, "/debug/pprof/cmdline", body, secrets...)
	}
	if code, _, err := p.Stop(30 * time.Second); code != 0 || err != nil {
		t.Errorf("stop: exit %d, %v", code, err)
	}
	testenv.NoSecrets(t, "the bridge's log", p.Output(), secrets...)
	t.Logf("planted %d secrets; none in -h, a usage error, a start-up failure, %d bytes of debug log, /metrics, /healthz, /readyz, /debug/pprof/cmdline",
		len(secrets), len(p.Output()))
}
