//go:build chaos

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orderflow/orderflow/check"
	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/scenario"
)

// haStack is the replicated RocketMQ profile scripts/chaos.sh starts beside
// the fault matrix's stack: a name server with the controller inside and
// two brokers of group broker-a (scripts/stack.sh, ORDERFLOW_ROCKETMQ_PROFILE=ha).
type haStack struct {
	data                        string
	namesrvPort, controllerPort string
	env                         []string
}

func newHAStack(t *testing.T) *haStack {
	t.Helper()
	h := &haStack{data: os.Getenv("ORDERFLOW_DATA")}
	ns, ctl, bp := os.Getenv("ORDERFLOW_CHAOS_HA_NAMESRV_PORT"), os.Getenv("ORDERFLOW_CHAOS_HA_CONTROLLER_PORT"), os.Getenv("ORDERFLOW_CHAOS_HA_BROKER_PORT")
	if h.data == "" || ns == "" || ctl == "" || bp == "" {
		t.Fatal("the failover test runs on the replicated broker profile: run it with `make chaos` (scripts/chaos.sh starts it)")
	}
	h.namesrvPort, h.controllerPort = ns, ctl
	h.env = append(os.Environ(), "ORDERFLOW_ROCKETMQ_PROFILE=ha", "ORDERFLOW_NAMESRV_PORT="+ns,
		"ORDERFLOW_CONTROLLER_PORT="+ctl, "ORDERFLOW_BROKER_PORT="+bp, "ORDERFLOW_BROKER_IP=127.0.0.1")
	return h
}

func (h *haStack) namesrv() string { return "127.0.0.1:" + h.namesrvPort }

// stack runs scripts/stack.sh with the profile's settings.
func (h *haStack) stack(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, stackScript, args...)
	cmd.Env = h.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("scripts/stack.sh %s: %w\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

// brokers returns the group's brokers as the name server lists them:
// address → broker ID (0 is the master).
func (h *haStack) brokers(ctx context.Context) (map[string]string, error) {
	out, err := h.stack(ctx, "mqadmin", "clusterList", "-n", h.namesrv())
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 4 && f[1] == "broker-a" {
			m[f[3]] = f[2]
		}
	}
	return m, nil
}

func (h *haStack) master(ctx context.Context) (string, error) {
	bs, err := h.brokers(ctx)
	if err != nil {
		return "", err
	}
	for addr, id := range bs {
		if id == "0" {
			return addr, nil
		}
	}
	return "", fmt.Errorf("no master among %v", bs)
}

// syncStateSet returns how many replicas the controller counts in sync.
func (h *haStack) syncStateSet(ctx context.Context) (int, error) {
	out, err := h.stack(ctx, "mqadmin", "getSyncStateSet", "-a", "127.0.0.1:"+h.controllerPort, "-b", "broker-a")
	if err != nil {
		return 0, err
	}
	return strings.Count(out, "InSyncReplica:"), nil
}

// pidFile is the pid file of the broker listening on addr.
func (h *haStack) pidFile(addr string) string {
	n := "0"
	if !strings.HasSuffix(addr, ":"+os.Getenv("ORDERFLOW_CHAOS_HA_BROKER_PORT")) {
		n = "1"
	}
	return filepath.Join(h.data, "rocketmq-ha", "broker-"+n+".pid")
}

// ack is one acknowledged send.
type ack struct {
	at   time.Time
	keys string
}

