package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/procs"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
)

// buildBridge builds the starter binary into a temporary directory.
func buildBridge(t *testing.T) string {
	t.Helper()
	bin, err := procs.Build(context.Background(), "github.com/orderflow/orderflow/starter", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// startBridgeProc runs the bridge binary bin as a separate process, its
// output kept in memory, and waits until it consumes.
func (e *env) startBridgeProc(t *testing.T, bin string) *procs.Proc {
	t.Helper()
	p := e.bridgeProc(t, bin)
	if err := p.Start(context.Background()); err != nil {
		t.Fatalf("start bridge: %v:\n%s", err, p.Output())
	}
	return p
}

// bridgeProc is the bridge binary bin on the test's topic, group, task
// queue and database URL, not started.
func (e *env) bridgeProc(t *testing.T, bin string) *procs.Proc {
	t.Helper()
	p := procs.New(procs.Spec{Name: "bridge", Path: bin, Env: []string{
		"TEMPORAL_ADDRESS=" + testenv.TemporalAddress(),
		"TEMPORAL_NAMESPACE=" + testenv.TemporalNamespace(),
		"ORDERFLOW_TASK_QUEUE=" + e.taskQueue,
		"DATABASE_URL=" + e.dsn,
		"ROCKETMQ_NAMESRV=" + e.namesrv,
		"ORDERFLOW_TOPIC=" + e.topic,
		"ORDERFLOW_CONSUMER_GROUP=" + e.group,
		"ORDERFLOW_BRIDGE_METRICS_ADDR=127.0.0.1:0",
		"ORDERFLOW_BRIDGE_CONCURRENCY=8",
		"ORDERFLOW_BRIDGE_GRACE_PERIOD=20s",
		"ORDERFLOW_BRIDGE_MAX_RETRY_DELAY_LEVEL=1",
		"ORDERFLOW_WORKFLOW_GRACE_PERIOD=2s",
		"ORDERFLOW_WORKFLOW_IDLE_TIMEOUT=1m",
		"ORDERFLOW_LOG_LEVEL=info",
	}, ReadyOutput: `"msg":"bridge consuming"`, ReadyTimeout: 60 * time.Second})
	t.Cleanup(func() {
		if p.Running() {
			_ = p.Kill()
		}
		if t.Failed() {
			t.Logf("bridge output:\n%s", p.Output())
		}
	})
	return p
}

// sigterm sends SIGTERM and returns the exit code and how long it took.
func sigterm(t *testing.T, p *procs.Proc, within time.Duration) (int, time.Duration) {
	t.Helper()
	code, took, err := p.Stop(within)
	if err != nil {
		t.Fatalf("bridge still running %s after SIGTERM (%v):\n%s", within, err, p.Output())
	}
	return code, took
}

// SIGTERM while messages flow: the bridge finishes what it holds, exits 0,
// and after a restart every message is accounted for. The second half of
// the stream is held back until the signal is sent, so that the stream is
// still going when the bridge stops.
func TestBridgeBinarySIGTERM(t *testing.T) {
	e := newEnv(t, 4)
	e.startWorker(t)
	bin := buildBridge(t)
	const orders = 60
	e.terminate(t, orders)

	first := e.startBridgeProc(t, bin)

	statuses := []fsm.Status{fsm.Created, fsm.Paid, fsm.Shipped}
	var want []fsm.Key
	badBodies := map[string]bool{}
	for n := 0; n < orders; n++ {
		for v, s := range statuses {
			want = append(want, e.event(n, int64(v+1), s).Key())
		}
		if n%10 == 0 {
			badBodies[fmt.Sprintf(`{"order_id":"bad-%d"`, n)] = true
		}
	}
	published := make(chan struct{})
	signalled := make(chan struct{}) // closed as SIGTERM is sent
	var pubErr error
	go func() {
		defer close(published)
		for n := 0; n < orders; n++ {
			if n == orders/2 {
				<-signalled
			}
			for v, s := range statuses {
				if _, err := e.producer.PublishEvent(context.Background(), e.topic, e.event(n, int64(v+1), s)); err != nil {
					pubErr = err
					return
				}
			}
			if n%10 == 0 {
				body := fmt.Sprintf(`{"order_id":"bad-%d"`, n)
				if _, err := e.producer.PublishRaw(context.Background(), e.topic, []byte(body), "", "", ""); err != nil {
					pubErr = err
					return
				}
			}
			time.Sleep(40 * time.Millisecond)
		}
	}()

	// Let messages flow, then stop the bridge in the middle of the stream.
	deadline := time.Now().Add(30 * time.Second)
	for len(e.recordedKeys(t)) < 20 {
		if time.Now().After(deadline) {
			close(signalled)
			t.Fatalf("no events recorded within 30s:\n%s", first.Output())
		}
		time.Sleep(100 * time.Millisecond)
	}
	close(signalled)
	code, took := sigterm(t, first, 30*time.Second)
	if code != 0 {
		t.Fatalf("bridge exited %d after SIGTERM:\n%s", code, first.Output())
	}
	out := first.Output()
	if !strings.Contains(out, `"msg":"bridge stopping"`) || !strings.Contains(out, `"msg":"bridge stopped"`) {
		t.Fatalf("no graceful shutdown in the log:\n%s", out)
	}
	recordedAtStop := len(e.recordedKeys(t))
	<-published
	if pubErr != nil {
		t.Fatalf("publish: %v", pubErr)
	}
	t.Logf("first bridge exited 0 in %s with %d of %d events recorded; %s", took.Round(time.Millisecond),
		recordedAtStop, len(want), lastLine(out, "bridge stopped"))
	if recordedAtStop >= len(want) {
		t.Fatalf("all %d events were recorded before the first bridge stopped: SIGTERM did not come while messages flowed", len(want))
	}

	second := e.startBridgeProc(t, bin)
	e.waitAccounted(t, want, len(badBodies), 90*time.Second)
	dead := e.deadLetters(t)
	for body := range badBodies {
		if _, ok := dead[body]; !ok {
			t.Errorf("bad message %q not parked", body)
		}
	}
	if code, _ := sigterm(t, second, 30*time.Second); code != 0 {
		t.Fatalf("second bridge exited %d after SIGTERM:\n%s", code, second.Output())
	}
}

// lastLine returns the last log line containing s.
func lastLine(out, s string) string {
	var last string
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), s) {
			last = sc.Text()
		}
	}
	return last
}

