package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/orderflow/orderflow/check"
	"github.com/orderflow/orderflow/config"
	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/internal/procs"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/scenario"
	"github.com/orderflow/orderflow/store"
)

// setBrokerPermission sets the local broker's permission: 6 read and write,
// 4 read-only (sends, and so a consumer's hand-backs, are refused).
func setBrokerPermission(ctx context.Context, broker string, perm int) error {
	cmd := exec.CommandContext(ctx, stackScript, "mqadmin", "updateBrokerConfig",
		"-b", broker, "-k", "brokerPermission", "-v", strconv.Itoa(perm))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("mqadmin updateBrokerConfig brokerPermission=%d: %w\n%s", perm, err, out)
	}
	return nil
}

// metric returns the sum of the samples of name whose labels contain every
// label of want ("result=\"retry\"", say) on the process's /metrics.
func metric(p *procs.Proc, name string, want ...string) (float64, error) {
	resp, err := http.Get("http://" + p.Addr() + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(line, w)
		}
		if !ok {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("metric line %q: %w", line, err)
		}
		sum += v
	}
	return sum, sc.Err()
}

// TestNothingLostWhenTheBrokerRefusesHandBacks: Temporal is unreachable, so
// every delivery fails, and the broker is read-only, so it refuses every
// message the bridge hands back (after -retry-for, and on SIGTERM). When
// both are restored, every message must still arrive: a refused hand-back
// must not move the consumer's offset past a message stored nowhere else.
func TestNothingLostWhenTheBrokerRefusesHandBacks(t *testing.T) {
	if testing.Short() {
		t.Skip("fault test on the shared broker; skipped with -short")
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	gdb, dsn := testenv.NewDatabase(t)
	namesrv := testenv.RocketMQNamesrv(t)
	broker := testenv.RocketMQBroker(t)
	temporal := testenv.StartProxy(t, config.FromEnv().TemporalAddress)
	temporal.Cut()

	pl := newPipeline(t, "handback", dsn, namesrv)
	prefix, topic := pl.prefix, pl.topic
	worker, bridge := pl.procs(t, pl.env, pl.with(
		"TEMPORAL_ADDRESS="+temporal.Addr(),
		// Hand a message back after one second of failed attempts.
		"ORDERFLOW_BRIDGE_RETRY_FOR=1s",
		"ORDERFLOW_BRIDGE_ATTEMPT_TIMEOUT=500ms",
		"ORDERFLOW_BRIDGE_MAX_RETRY_DELAY_LEVEL=3",
		"ORDERFLOW_BRIDGE_GRACE_PERIOD=5s",
	))

	s, err := scenario.Generate(scenario.Options{
		Orders: 60, Seed: time.Now().UnixNano(), Prefix: prefix, Start: time.Now(),
		DupRate: 0.1, Reorder: 0.3, CancelRate: 0.2, OpenRate: 0.1, UpdateRate: 0.2, Conflicts: 3, Bad: 4,
	})
	if err != nil {
		t.Fatal(err)
	}
	producer, err := mq.NewProducer(namesrv, mq.WithProducerGroup(uniq.Name("handback-producer")))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	if err := scenario.Publish(ctx, producer, s.Messages, scenario.PublishOptions{Topic: topic}); err != nil {
		t.Fatal(err)
	}
	n := s.Expected.Counts.Messages
	t.Logf("published %d messages (%d orders, %d business keys)", n, s.Expected.Counts.Orders, len(s.Expected.Keys))

	// The broker refuses writes from now on; restore it whatever happens.
	if err := setBrokerPermission(ctx, broker, 4); err != nil {
		t.Fatal(err)
	}
	restored := false
	restore := func() {
		if restored {
			return
		}
		if err := setBrokerPermission(context.Background(), broker, 6); err != nil {
			t.Errorf("restore the broker's permission: %v", err)
			return
		}
		restored = true
	}
	t.Cleanup(restore)
	readOnlyAt := time.Now()

	// Deliveries fail and the bridge hands messages back: after -retry-for
	// while running, and on SIGTERM.
	if err := bridge.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// waitFor waits until cond holds, at most d; false when it did not.
	waitFor := func(d time.Duration, cond func() bool) bool {
		deadline := time.Now().Add(d)
		for !cond() {
			if time.Now().After(deadline) || ctx.Err() != nil {
				return false
			}
			sleepCtx(ctx, 500*time.Millisecond)
		}
		return true
	}
	handedBack := func() float64 {
		v, _ := metric(bridge, "orderflow_bridge_messages_total", `result="retry"`)
		return v
	}
	if !waitFor(2*time.Minute, func() bool { return handedBack() >= float64(n)/4 }) {
		t.Fatalf("the bridge handed back %.0f messages in 2 minutes, want at least %d", handedBack(), n/4)
	}
	first := handedBack()
	stop(t, bridge)
	if err := bridge.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// The restarted bridge gets the messages the first one did not ack;
	// none come back if the refused hand-backs moved the offset past them.
	waitFor(time.Minute, func() bool { return handedBack() >= float64(n)/4 })
	second := handedBack()
	t.Logf("broker read-only for %s: the bridge handed back %.0f messages, stopped (SIGTERM), handed back %.0f more",
		time.Since(readOnlyAt).Round(time.Second), first, second)

	// The broker takes hand-backs again while Temporal is still away: the
	// messages the bridge hands back now move to the retry topic.
	restore()
	accepted := handedBack()
	if !waitFor(time.Minute, func() bool { return handedBack() >= accepted+5 }) {
		t.Fatalf("the bridge handed back %.0f messages in a minute once the broker took them, want 5", handedBack()-accepted)
	}
	// Everything comes back.
	temporal.Restore()
	if err := worker.Start(ctx); err != nil {
		t.Fatal(err)
	}
	settleStart := time.Now()
	r, err := check.WaitSettled(ctx, gdb, &s.Expected, check.WaitOptions{
		Wait: 4 * time.Minute, Interval: 2 * time.Second, Settle: 10 * time.Second,
	})
	var out bytes.Buffer
	if r != nil {
		r.Write(&out)
	}
	t.Logf("after restoring the broker and Temporal, settled in %s:\n%s", time.Since(settleStart).Round(time.Second), out.String())
	if err != nil {
		t.Fatalf("the invariants do not hold: %v", err)
	}
	// Every message of the topic is proved by the database: applied,
	// settled by the bridge, or taken back by the broker into the retry
	// topic, whose copy was applied (recovery points: the hand-back's
	// receipt, third_party/rocketmq-client-go change 8).
	st, err := store.Open(ctx, dsn, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	waitPoints(ctx, t, st, topic, int64(n))
	for _, p := range []*procs.Proc{worker, bridge} {
		if x := p.Crashes(); len(x) > 0 {
			t.Errorf("invariant 4: %s", strings.Join(x, "; "))
		}
	}
	t.Logf("figures: %d messages, every business key recorded; took %s", n, time.Since(began).Round(time.Second))
}
