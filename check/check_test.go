package check

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/message"
	"github.com/orderflow/orderflow/scenario"
	"github.com/orderflow/orderflow/store"
	"github.com/orderflow/orderflow/wire"
)

// The checker's own package never imports fsm; its tests do not either. The
// runs they judge are written by the pipeline's real write path (store),
// and the mutations below corrupt those tables the way a wrong pipeline
// would.

func genScenario(t *testing.T, prefix string, seed int64) *scenario.Scenario {
	t.Helper()
	s, err := scenario.Generate(scenario.Options{
		Orders: 40, Seed: seed, Prefix: prefix,
		DupRate: 0.2, Reorder: 0.5, CancelRate: 0.4, OpenRate: 0.2,
		UpdateRate: 0.3, GapRate: 0.2, UserChangeRate: 1, Conflicts: 4, Bad: 6,
		Illegal: 6, LateConflicts: 4, LateRate: 0.3,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// messageIDs numbers the messages consume writes, as the broker would.
var messageIDs atomic.Int64

// consume writes msgs, in the given order, through the store as the bridge
// and the workflow would: bad messages parked, events applied (conflicts
// parked by ApplyEvent), points awarded.
func consume(t *testing.T, gdb *gorm.DB, msgs []scenario.Message) {
	t.Helper()
	ctx := context.Background()
	s := store.New(gdb)
	for _, m := range msgs {
		env := wire.NewEnvelope("T", fmt.Sprintf("msg-%d", messageIDs.Add(1)), m.Msg.Keys, m.Msg.Tag, m.Msg.Body, time.Time{}, false)
		r := message.Parse(env)
		if r.Rejection != nil {
			if _, err := s.ParkDeadLetter(ctx, r.DeadLetter); err != nil {
				t.Fatal(err)
			}
			continue
		}
		res, err := s.ApplyEvent(ctx, r.Event, env)
		if err != nil {
			t.Fatal(err)
		}
		if d := res.Decision; d.Outcome == "applied" && d.Points != "" {
			if _, err := s.AwardPoints(ctx, store.PointsRow{OrderID: r.Event.OrderID, UserID: d.Next.PointsUser(),
				Kind: d.Points, Points: d.PointsDelta, Version: r.Event.Version}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func shuffled(msgs []scenario.Message, seed uint64) []scenario.Message {
	out := append([]scenario.Message(nil), msgs...)
	rand.New(rand.NewPCG(seed, 9)).Shuffle(len(out), func(a, b int) { out[a], out[b] = out[b], out[a] })
	return out
}

// run consumes both phases of s, each in a random order, checking that the
// first phase settles with every invariant holding before the late one.
func run(t *testing.T, gdb *gorm.DB, s *scenario.Scenario, seed uint64) {
	t.Helper()
	consume(t, gdb, shuffled(s.Messages, seed))
	mustPass(t, gdb, s.Expected.FirstPhase())
	consume(t, gdb, shuffled(s.Late, seed+1))
}

func verify(t *testing.T, gdb *gorm.DB, exp *scenario.Expected) (*Report, string) {
	t.Helper()
	r, err := Verify(context.Background(), gdb, exp)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	r.Write(&out)
	return r, out.String()
}

func mustPass(t *testing.T, gdb *gorm.DB, exp *scenario.Expected) *Report {
	t.Helper()
	r, out := verify(t, gdb, exp)
	if !r.OK() {
		t.Fatalf("a faithful run (phases %d) failed the check:\n%s", exp.Phases, out)
	}
	return r
}

func TestVerifyPassesOnFaithfulRuns(t *testing.T) {
	gdb, _ := testenv.NewDatabase(t)
	// Two runs in one database.
	a := genScenario(t, "chk-a", 1)
	b := genScenario(t, "chk-b", 2)
	consume(t, gdb, a.Messages)
	mustPass(t, gdb, a.Expected.FirstPhase())
	consume(t, gdb, shuffled(b.Messages, 3))
	mustPass(t, gdb, b.Expected.FirstPhase())

	// Before the late phase is consumed, the full expectation is not met.
	if r, out := verify(t, gdb, &a.Expected); r.OK() || !strings.Contains(out, "was published but has no order_events row") {
		t.Fatalf("the late phase is expected, yet the check passes without it:\n%s", out)
	}
	consume(t, gdb, a.Late)
	consume(t, gdb, shuffled(b.Late, 4))
	for _, s := range []*scenario.Scenario{a, b} {
		r := mustPass(t, gdb, &s.Expected)
		var out bytes.Buffer
		r.Write(&out)
		t.Logf("\n%s", out.String())
		if r.DeadLettersByReason["conflict"] != s.Expected.Counts.Conflicts {
			t.Fatalf("dead letters by reason %v, want %d conflicts", r.DeadLettersByReason, s.Expected.Counts.Conflicts)
		}
		n := 0
		for _, c := range r.EventsByOutcome {
			n += c
		}
		if n != len(s.Expected.Keys) || r.Points != r.ExpectedPoints || r.EventsByOutcome["illegal"] != s.Expected.Counts.Illegal {
			t.Fatalf("report figures: %d events (want %d), points %d (want %d), outcomes %v", n, len(s.Expected.Keys), r.Points, r.ExpectedPoints, r.EventsByOutcome)
		}
		if !strings.Contains(out.String(), "verdict: PASS") {
			t.Fatalf("summary has no PASS verdict:\n%s", out.String())
		}
	}
}

// pickOrder returns an expected order matching the predicate.
func pickOrder(t *testing.T, s *scenario.Scenario, ok func(scenario.ExpectedOrder) bool) scenario.ExpectedOrder {
	t.Helper()
	for _, o := range s.Expected.Orders {
		if ok(o) {
			return o
		}
	}
	t.Fatal("no order fits")
	return scenario.ExpectedOrder{}
}

// pickKey returns a published key matching the predicate.
func pickKey(t *testing.T, s *scenario.Scenario, ok func(scenario.PublishedKey) bool) scenario.PublishedKey {
	t.Helper()
	for _, k := range s.Expected.Keys {
		if ok(k) {
			return k
		}
	}
	t.Fatal("no key fits")
	return scenario.PublishedKey{}
}

// lateConflict returns a late conflict on an order's final version.
func lateConflict(t *testing.T, s *scenario.Scenario) scenario.ExpectedConflict {
	t.Helper()
	final := map[string]int64{}
	for _, o := range s.Expected.Orders {
		final[o.OrderID] = o.Version
	}
	for _, c := range s.Expected.Conflicts {
		if c.Phase == 2 && final[c.OrderID] == c.Version {
			return c
		}
	}
	t.Fatal("no late conflict on a final version")
	return scenario.ExpectedConflict{}
}

func TestVerifyDetectsViolations(t *testing.T) {
	gdb, _ := testenv.NewDatabase(t)
	db, err := gdb.DB()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	completed := func(o scenario.ExpectedOrder) bool { return o.Status == scenario.Completed && o.AmountCents >= 100 }
	type mutation struct {
		sql  string
		args []any
	}
	cases := []struct {
		name      string
		invariant int
		want      []string
		mutate    func(s *scenario.Scenario) mutation
	}{
		{"refund row for a completed order", 1, []string{"has a refund row"}, func(s *scenario.Scenario) mutation {
			o := pickOrder(t, s, completed)
			return mutation{`INSERT INTO points_ledger (order_id, user_id, kind, points, version)
				SELECT order_id, user_id, 'refund', -points, 1 FROM points_ledger WHERE order_id = $1 AND kind = 'purchase'`, []any{o.OrderID}}
		}},
		{"refund on another user", 1, []string{"but user", "the purchaser is user"}, func(s *scenario.Scenario) mutation {
			// Whichever order of the run got a refund row.
			return mutation{`UPDATE points_ledger SET user_id = user_id + 1 WHERE kind = 'refund' AND order_id = (
				SELECT min(order_id) FROM points_ledger WHERE kind = 'refund' AND starts_with(order_id, $1))`,
				[]any{s.Expected.Prefix}}
		}},
		{"refund on the cancelling user", 1, []string{"the purchaser is user", "points from the run's orders"}, func(s *scenario.Scenario) mutation {
			// Rule (c): the cancelling event names another user; the
			// refund must still go to the purchaser.
			return mutation{`UPDATE points_ledger p SET user_id = o.user_id FROM orders o
				WHERE p.order_id = o.order_id AND p.kind = 'refund' AND p.user_id <> o.user_id AND starts_with(o.order_id, $1)`,
				[]any{s.Expected.Prefix}}
		}},
		{"both rows on the cancelling user", 1, []string{"purchase row is on user", "refund row is on user"}, func(s *scenario.Scenario) mutation {
			// Purchase and refund agree with each other and net 0 per user,
			// but neither is on the purchaser.
			return mutation{`UPDATE points_ledger p SET user_id = o.user_id FROM orders o
				WHERE p.order_id = o.order_id AND o.status = 'CANCELLED' AND o.order_id = (
					SELECT min(r.order_id) FROM points_ledger r JOIN orders c USING (order_id)
					WHERE r.kind = 'refund' AND r.user_id <> c.user_id AND starts_with(c.order_id, $1))`,
				[]any{s.Expected.Prefix}}
		}},
		{"wrong purchase points", 1, []string{"purchase row has", "points from the run's orders"}, func(s *scenario.Scenario) mutation {
			return mutation{`UPDATE points_ledger SET points = points + 1 WHERE order_id = $1 AND kind = 'purchase'`,
				[]any{pickOrder(t, s, completed).OrderID}}
		}},
		{"refund without purchase", 1, []string{"a purchase row without a refund or the reverse"}, func(s *scenario.Scenario) mutation {
			return mutation{`DELETE FROM points_ledger WHERE kind = 'purchase' AND order_id = (
				SELECT min(order_id) FROM points_ledger WHERE kind = 'refund' AND starts_with(order_id, $1))`,
				[]any{s.Expected.Prefix}}
		}},
		{"order never published", 1, []string{"was never published"}, func(s *scenario.Scenario) mutation {
			return mutation{`INSERT INTO orders (order_id, user_id, status, version, amount_cents, content_hash) VALUES ($1, 1, 'CREATED', 1, 0, $2)`,
				[]any{s.Expected.Prefix + "-99999", strings.Repeat("a", 64)}}
		}},
		{"wrong status", 2, []string{"expected COMPLETED"}, func(s *scenario.Scenario) mutation {
			return mutation{`UPDATE orders SET status = 'SHIPPED' WHERE order_id = $1`, []any{pickOrder(t, s, completed).OrderID}}
		}},
		{"version decreased", 2, []string{"its version decreased"}, func(s *scenario.Scenario) mutation {
			o := pickOrder(t, s, func(o scenario.ExpectedOrder) bool { return o.Version >= 3 })
			// Make the final event look applied before an earlier one.
			return mutation{`UPDATE order_events SET outcome = 'applied', first_seen_at = '2000-01-01'
				WHERE order_id = $1 AND version = $2`, []any{o.OrderID, o.Version}}
		}},
		{"illegal transition applied", 2, []string{"is recorded as applied, expected illegal", "¢ user"}, func(s *scenario.Scenario) mutation {
			k := pickKey(t, s, func(k scenario.PublishedKey) bool { return k.Outcome == scenario.OutcomeIllegal })
			// The event recorded as applied and the order moved to it.
			return mutation{`WITH e AS (
					UPDATE order_events SET outcome = 'applied', reason = '' WHERE order_id = $1 AND version = $2 RETURNING order_id)
				UPDATE orders SET status = $3, version = $2 WHERE order_id IN (SELECT order_id FROM e)`,
				[]any{k.OrderID, k.Version, string(k.Status)}}
		}},
		{"illegal event recorded as stale", 2, []string{"is recorded as stale, expected illegal"}, func(s *scenario.Scenario) mutation {
			k := pickKey(t, s, func(k scenario.PublishedKey) bool { return k.Outcome == scenario.OutcomeIllegal })
			return mutation{`UPDATE order_events SET outcome = 'stale' WHERE order_id = $1 AND version = $2`, []any{k.OrderID, k.Version}}
		}},
		{"late lost event applied", 2, []string{"is recorded as applied, expected stale"}, func(s *scenario.Scenario) mutation {
			k := pickKey(t, s, func(k scenario.PublishedKey) bool { return k.Outcome == scenario.OutcomeStale })
			return mutation{`UPDATE order_events SET outcome = 'applied', reason = '' WHERE order_id = $1 AND version = $2`, []any{k.OrderID, k.Version}}
		}},
		{"late conflict applied", 3, []string{"with the content of its late conflicting copy"}, func(s *scenario.Scenario) mutation {
			c := lateConflict(t, s)
			// The copy recorded instead of the original, and the order
			// moved to it.
			return mutation{`WITH e AS (
					UPDATE order_events SET user_id = $3, status = $4, amount_cents = $5, occurred_at = $6
					WHERE order_id = $1 AND version = $2 RETURNING order_id)
				UPDATE orders SET user_id = $3, status = $4, amount_cents = $5 WHERE order_id IN (SELECT order_id FROM e)`,
				[]any{c.OrderID, c.Version, c.Copy.UserID, string(c.Copy.Status), c.Copy.AmountCents, c.Copy.OccurredAt}}
		}},
		{"lost event", 3, []string{"has no order_events row"}, func(s *scenario.Scenario) mutation {
			k := s.Expected.Keys[0]
			return mutation{`DELETE FROM order_events WHERE order_id = $1 AND version = $2`, []any{k.OrderID, k.Version}}
		}},
		{"changed content", 3, []string{"is recorded with content"}, func(s *scenario.Scenario) mutation {
			o := pickOrder(t, s, completed)
			return mutation{`UPDATE order_events SET amount_cents = amount_cents + 1 WHERE order_id = $1 AND version = $2`,
				[]any{o.OrderID, o.Version}}
		}},
		{"changed occurred_at", 3, []string{"is recorded with content"}, func(s *scenario.Scenario) mutation {
			o := pickOrder(t, s, completed)
			return mutation{`UPDATE order_events SET occurred_at = occurred_at + interval '1 microsecond' WHERE order_id = $1 AND version = $2`,
				[]any{o.OrderID, o.Version}}
		}},
		{"lost bad message", 3, []string{"is not in dead_letters"}, func(s *scenario.Scenario) mutation {
			return mutation{`DELETE FROM dead_letters WHERE keys = $1`, []any{s.Expected.Bad[0].Token}}
		}},
		{"lost conflict", 3, []string{"conflicting copy of"}, func(s *scenario.Scenario) mutation {
			c := s.Expected.Conflicts[0]
			return mutation{`DELETE FROM dead_letters WHERE reason LIKE 'conflict:%' AND position(convert_to($1, 'UTF8') IN body) > 0
				AND position(convert_to($2, 'UTF8') IN body) > 0`,
				[]any{fmt.Sprintf(`"order_id":%q`, c.OrderID), fmt.Sprintf(`"version":%d,`, c.Version)}}
		}},
		{"vague reason", 4, []string{"which mentions none of"}, func(s *scenario.Scenario) mutation {
			return mutation{`UPDATE dead_letters SET reason = 'rejected' WHERE keys = $1`, []any{s.Expected.Bad[3].Token}}
		}},
		{"valid event parked", 4, []string{"was parked in dead_letters"}, func(s *scenario.Scenario) mutation {
			o := pickOrder(t, s, completed)
			e := scenario.Event{EventID: "x", OrderID: o.OrderID, UserID: o.UserID, Status: o.Status, Version: o.Version,
				AmountCents: o.AmountCents, OccurredAt: time.Now()}
			body, _ := json.Marshal(e)
			return mutation{`INSERT INTO dead_letters (fingerprint, keys, body, reason) VALUES ($1, $2, $3, 'temporal unavailable')`,
				[]any{strings.Repeat("c", 64), o.OrderID, body}}
		}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := genScenario(t, fmt.Sprintf("chk-v%02d", i), int64(100+i))
			run(t, gdb, s, uint64(i))
			mustPass(t, gdb, &s.Expected)
			m := tc.mutate(s)
			res, err := db.ExecContext(ctx, m.sql, m.args...)
			if err != nil {
				t.Fatalf("mutation: %v", err)
			}
			if n, _ := res.RowsAffected(); n == 0 {
				t.Fatal("mutation changed nothing")
			}
			r, out := verify(t, gdb, &s.Expected)
			if r.OK() {
				t.Fatalf("violation not detected:\n%s", out)
			}
			inv := r.Invariants[tc.invariant-1]
			for _, w := range tc.want {
				if inv.Pass() || !strings.Contains(strings.Join(inv.Failures, "\n"), w) {
					t.Fatalf("want invariant %d to fail with %q:\n%s", tc.invariant, w, out)
				}
			}
			if r.Invariants[4].Pass() {
				t.Fatalf("invariant 5 holds although %d failed", tc.invariant)
			}
			if !strings.Contains(out, "verdict: FAIL") || !strings.Contains(out, fmt.Sprintf("invariant %d", tc.invariant)) {
				t.Fatalf("summary does not report the failure:\n%s", out)
			}
			t.Logf("detected:\n%s", strings.Join(inv.Failures, "\n"))
		})
	}
}
