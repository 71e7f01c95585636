package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/orderflow/orderflow/internal/procs"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/scenario"
)

// TestPipelineOverBrokerTLS runs the bridge (and the worker's broker-side
// lag) against a name server and a broker that refuse plain connections
// (RocketMQ's enforcing TLS mode), configured only through ROCKETMQ_TLS and
// ROCKETMQ_TLS_CA_FILE: a scenario of 120 orders with duplicates,
// conflicts and bad messages, published over TLS, settles with the five
// invariants holding.
func TestPipelineOverBrokerTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	gdb, dsn := testenv.NewDatabase(t)
	testenv.RequireTemporal(t)
	r := testenv.StartTLSRocketMQ(t)
	workerBin, starterBin := buildBinaries(t)
	pl := &pipeline{dsn: dsn, namesrv: r.Namesrv, topic: uniq.Name("tls-events"), group: uniq.Name("tls-bridge"),
		taskQueue: uniq.Name("tls-tq"), prefix: uniq.Name("tls"), workerBin: workerBin, starterBin: starterBin}
	r.CreateTopic(t, pl.topic, 8)
	pl.env = []string{
		"DATABASE_URL=" + dsn,
		"ORDERFLOW_TOPIC=" + pl.topic,
		"ORDERFLOW_CONSUMER_GROUP=" + pl.group,
		"ORDERFLOW_TASK_QUEUE=" + pl.taskQueue,
		"ROCKETMQ_NAMESRV=" + r.Namesrv,
		"ROCKETMQ_TLS=true",
		"ROCKETMQ_TLS_CA_FILE=" + r.CAFile,
	}
	worker, bridge := pl.procs(t, pl.env, pl.env)
	for _, p := range []*procs.Proc{worker, bridge} {
		if err := p.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	s, err := scenario.Generate(scenario.Options{Orders: 120, Seed: time.Now().UnixNano(), Prefix: pl.prefix, Start: time.Now(),
		DupRate: 0.2, Reorder: 0.3, CancelRate: 0.2, OpenRate: 0.1, UpdateRate: 0.2, GapRate: 0.05,
		UserChangeRate: 0.3, Conflicts: 4, Bad: 6})
	if err != nil {
		t.Fatal(err)
	}
	producer := newProducer(t, r.Namesrv, "tls", r.TLS)
	if err := scenario.Publish(ctx, producer, s.Messages, scenario.PublishOptions{Topic: pl.topic, Rate: 80}); err != nil {
		t.Fatalf("publish over TLS: %v", err)
	}
	report := settle(ctx, t, gdb, s.Expected.FirstPhase(), "over TLS")
	t.Logf("over TLS to a broker in enforcing mode, %d messages:\n%s", len(s.Messages), report)
	for name, p := range map[string]*procs.Proc{"worker": worker, "bridge": bridge} {
		if x := p.Crashes(); len(x) > 0 {
			t.Errorf("%s crashed: %s", name, strings.Join(x, "; "))
		}
	}
}