// Start-up failures end the process with exit 1 (2 for bad usage) and a
// line that says what is wrong.
func TestBridgeBinaryStartupFailures(t *testing.T) {
	namesrv := testenv.RocketMQNamesrv(t)
	_, dsn := testenv.NewDatabase(t)
	bin := buildBridge(t)
	missing := uniq.Name("no-such-topic")
	topic := uniq.Name("startup")
	testenv.CreateTopic(t, topic, 1)
	// The metrics address, held by another listener.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, c := range []struct {
		name string
		env  []string
		code int
		want string
	}{
		{"missing topic", []string{"DATABASE_URL=" + dsn, "ORDERFLOW_TOPIC=" + missing}, 1, missing},
		{"database unreachable", []string{"DATABASE_URL=postgres://orderflow:orderflow@127.0.0.1:1/orderflow?sslmode=disable&connect_timeout=2"}, 1, "127.0.0.1"},
		{"bad flag value", []string{"ORDERFLOW_BRIDGE_CONCURRENCY=lots"}, 2, `ORDERFLOW_BRIDGE_CONCURRENCY: invalid value "lots"`},
		{"bad log level", []string{"ORDERFLOW_LOG_LEVEL=loud"}, 2, `"loud"`},
		{"metrics address in use", []string{"DATABASE_URL=" + dsn, "ORDERFLOW_TOPIC=" + topic,
			"ORDERFLOW_BRIDGE_METRICS_ADDR=" + busy.Addr().String()}, 1, busy.Addr().String() + ": bind: address already in use"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			p := procs.New(procs.Spec{Name: "bridge", Path: bin, Env: append([]string{
				"ROCKETMQ_NAMESRV=" + namesrv, "ORDERFLOW_BRIDGE_METRICS_ADDR=127.0.0.1:0",
				"ORDERFLOW_CONSUMER_GROUP=" + uniq.Name("g"), "ORDERFLOW_TOPIC=" + missing}, c.env...)})
			if err := p.Start(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case <-p.Done():
			case <-ctx.Done():
				_ = p.Kill()
			}
			out := p.Output()
			if p.ExitCode() != c.code {
				t.Fatalf("bridge exited %d, want %d (%v):\n%s", p.ExitCode(), c.code, p.Err(), out)
			}
			if !strings.Contains(out, c.want) {
				t.Fatalf("output does not mention %q:\n%s", c.want, out)
			}
		})
	}
}
