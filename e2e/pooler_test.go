package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/orderflow/orderflow/internal/procs"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/scenario"
)

// TestPipelineThroughPgBouncer runs the worker and the bridge against
// PostgreSQL behind PgBouncer in transaction pooling mode (Debian's 1.18),
// with the URL a user writes for it (no driver setting added): an
// adversarial scenario, 150 orders with 30% duplicates, conflicts and bad
// messages, must settle with the five invariants holding, judged on a
// direct connection.
func TestPipelineThroughPgBouncer(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	gdb, dsn := testenv.NewDatabase(t)
	namesrv := testenv.RocketMQNamesrv(t)
	testenv.RequireTemporal(t)
	pgb := testenv.StartPgBouncer(t, 4)
	pl := newPipeline(t, "pooler", dsn, namesrv)
	env := pl.with("DATABASE_URL=" + pgb.URL(t, dsn))
	worker, bridge := pl.procs(t, env, env)
	for _, p := range []*procs.Proc{worker, bridge} {
		if err := p.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	s, err := scenario.Generate(scenario.Options{Orders: 150, Seed: time.Now().UnixNano(), Prefix: pl.prefix, Start: time.Now(),
		DupRate: 0.3, Reorder: 0.3, CancelRate: 0.2, OpenRate: 0.1, UpdateRate: 0.2, GapRate: 0.05,
		UserChangeRate: 0.3, Conflicts: 5, Bad: 11})
	if err != nil {
		t.Fatal(err)
	}
	producer := newProducer(t, namesrv, "pooler", nil)
	if err := scenario.Publish(ctx, producer, s.Messages, scenario.PublishOptions{Topic: pl.topic, Rate: 80}); err != nil {
		t.Fatalf("publish: %v", err)
	}
	report := settle(ctx, t, gdb, s.Expected.FirstPhase(), "through PgBouncer")
	t.Logf("through PgBouncer in transaction mode (%d server connections), %d messages:\n%s", pgb.ServerConns, len(s.Messages), report)
	for name, p := range map[string]*procs.Proc{"worker": worker, "bridge": bridge} {
		if log := p.Tail(1 << 30); !strings.Contains(log, "a pooler is in front of PostgreSQL") {
			t.Errorf("the %s's log does not say that it found the pooler", name)
		}
		if x := p.Crashes(); len(x) > 0 {
			t.Errorf("%s crashed: %s", name, strings.Join(x, "; "))
		}
	}
}
