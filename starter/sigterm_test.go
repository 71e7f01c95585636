package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/testenv"
)

// buildBridge builds the starter binary into a temporary directory.
func buildBridge(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "starter")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// syncBuffer collects a process's output.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// bridgeProc is a bridge running as a separate process.
type bridgeProc struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan error
}

func (e *env) startBridgeProc(t *testing.T, bin string) *bridgeProc {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(),
		"TEMPORAL_ADDRESS="+testenv.TemporalAddress(),
		"TEMPORAL_NAMESPACE="+testenv.TemporalNamespace(),
		"ORDERFLOW_TASK_QUEUE="+e.taskQueue,
		"DATABASE_URL="+e.dsn,
		"ROCKETMQ_NAMESRV="+e.namesrv,
		"ORDERFLOW_TOPIC="+e.topic,
		"ORDERFLOW_CONSUMER_GROUP="+e.group,
		"ORDERFLOW_BRIDGE_METRICS_ADDR=127.0.0.1:0",
		"ORDERFLOW_BRIDGE_CONCURRENCY=8",
		"ORDERFLOW_BRIDGE_GRACE_PERIOD=20s",
		"ORDERFLOW_BRIDGE_MAX_RETRY_DELAY_LEVEL=1",
		"ORDERFLOW_WORKFLOW_GRACE_PERIOD=2s",
		"ORDERFLOW_WORKFLOW_IDLE_TIMEOUT=1m",
		"ORDERFLOW_LOG_LEVEL=info",
	)
	p := &bridgeProc{cmd: cmd, out: &syncBuffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start bridge: %v", err)
	}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("bridge output:\n%s", p.out.String())
		}
	})
	// Wait until it consumes.
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(p.out.String(), `"msg":"bridge consuming"`) {
		select {
		case err := <-p.done:
			t.Fatalf("bridge exited at start-up (%v):\n%s", err, p.out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("bridge did not start consuming within 60s:\n%s", p.out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	return p
}

// terminate sends SIGTERM and returns the exit code and how long it took.
func (p *bridgeProc) terminate(t *testing.T, within time.Duration) (int, time.Duration) {
	t.Helper()
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	select {
	case <-p.done:
	case <-time.After(within):
		t.Fatalf("bridge still running %s after SIGTERM:\n%s", within, p.out.String())
	}
	return p.cmd.ProcessState.ExitCode(), time.Since(start)
}

// SIGTERM while messages flow: the bridge finishes what it holds, exits 0,
// and after a restart every message is accounted for.
func TestBridgeBinarySIGTERM(t *testing.T) {
	e := newEnv(t, 4)
	e.startWorker(t)
	bin := buildBridge(t)
	const orders = 60
	e.terminate(t, orders)

	first := e.startBridgeProc(t, bin)

	var want []fsm.Key
	badBodies := map[string]bool{}
	published := make(chan struct{})
	var pubErr error
	var mu sync.Mutex
	go func() {
		defer close(published)
		for n := 0; n < orders; n++ {
			for v, s := range []fsm.Status{fsm.Created, fsm.Paid, fsm.Shipped} {
				ev := e.event(n, int64(v+1), s)
				if _, err := e.producer.PublishEvent(context.Background(), e.topic, ev); err != nil {
					pubErr = err
					return
				}
				mu.Lock()
				want = append(want, ev.Key())
				mu.Unlock()
			}
			if n%10 == 0 {
				body := fmt.Sprintf(`{"order_id":"bad-%d"`, n)
				if _, err := e.producer.PublishRaw(context.Background(), e.topic, []byte(body), "", "", ""); err != nil {
					pubErr = err
					return
				}
				mu.Lock()
				badBodies[body] = true
				mu.Unlock()
			}
			time.Sleep(40 * time.Millisecond)
		}
	}()

	// Let messages flow, then stop the bridge in the middle of the stream.
	deadline := time.Now().Add(30 * time.Second)
	for len(e.recordedKeys(t)) < 20 {
		if time.Now().After(deadline) {
			t.Fatalf("no events recorded within 30s:\n%s", first.out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	code, took := first.terminate(t, 30*time.Second)
	if code != 0 {
		t.Fatalf("bridge exited %d after SIGTERM:\n%s", code, first.out.String())
	}
	out := first.out.String()
	if !strings.Contains(out, `"msg":"bridge stopping"`) || !strings.Contains(out, `"msg":"bridge stopped"`) {
		t.Fatalf("no graceful shutdown in the log:\n%s", out)
	}
	<-published
	if pubErr != nil {
		t.Fatalf("publish: %v", pubErr)
	}
	recordedAtStop := len(e.recordedKeys(t))
	t.Logf("first bridge exited 0 in %s with %d of %d events recorded; %s", took.Round(time.Millisecond),
		recordedAtStop, len(want), lastLine(out, "bridge stopped"))
	if recordedAtStop >= len(want) {
		t.Logf("the stream finished before SIGTERM took effect; the restart has nothing left to do")
	}

	second := e.startBridgeProc(t, bin)
	e.waitAccounted(t, want, len(badBodies), 90*time.Second)
	dead := e.deadLetters(t)
	for body := range badBodies {
		if _, ok := dead[body]; !ok {
			t.Errorf("bad message %q not parked", body)
		}
	}
	if code, _ := second.terminate(t, 30*time.Second); code != 0 {
		t.Fatalf("second bridge exited %d after SIGTERM:\n%s", code, second.out.String())
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

// Start-up failures end the process with exit 1 and a log line that says
// what is wrong.
func TestBridgeBinaryStartupFailures(t *testing.T) {
	namesrv := testenv.RocketMQNamesrv(t)
	_, dsn := testenv.NewDatabase(t)
	bin := buildBridge(t)
	missing := testenv.UniqueName("no-such-topic")
	for _, c := range []struct {
		name string
		env  []string
		want string
	}{
		{"missing topic", []string{"DATABASE_URL=" + dsn, "ORDERFLOW_TOPIC=" + missing}, missing},
		{"database unreachable", []string{"DATABASE_URL=postgres://orderflow:orderflow@127.0.0.1:1/orderflow?sslmode=disable&connect_timeout=2"}, "127.0.0.1"},
		{"bad flag value", []string{"ORDERFLOW_BRIDGE_CONCURRENCY=lots"}, `ORDERFLOW_BRIDGE_CONCURRENCY: invalid value "lots"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin)
			cmd.Env = append(os.Environ(), "ROCKETMQ_NAMESRV="+namesrv, "ORDERFLOW_BRIDGE_METRICS_ADDR=127.0.0.1:0",
				"ORDERFLOW_CONSUMER_GROUP="+testenv.UniqueName("g"), "ORDERFLOW_TOPIC="+missing)
			cmd.Env = append(cmd.Env, c.env...)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() == 0 {
				t.Fatalf("bridge did not fail (%v):\n%s", err, out)
			}
			if !strings.Contains(string(out), c.want) {
				t.Fatalf("output does not mention %q:\n%s", c.want, out)
			}
		})
	}
}