// TestBrokerFailover: the producer publishes continuously while the master
// broker of the replicated group is SIGKILLed; the controller promotes the
// replica, producer and bridge carry on, and the old master, restarted,
// rejoins as a replica. Every acknowledged send must reach order_events or
// dead_letters, and all five invariants must hold.
func TestBrokerFailover(t *testing.T) {
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	ha := newHAStack(t)
	testenv.QuietRocketMQ()
	gdb, dsn := testenv.NewDatabase(t)

	master, err := ha.master(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n, err := ha.syncStateSet(ctx)
	if err != nil || n != 2 {
		t.Fatalf("sync state set before the run: %d replicas (%v), want 2", n, err)
	}
	t.Logf("master %s, 2 replicas in sync", master)

	// The pipeline on the replicated broker; the topic is created on the
	// master, and the replica copies it within seconds.
	workerBin, starterBin := buildBinaries(t)
	pl := &pipeline{dsn: dsn, namesrv: ha.namesrv(), topic: uniq.Name("failover-events"), group: uniq.Name("failover-bridge"),
		taskQueue: uniq.Name("failover-tq"), prefix: uniq.Name("failover"), workerBin: workerBin, starterBin: starterBin}
	if err := mq.CreateTopic(ctx, []string{ha.namesrv()}, master, pl.topic, 8, nil); err != nil {
		t.Fatal(err)
	}
	replicaHasTopic := func() bool {
		for _, n := range []string{"0", "1"} {
			b, _ := os.ReadFile(filepath.Join(ha.data, "rocketmq-ha", "broker-"+n, "store", "config", "topics.json"))
			if !bytes.Contains(b, []byte(`"`+pl.topic+`"`)) {
				return false
			}
		}
		return true
	}
	for !replicaHasTopic() {
		if ctx.Err() != nil {
			t.Fatal("the replica never copied the topic")
		}
		time.Sleep(time.Second)
	}
	pl.env = []string{
		"DATABASE_URL=" + dsn, "ORDERFLOW_TOPIC=" + pl.topic, "ORDERFLOW_CONSUMER_GROUP=" + pl.group,
		"ORDERFLOW_TASK_QUEUE=" + pl.taskQueue, "ROCKETMQ_NAMESRV=" + ha.namesrv(),
		"ORDERFLOW_WORKFLOW_GRACE_PERIOD=10s", "ORDERFLOW_WORKFLOW_IDLE_TIMEOUT=30s",
	}
	worker, bridge := pl.procs(t, pl.env, pl.with("ORDERFLOW_BRIDGE_RETRY_FOR=3s", "ORDERFLOW_BRIDGE_MAX_RETRY_DELAY_LEVEL=3"))
	for _, p := range []interface{ Start(context.Context) error }{worker, bridge} {
		if err := p.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}

	seed := time.Now().UnixNano()
	s, err := scenario.Generate(scenario.Options{
		Orders: 150, Seed: seed, Prefix: pl.prefix, Start: time.Now(),
		DupRate: 0.1, Reorder: 0.3, CancelRate: 0.2, OpenRate: 0.1,
		UpdateRate: 0.2, GapRate: 0.05, Conflicts: 4, Bad: 5,
	})
	if err != nil {
		t.Fatal(err)
	}
	c := s.Expected.Counts
	t.Logf("scenario %s (seed %d): %d orders, %d messages", pl.prefix, seed, c.Orders, c.Messages)

	producer, err := mq.NewProducer(ha.namesrv(), mq.WithProducerGroup(uniq.Name("failover-producer")))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()

	// Publish continuously, recording every acknowledged send.
	var (
		mu   sync.Mutex
		acks []ack
	)
	rec := recordingPublisher{p: producer, on: func(keys string) {
		mu.Lock()
		acks = append(acks, ack{at: time.Now(), keys: keys})
		mu.Unlock()
	}}
	publishFor := 45 * time.Second
	pubDone := make(chan error, 1)
	go func() {
		pubDone <- scenario.Publish(ctx, rec, s.Messages, scenario.PublishOptions{
			Topic: pl.topic, Rate: float64(c.Messages) / publishFor.Seconds(), Attempts: 120})
	}()

	// Kill the master a third of the way in.
	sleepCtx(ctx, publishFor/3)
	pid, err := readPid(ha.pidFile(master))
	if err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	if err := killPid(pid); err != nil {
		t.Fatal(err)
	}
	t.Logf("master %s (pid %d) SIGKILLed", master, pid)

	// The controller promotes the replica.
	var promoted string
	for {
		if m, err := ha.master(ctx); err == nil && m != master {
			promoted = m
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the replica was never promoted")
		}
		time.Sleep(500 * time.Millisecond)
	}
	promotedAfter := time.Since(killedAt)
	t.Logf("%s promoted to master %s after the kill", promoted, promotedAfter.Round(100*time.Millisecond))

	if err := <-pubDone; err != nil {
		t.Fatalf("publish: %v", err)
	}
	mu.Lock()
	var lastBefore, firstAfter time.Time
	for _, a := range acks {
		if a.at.Before(killedAt) {
			lastBefore = a.at
		} else if firstAfter.IsZero() {
			firstAfter = a.at
		}
	}
	acked := len(acks)
	mu.Unlock()
	failover := firstAfter.Sub(lastBefore)
	t.Logf("failover: last acknowledged send before the kill → first after: %s; %d sends acknowledged", failover.Round(10*time.Millisecond), acked)

	// The old master rejoins as a replica.
	if _, err := ha.stack(ctx, "up", "rocketmq"); err != nil {
		t.Fatal(err)
	}
	for {
		bs, err := ha.brokers(ctx)
		n, serr := ha.syncStateSet(ctx)
		if err == nil && serr == nil && bs[master] != "" && bs[master] != "0" && bs[promoted] == "0" && n == 2 {
			t.Logf("old master %s rejoined as replica (broker ID %s); 2 replicas in sync again", master, bs[master])
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the old master did not rejoin as a replica: brokers %v, %d in sync", bs, n)
		}
		time.Sleep(2 * time.Second)
	}

	rep, err := check.WaitSettled(ctx, gdb, &s.Expected, check.WaitOptions{Wait: 4 * time.Minute, Interval: 2 * time.Second, Settle: 10 * time.Second})
	var out bytes.Buffer
	if rep != nil {
		rep.Write(&out)
	}
	t.Logf("settled:\n%s", out.String())
	if err != nil {
		t.Fatalf("the invariants do not hold after the failover: %v", err)
	}
	// Every acknowledged send is accounted for: a valid event's business
	// key has its order_events row, a bad message its dead letter (keys as
	// published).
	recorded := map[string]bool{}
	rows, err := gdb.Raw(`SELECT order_id FROM order_events UNION SELECT keys FROM dead_letters`).Rows()
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		recorded[k] = true
	}
	rows.Close()
	missing := 0
	for _, a := range acks {
		if !recorded[a.keys] {
			missing++
			if missing <= 5 {
				t.Errorf("acknowledged send with keys %q reached neither order_events nor dead_letters", a.keys)
			}
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged sends lost", missing, acked)
	}
	for _, p := range []interface{ Crashes() []string }{worker, bridge} {
		if x := p.Crashes(); len(x) > 0 {
			t.Errorf("invariant 4: %s", strings.Join(x, "; "))
		}
	}
	t.Logf("failover figures: %d messages published, %d sends acknowledged, all accounted for; replica promoted %s after the kill; failover (last ack before → first ack after) %s; total %s",
		c.Messages, acked, promotedAfter.Round(100*time.Millisecond), failover.Round(10*time.Millisecond), time.Since(began).Round(time.Second))
}

// recordingPublisher passes sends to the producer and records each one the
// broker acknowledged.
type recordingPublisher struct {
	p  scenario.Publisher
	on func(keys string)
}

func (r recordingPublisher) Publish(ctx context.Context, m mq.Message) (mq.Receipt, error) {
	rc, err := r.p.Publish(ctx, m)
	if err == nil {
		r.on(m.Keys)
	}
	return rc, err
}
