package obs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orderflow/orderflow/config"
	"github.com/orderflow/orderflow/internal/testenv"
)

func TestParseLevel(t *testing.T) {
	for in, want := range map[string]slog.Level{"": slog.LevelInfo, "DEBUG": slog.LevelDebug, "warn": slog.LevelWarn, "error": slog.LevelError} {
		got, err := ParseLevel(in)
		if err != nil || got != want {
			t.Errorf("ParseLevel(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseLevel("loud"); err == nil || !strings.Contains(err.Error(), "loud") {
		t.Errorf("ParseLevel(loud) error = %v, want one naming the level", err)
	}
}

func TestLoggerWritesJSON(t *testing.T) {
	var buf bytes.Buffer
	NewLogger(&buf, slog.LevelInfo, "worker").Info("hello", "n", 3)
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("log line is not JSON: %q: %v", buf.String(), err)
	}
	if rec["msg"] != "hello" || rec["service"] != "worker" || rec["n"] != float64(3) {
		t.Errorf("record = %v", rec)
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestServerEndpoints(t *testing.T) {
	m, err := NewMetrics()
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "orderflow_test_total", Help: "test"})
	m.Registry.MustRegister(c)
	c.Add(7)
	m.SDKHandler.Counter("temporal_test_counter").Inc(2)

	var failing atomic.Bool
	failing.Store(true)
	var logBuf syncBuffer
	logger := NewLogger(&logBuf, slog.LevelInfo, "test")
	s, err := NewServer("127.0.0.1:0", m.Registry, logger,
		Check{Name: "always", Check: func(context.Context) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	s.AddCheck(Check{Name: "flaky", Check: func(context.Context) error {
		if failing.Load() {
			return errors.New("down: user=secretuser dbname=secretdb host=secrethost")
		}
		return nil
	}})
	s.SetCheckInterval(20 * time.Millisecond)
	s.Start()
	base := "http://" + s.Addr()

	if code, body := get(t, base+"/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz = %d %q", code, body)
	}
	code, body := eventually(t, base+"/readyz", `"name":"flaky","ok":false}`)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `"age_seconds":`) {
		t.Errorf("/readyz with a failing check = %d %s", code, body)
	}
	// The error text goes to the log, never to the body.
	if strings.Contains(body, "secret") || strings.Contains(body, "down") {
		t.Errorf("/readyz serves the check's error: %s", body)
	}
	if !strings.Contains(logBuf.String(), "secrethost") {
		t.Errorf("the failing check's error is not logged: %s", logBuf.String())
	}
	_, body = get(t, base+"/metrics")
	for _, want := range []string{"\norderflow_ready 0\n", `orderflow_ready_check{check="always"} 1`, `orderflow_ready_check{check="flaky"} 0`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics with a failing check lacks %q", want)
		}
	}
	failing.Store(false)
	if code, body := eventually(t, base+"/readyz", `"ready":true`); code != 200 {
		t.Errorf("/readyz with passing checks = %d %s", code, body)
	}
	_, body = get(t, base+"/metrics")
	for _, want := range []string{"\norderflow_ready 1\n", `orderflow_ready_check{check="flaky"} 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics with passing checks lacks %q", want)
		}
	}

	// The SDK scope flushes once a second.
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, body = get(t, base+"/metrics")
		if strings.Contains(body, "orderflow_test_total 7") && strings.Contains(body, "temporal_test_counter") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics lacks the project or SDK counter:\n%s", body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !strings.Contains(body, "go_goroutines") {
		t.Error("/metrics lacks the Go runtime collector")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Error("server still answers after Shutdown")
	}
}

func TestNewServerRegistersReadinessOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	logger := NewLogger(io.Discard, slog.LevelInfo, "t")
	s, err := NewServer("127.0.0.1:0", reg, logger)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	if _, err := NewServer("127.0.0.1:0", reg, logger); err == nil || !strings.Contains(err.Error(), "readiness") {
		t.Fatalf("a second server on the same registry: err = %v, want a readiness registration error", err)
	}
}

func TestNewServerBadAddress(t *testing.T) {
	_, err := NewServer("256.0.0.1:bad", prometheus.NewRegistry(), NewLogger(io.Discard, slog.LevelInfo, "t"))
	if err == nil {
		t.Fatal("NewServer on a bad address succeeded")
	}
}

func TestNewTemporalClientUnreachable(t *testing.T) {
	cfg := config.Defaults()
	cfg.TemporalAddress = "127.0.0.1:1"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := NewTemporalClient(ctx, cfg, NewLogger(io.Discard, slog.LevelInfo, "t"), nil)
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("dial of an unreachable frontend: err = %v, want one naming the address", err)
	}
}

func TestNewTemporalClientAndCheck(t *testing.T) {
	testenv.RequireTemporal(t) // fails with "run make up" when the server is down
	m, err := NewMetrics()
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var logs bytes.Buffer
	c, err := NewTemporalClient(context.Background(), config.FromEnv(), NewLogger(&logs, slog.LevelDebug, "t"), m)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := TemporalCheck(c).Check(context.Background()); err != nil {
		t.Fatalf("temporal check: %v", err)
	}
	c.Close()
	if err := TemporalCheck(c).Check(context.Background()); err == nil {
		t.Error("temporal check passes on a closed client")
	}
}

func TestDialTemporalGivesUp(t *testing.T) {
	cfg := config.Defaults()
	cfg.TemporalAddress = "127.0.0.1:1"
	start := time.Now()
	_, err := DialTemporal(context.Background(), cfg, NewLogger(io.Discard, slog.LevelInfo, "t"), nil, 2*time.Second)
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("err = %v", err)
	}
	if took := time.Since(start); took < time.Second || took > 10*time.Second {
		t.Errorf("gave up after %v, want about the 2s wait", took)
	}
}

// eventually polls url until its body holds want (within 5 s) and returns
// the last answer.
func eventually(t *testing.T, url, want string) (int, string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, body := get(t, url)
		if strings.Contains(body, want) || time.Now().After(deadline) {
			return code, body
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
