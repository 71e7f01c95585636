package main

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
	"time"
)

func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestParseBridgeConfigDefaults(t *testing.T) {
	cfg, err := parseBridgeConfig(nil, envOf(nil), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MetricsAddr != "127.0.0.1:9091" || cfg.Concurrency != 16 || cfg.BatchSize != 16 || cfg.GracePeriod != 30*time.Second ||
		cfg.RetryFor != 15*time.Second || cfg.AttemptTimeout != 10*time.Second || cfg.MaxRetryDelayLevel != 5 ||
		cfg.UndeliverableAfter != time.Hour || cfg.Workflow.GracePeriod != 5*time.Minute || cfg.Workflow.IdleTimeout != 24*time.Hour || cfg.Workflow.MaxEventsPerRun != 0 {
		t.Fatalf("defaults: %+v", cfg)
	}
	if cfg.Topic != "ORDER_EVENTS" || cfg.ConsumerGroup != "orderflow-bridge" || cfg.RedisURL != "redis://127.0.0.1:6379/0" {
		t.Fatalf("shared defaults: %+v", cfg.Config)
	}
	if want := (dedupConfig{On: true, BloomCapacity: 1_000_000, BloomFPRate: 0.001, RedisTTL: 7 * 24 * time.Hour,
		RedisTimeout: 100 * time.Millisecond, LedgerTimeout: time.Second}); cfg.Dedup != want {
		t.Fatalf("duplicate filter defaults: %+v, want %+v", cfg.Dedup, want)
	}
}

// The duplicate filter's settings: variables, flags, and an empty REDIS_URL
// (the variable empty counts as unset; the flag empty turns Redis off).
func TestParseBridgeConfigDedup(t *testing.T) {
	e := envOf(map[string]string{"REDIS_URL": "redis://:pw@cache:6380/2", "ORDERFLOW_BRIDGE_DEDUP_REDIS_TTL": "36h",
		"ORDERFLOW_BRIDGE_DEDUP_BLOOM_FP_RATE": "0.01"})
	cfg, err := parseBridgeConfig([]string{"-dedup-bloom-capacity", "5000", "-dedup-redis-timeout", "50ms"}, e, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RedisURL != "redis://:pw@cache:6380/2" || cfg.Dedup.RedisTTL != 36*time.Hour || cfg.Dedup.BloomFPRate != 0.01 ||
		cfg.Dedup.BloomCapacity != 5000 || cfg.Dedup.RedisTimeout != 50*time.Millisecond || !cfg.Dedup.On {
		t.Fatalf("config: %+v %+v", cfg.RedisURL, cfg.Dedup)
	}
	cfg, err = parseBridgeConfig([]string{"-redis-url=", "-dedup=false"}, e, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RedisURL != "" || cfg.Dedup.On {
		t.Fatalf("-redis-url= -dedup=false: Redis %q, filter on %v", cfg.RedisURL, cfg.Dedup.On)
	}
	cfg, err = parseBridgeConfig(nil, envOf(map[string]string{"REDIS_URL": "off"}), &bytes.Buffer{})
	if err != nil || cfg.RedisURL != "" {
		t.Fatalf("REDIS_URL=off: Redis %q, %v; want none", cfg.RedisURL, err)
	}
}

func TestParseBridgeConfigEnvThenFlags(t *testing.T) {
	e := envOf(map[string]string{"ORDERFLOW_TOPIC": "FROM_ENV", "ORDERFLOW_BRIDGE_CONCURRENCY": "3", "ORDERFLOW_BRIDGE_GRACE_PERIOD": "7s", "ORDERFLOW_BRIDGE_METRICS_ADDR": "127.0.0.1:0"})
	cfg, err := parseBridgeConfig([]string{"-concurrency", "5", "-consumer-group", "g2"}, e, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Concurrency != 5 || cfg.GracePeriod != 7*time.Second || cfg.MetricsAddr != "127.0.0.1:0" ||
		cfg.Topic != "FROM_ENV" || cfg.ConsumerGroup != "g2" {
		t.Fatalf("config: %+v", cfg)
	}
}

func TestParseBridgeConfigErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  map[string]string
		want []string
	}{
		{[]string{"-concurrency", "0"}, nil, []string{`-concurrency: 0 is not an integer >= 1`}},
		{nil, map[string]string{"ORDERFLOW_BRIDGE_BATCH_SIZE": "many"}, []string{`ORDERFLOW_BRIDGE_BATCH_SIZE: invalid value "many"`}},
		{[]string{"-grace-period", "soon"}, nil, []string{`invalid value "soon" for flag -grace-period`}},
		{[]string{"-grace-period", "0s", "-retry-for", "-1s"}, nil, []string{`-grace-period: 0s is not a positive duration`, `-retry-for: -1s`}},
		{[]string{"-max-retry-delay-level", "19"}, nil, []string{"above the broker's 18 levels"}},
		{[]string{"-undeliverable-after", "0s"}, nil, []string{"-undeliverable-after: 0s is not a positive duration"}},
		// At level 1 (1 s) 10,001 redeliveries: past a tenth of the
		// broker's 100,000 before %DLQ%.
		{[]string{"-undeliverable-after", "10001s", "-max-retry-delay-level", "1"}, nil,
			[]string{"-undeliverable-after: 2h46m41s takes 10001 redeliveries at -max-retry-delay-level 1"}},
		{[]string{"-topic", ""}, nil, []string{"-topic must not be empty"}},
		{[]string{"-workflow-max-events", "-1"}, nil, []string{"-workflow-max-events: -1 is not an integer >= 0"}},
		{nil, map[string]string{"ORDERFLOW_GAP_WINDOW": "-1s"}, []string{"-gap-window: -1s is negative"}},
		{[]string{"-gap-series", "0"}, nil, []string{"-gap-series: 0 is not an integer >= 1"}},
		{nil, map[string]string{"ORDERFLOW_GAP_PRODUCERS": "shop-a, shop b"}, []string{`-gap-producers: "shop b" is not a producer ID (1-64 characters`}},
		{[]string{"publsh"}, nil, []string{`unexpected argument "publsh"`}},
		{[]string{"-no-such-flag"}, nil, []string{"flag provided but not defined"}},
		{[]string{"-dedup-bloom-capacity", "0"}, nil, []string{"-dedup-bloom-capacity: 0 is not an integer >= 1"}},
		{[]string{"-dedup-bloom-fp-rate", "1"}, nil, []string{"-dedup-bloom-fp-rate: 1 is not between 0 and 1"}},
		{[]string{"-dedup-redis-ttl", "0s", "-dedup-ledger-timeout", "-1s"}, nil, []string{"-dedup-redis-ttl: 0s", "-dedup-ledger-timeout: -1s"}},
		{nil, map[string]string{"REDIS_URL": "http://:planted-pw@cache:6379"}, []string{"-redis-url: redis URL: redis: invalid URL scheme: http"}},
		{nil, map[string]string{"REDIS_URL": "redis://:planted-pw@cache:port"}, []string{"-redis-url: redis URL: "}},
		{nil, map[string]string{"ROCKETMQ_TLS_CA_FILE": "/run/secrets/ca.pem"}, []string{"ROCKETMQ_TLS_CA_FILE is set but ROCKETMQ_TLS is not true"}},
		{[]string{"-rocketmq-tls", "-rocketmq-tls-ca-file", "/nonexistent/ca.pem"}, nil, []string{"ROCKETMQ_TLS_CA_FILE: open /nonexistent/ca.pem"}},
	} {
		_, err := parseBridgeConfig(c.args, envOf(c.env), &bytes.Buffer{})
		if err == nil {
			t.Errorf("parseBridgeConfig(%v, %v) succeeded", c.args, c.env)
			continue
		}
		if strings.Contains(err.Error(), "planted-pw") {
			t.Errorf("parseBridgeConfig(%v, %v) = %v, shows the password", c.args, c.env, err)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("parseBridgeConfig(%v, %v) = %v, want it to mention %q", c.args, c.env, err, w)
			}
		}
	}
}

// The loss metrics' settings: the series bound and the allow-list, from
// the environment and overridden by the flags.
func TestParseBridgeConfigGapMetrics(t *testing.T) {
	cfg, err := parseBridgeConfig(nil, envOf(nil), &bytes.Buffer{})
	if err != nil || cfg.GapSeries != 20 || cfg.GapProducerIDs() != nil {
		t.Fatalf("defaults: series %d, producers %q, %v; want 20 and none", cfg.GapSeries, cfg.GapProducerIDs(), err)
	}
	e := envOf(map[string]string{"ORDERFLOW_GAP_SERIES": "5", "ORDERFLOW_GAP_PRODUCERS": " shop-a,shop.b:1 ,,shop-a"})
	if cfg, err = parseBridgeConfig(nil, e, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.GapProducerIDs(), "|"); cfg.GapSeries != 5 || got != "shop-a|shop.b:1" {
		t.Fatalf("from the environment: series %d, producers %s", cfg.GapSeries, got)
	}
	if cfg, err = parseBridgeConfig([]string{"-gap-series", "50", "-gap-producers", "shop-c"}, e, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.GapProducerIDs(), "|"); cfg.GapSeries != 50 || got != "shop-c" {
		t.Fatalf("flags over the environment: series %d, producers %s", cfg.GapSeries, got)
	}
}

func TestHelpListsEveryFlagWithItsVariable(t *testing.T) {
	var out bytes.Buffer
	_, err := parseBridgeConfig([]string{"-h"}, envOf(nil), &out)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	for flag, env := range map[string]string{"metrics-addr": "ORDERFLOW_BRIDGE_METRICS_ADDR", "concurrency": "ORDERFLOW_BRIDGE_CONCURRENCY",
		"retry-for": "ORDERFLOW_BRIDGE_RETRY_FOR", "workflow-grace-period": "ORDERFLOW_WORKFLOW_GRACE_PERIOD",
		"rocketmq-namesrv": "ROCKETMQ_NAMESRV", "rocketmq-secret-key": "ROCKETMQ_SECRET_KEY", "temporal-api-key": "TEMPORAL_API_KEY",
		"consumer-group": "ORDERFLOW_CONSUMER_GROUP", "log-level": "ORDERFLOW_LOG_LEVEL", "redis-url": "REDIS_URL",
		"dedup": "ORDERFLOW_BRIDGE_DEDUP", "dedup-bloom-capacity": "ORDERFLOW_BRIDGE_DEDUP_BLOOM_CAPACITY",
		"dedup-bloom-fp-rate": "ORDERFLOW_BRIDGE_DEDUP_BLOOM_FP_RATE", "dedup-redis-ttl": "ORDERFLOW_BRIDGE_DEDUP_REDIS_TTL",
		"dedup-redis-timeout": "ORDERFLOW_BRIDGE_DEDUP_REDIS_TIMEOUT", "dedup-ledger-timeout": "ORDERFLOW_BRIDGE_DEDUP_LEDGER_TIMEOUT",
		"undeliverable-after": "ORDERFLOW_BRIDGE_UNDELIVERABLE_AFTER", "gap-series": "ORDERFLOW_GAP_SERIES",
		"gap-producers": "ORDERFLOW_GAP_PRODUCERS"} {
		if !strings.Contains(out.String(), "-"+flag+"\n") || !strings.Contains(out.String(), env) {
			t.Errorf("help lacks -%s / %s:\n%s", flag, env, out.String())
		}
	}
	if !strings.Contains(out.String(), "DATABASE_URL") {
		t.Errorf("help lacks the shared settings:\n%s", out.String())
	}
}

func TestRunExitCodes(t *testing.T) {
	var stderr bytes.Buffer
	if code := run([]string{"-concurrency", "x"}, &bytes.Buffer{}, &stderr); code != 2 {
		t.Errorf("bad flag: exit %d, want 2", code)
	}
	if !strings.Contains(stderr.String(), "-concurrency") {
		t.Errorf("bad flag: stderr %q does not name the flag", stderr.String())
	}
	if code := run([]string{"-h"}, &bytes.Buffer{}, &bytes.Buffer{}); code != 0 {
		t.Errorf("-h: exit %d, want 0", code)
	}
	// A log level it does not know is bad usage too, found before anything
	// is started.
	stderr.Reset()
	if code := run([]string{"-log-level", "loud"}, &bytes.Buffer{}, &stderr); code != 2 || !strings.Contains(stderr.String(), `"loud"`) {
		t.Errorf("-log-level loud: exit %d, stderr %q; want 2 naming the level", code, stderr.String())
	}
}
