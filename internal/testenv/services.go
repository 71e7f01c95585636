package testenv

import (
	"context"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/rlog"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/orderflow/orderflow/config"
	"github.com/orderflow/orderflow/internal/mq"
)

// runMakeUp is the hint every service failure ends with.
const runMakeUp = "start the local stack with `make up` (see `make status`)"

// DefaultBroker is the local RocketMQ broker's address; ROCKETMQ_BROKER
// overrides it.
const DefaultBroker = "127.0.0.1:10911"

// serviceWait bounds how long a helper waits for a service before failing.
const serviceWait = 30 * time.Second

// SkipShort skips the test under `go test -short`, the fast inner loop that
// runs only the tests that need no service; what names what it needs.
// Every helper here that reaches a service calls it, so a test that uses
// one is skipped in that mode, and runs (and fails when the service is
// down) in `make test`.
func SkipShort(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("needs %s; run without -short (make test starts the services)", what)
	}
}

// TemporalAddress returns the Temporal frontend the tests use:
// TEMPORAL_ADDRESS, or config's default.
func TemporalAddress() string { return config.FromEnv().TemporalAddress }

// TemporalNamespace returns the Temporal namespace the tests use:
// TEMPORAL_NAMESPACE, or config's default.
func TemporalNamespace() string { return config.FromEnv().TemporalNamespace }

// RequireTemporal dials the Temporal server (TEMPORAL_ADDRESS, default
// 127.0.0.1:7233) and checks its health. The client logs warnings and errors
// only and is closed when the test ends. When the server is unreachable the
// test fails, telling the user to run `make up`. While the test runs, the
// end-to-end test does not restart the server (see ExclusiveTemporal).
func RequireTemporal(t testing.TB) client.Client {
	t.Helper()
	SkipShort(t, "the Temporal server")
	holdTemporal(t)
	addr := TemporalAddress()
	ctx, cancel := context.WithTimeout(context.Background(), serviceWait)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{
		HostPort:  addr,
		Namespace: TemporalNamespace(),
		Logger:    QuietTemporalLogger(),
	})
	if err != nil {
		t.Fatalf("testenv: Temporal at %s is unreachable: %v; %s", addr, err, runMakeUp)
	}
	if _, err := c.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		c.Close()
		t.Fatalf("testenv: Temporal at %s is not healthy: %v; %s", addr, err, runMakeUp)
	}
	t.Cleanup(c.Close)
	return c
}

// QuietTemporalLogger returns a Temporal SDK logger that writes warnings and
// errors to stderr, for clients and workers in tests.
func QuietTemporalLogger() tlog.Logger {
	return tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
}

var rlogOnce sync.Once

// QuietRocketMQ lowers rocketmq-client-go's global log level to errors; the
// client logs every rebalance and heartbeat otherwise.
func QuietRocketMQ() { rlogOnce.Do(func() { rlog.SetLogLevel("error") }) }

// RocketMQNamesrv returns the RocketMQ name server address the tests use
// (ROCKETMQ_NAMESRV, default 127.0.0.1:9876) after checking that every
// listed server accepts connections; otherwise the test fails, telling the
// user to run `make up`.
func RocketMQNamesrv(t testing.TB) string {
	t.Helper()
	SkipShort(t, "the RocketMQ name server")
	QuietRocketMQ()
	addrs := config.FromEnv().RocketMQNamesrv
	for _, a := range strings.Split(addrs, ",") {
		if err := dialCheck(strings.TrimSpace(a)); err != nil {
			t.Fatalf("testenv: RocketMQ name server %s is unreachable: %v; %s", a, err, runMakeUp)
		}
	}
	return addrs
}

// RocketMQBroker returns the RocketMQ broker address the tests create topics
// on (ROCKETMQ_BROKER, default 127.0.0.1:10911) after checking that it
// accepts connections; otherwise the test fails, telling the user to run
// `make up`.
func RocketMQBroker(t testing.TB) string {
	t.Helper()
	SkipShort(t, "the RocketMQ broker")
	addr := os.Getenv("ROCKETMQ_BROKER")
	if addr == "" {
		addr = DefaultBroker
	}
	if err := dialCheck(addr); err != nil {
		t.Fatalf("testenv: RocketMQ broker %s is unreachable: %v; %s", addr, err, runMakeUp)
	}
	return addr
}

// NamesrvList splits a comma-separated name server list, as ROCKETMQ_NAMESRV
// holds it, for primitive.NewPassthroughResolver.
func NamesrvList(addrs string) []string {
	var out []string
	for _, a := range strings.Split(addrs, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// CreateTopic creates the RocketMQ topic name with the given number of read
// and write queues on the broker, and waits until the name server routes all
// of its queues, so a producer can send to it at once. Use a name from
// UniqueName: topics outlive the test.
func CreateTopic(t testing.TB, name string, queues int) {
	t.Helper()
	if queues < 1 {
		t.Fatalf("testenv: CreateTopic(%q): queues must be at least 1, got %d", name, queues)
	}
	namesrv := RocketMQNamesrv(t)
	broker := RocketMQBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), serviceWait)
	defer cancel()
	if err := mq.CreateTopic(ctx, NamesrvList(namesrv), broker, name, queues, nil); err != nil {
		t.Fatalf("testenv: %v; %s", err, runMakeUp)
	}
}

func dialCheck(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		return err
	}
	return conn.Close()
}

// NoSecrets fails the test when text (what a program showed: a log, usage
// text, an error, an HTTP body) contains any of the secrets, as is or
// escaped as a URL would carry it.
func NoSecrets(t testing.TB, where, text string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if s == "" {
			continue
		}
		for _, form := range []string{s, url.QueryEscape(s), url.PathEscape(s)} {
			if strings.Contains(text, form) {
				t.Errorf("%s shows a secret (%q):\n%s", where, form, text)
				break
			}
		}
	}
}
