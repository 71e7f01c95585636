package check

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/message"
	"github.com/orderflow/orderflow/scenario"
)

func newDB(t *testing.T) (*sql.DB, *gorm.DB) {
	t.Helper()
	g, _ := testenv.NewDatabase(t)
	db, err := g.DB()
	if err != nil {
		t.Fatal(err)
	}
	return db, g
}

func genScenario(t *testing.T, prefix string, seed int64) *scenario.Scenario {
	t.Helper()
	s, err := scenario.Generate(scenario.Options{
		Orders: 40, Seed: seed, Prefix: prefix,
		DupRate: 0.2, Reorder: 0.5, CancelRate: 0.3, OpenRate: 0.2,
		UpdateRate: 0.3, GapRate: 0.15, Conflicts: 4, Bad: 6,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// consume plays a faithful pipeline: it delivers msgs in the given order and
// writes what orderflow would write, as raw SQL, following DESIGN.md.
func consume(t *testing.T, db *sql.DB, msgs []scenario.Message) {
	t.Helper()
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	park := func(keys string, body []byte, reason string) {
		sum := sha256.Sum256(append([]byte(keys+"\x00"), body...))
		exec(`INSERT INTO dead_letters (fingerprint, topic, keys, body, reason) VALUES ($1, 'T', $2, $3, $4)
			ON CONFLICT (fingerprint) DO UPDATE SET times_seen = dead_letters.times_seen + 1`,
			hex.EncodeToString(sum[:]), keys, body, reason)
	}
	cur := map[string]*fsm.Order{}
	seen := map[fsm.Key]string{}
	clock := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, m := range msgs {
		clock = clock.Add(time.Millisecond)
		e, err := message.Decode(m.Msg.Body)
		if err != nil {
			var rej *message.Rejection
			if !errors.As(err, &rej) {
				t.Fatal(err)
			}
			park(m.Msg.Keys, m.Msg.Body, rej.Reason)
			continue
		}
		h := e.ContentHash()
		if prev, ok := seen[e.Key()]; ok {
			if prev == h {
				exec(`UPDATE order_events SET times_seen = times_seen + 1 WHERE order_id = $1 AND version = $2`, e.OrderID, e.Version)
			} else {
				body, _ := json.Marshal(e)
				park(e.OrderID, body, "conflict: "+e.Key().String()+" was recorded with different content")
			}
			continue
		}
		seen[e.Key()] = h
		d := fsm.Decide(cur[e.OrderID], e)
		if d.Outcome == fsm.Applied {
			n := d.Next
			cur[e.OrderID] = &n
			var purchaser any
			if n.Purchased {
				purchaser = n.PurchaseUserID
			}
			exec(`INSERT INTO orders (order_id, user_id, status, version, amount_cents, content_hash, purchased, purchase_points,
					purchase_user_id, refunded)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
				ON CONFLICT (order_id) DO UPDATE SET user_id = EXCLUDED.user_id, status = EXCLUDED.status, version = EXCLUDED.version,
					amount_cents = EXCLUDED.amount_cents, content_hash = EXCLUDED.content_hash, purchased = EXCLUDED.purchased,
					purchase_points = EXCLUDED.purchase_points, purchase_user_id = EXCLUDED.purchase_user_id,
					refunded = EXCLUDED.refunded`,
				n.OrderID, n.UserID, n.Status, n.Version, n.AmountCents, n.ContentHash, n.Purchased, n.PurchasePoints,
				purchaser, n.Refunded)
		}
		exec(`INSERT INTO order_events (order_id, version, event_id, user_id, status, amount_cents, content_hash, outcome, gap,
				points_kind, points_delta, reason, occurred_at, first_seen_at, last_seen_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $14)`,
			e.OrderID, e.Version, e.EventID, e.UserID, e.Status, e.AmountCents, h, d.Outcome, d.Gap,
			string(d.Points), d.PointsDelta, d.Reason, e.OccurredAt, clock)
		if d.Points != fsm.PointsNone {
			exec(`INSERT INTO points_ledger (order_id, user_id, kind, points, version) VALUES ($1, $2, $3, $4, $5)`,
				e.OrderID, d.Next.PointsUser(), string(d.Points), d.PointsDelta, e.Version)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

func shuffled(msgs []scenario.Message, seed uint64) []scenario.Message {
	out := append([]scenario.Message(nil), msgs...)
	rand.New(rand.NewPCG(seed, 9)).Shuffle(len(out), func(a, b int) { out[a], out[b] = out[b], out[a] })
	return out
}

func TestVerifyPassesOnFaithfulRuns(t *testing.T) {
	db, gdb := newDB(t)
	ctx := context.Background()
	// Two runs in one database: in publish order and in a random order.
	a := genScenario(t, "chk-a", 1)
	b := genScenario(t, "chk-b", 2)
	consume(t, db, a.Messages)
	consume(t, db, shuffled(b.Messages, 3))
	for _, s := range []*scenario.Scenario{a, b} {
		r, err := Verify(ctx, gdb, &s.Expected)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		r.Write(&out)
		t.Logf("\n%s", out.String())
		if !r.OK() {
			t.Fatalf("a faithful run failed the check:\n%s", out.String())
		}
		if r.DeadLettersByReason["conflict"] != s.Expected.Counts.Conflicts {
			t.Fatalf("dead letters by reason %v, want %d conflicts", r.DeadLettersByReason, s.Expected.Counts.Conflicts)
		}
		n := 0
		for _, c := range r.EventsByOutcome {
			n += c
		}
		if n != len(s.Expected.Keys) || r.Points != r.ExpectedPoints {
			t.Fatalf("report figures: %d events (want %d), points %d (want %d)", n, len(s.Expected.Keys), r.Points, r.ExpectedPoints)
		}
		if !strings.Contains(out.String(), "verdict: PASS") {
			t.Fatalf("summary has no PASS verdict:\n%s", out.String())
		}
	}
}

// pick returns an expected order matching the predicate.
func pick(t *testing.T, s *scenario.Scenario, ok func(scenario.ExpectedOrder) bool) scenario.ExpectedOrder {
	t.Helper()
	for _, o := range s.Expected.Orders {
		if ok(o) {
			return o
		}
	}
	t.Fatal("no order fits")
	return scenario.ExpectedOrder{}
}

func TestVerifyDetectsViolations(t *testing.T) {
	db, gdb := newDB(t)
	ctx := context.Background()
	completed := func(o scenario.ExpectedOrder) bool { return o.Status == fsm.Completed && o.PurchasePoints > 0 }
	conflictKey := func(s *scenario.Scenario) fsm.Key {
		c := s.Expected.Conflicts[0]
		return fsm.Key{OrderID: c.OrderID, Version: c.Version}
	}
	cases := []struct {
		name      string
		invariant int
		want      string
		mutate    func(s *scenario.Scenario) (string, []any)
	}{
		{"refund row for a completed order", 1, "has a refund row", func(s *scenario.Scenario) (string, []any) {
			o := pick(t, s, completed)
			return `INSERT INTO points_ledger (order_id, user_id, kind, points, version) VALUES ($1, $2, 'refund', $3, 1)`,
				[]any{o.OrderID, o.UserID, -o.PurchasePoints}
		}},
		{"refund on another user", 1, "but user", func(s *scenario.Scenario) (string, []any) {
			// Whichever order of the run got a refund row.
			return `UPDATE points_ledger SET user_id = user_id + 1 WHERE kind = 'refund' AND order_id = (
				SELECT min(order_id) FROM points_ledger WHERE kind = 'refund' AND starts_with(order_id, $1))`,
				[]any{s.Expected.Prefix}
		}},
		{"wrong purchase points", 1, "purchase row has", func(s *scenario.Scenario) (string, []any) {
			return `UPDATE points_ledger SET points = points + 1 WHERE order_id = $1 AND kind = 'purchase'`, []any{pick(t, s, completed).OrderID}
		}},
		{"order never published", 1, "was never published", func(s *scenario.Scenario) (string, []any) {
			return `INSERT INTO orders (order_id, user_id, status, version, amount_cents, content_hash) VALUES ($1, 1, 'CREATED', 1, 0, $2)`,
				[]any{s.Expected.Prefix + "-99999", strings.Repeat("a", 64)}
		}},
		{"wrong status", 2, "expected COMPLETED", func(s *scenario.Scenario) (string, []any) {
			return `UPDATE orders SET status = 'SHIPPED' WHERE order_id = $1`, []any{pick(t, s, completed).OrderID}
		}},
		{"version decreased", 2, "its version decreased", func(s *scenario.Scenario) (string, []any) {
			o := pick(t, s, func(o scenario.ExpectedOrder) bool { return o.Version >= 3 })
			// Make the final event look applied before an earlier one.
			return `UPDATE order_events SET outcome = 'applied', first_seen_at = '2000-01-01'
				WHERE order_id = $1 AND version = $2`, []any{o.OrderID, o.Version}
		}},
		{"lost event", 3, "has no order_events row", func(s *scenario.Scenario) (string, []any) {
			k := s.Expected.Keys[0]
			return `DELETE FROM order_events WHERE order_id = $1 AND version = $2`, []any{k.OrderID, k.Version}
		}},
		{"changed content", 3, "is recorded with content", func(s *scenario.Scenario) (string, []any) {
			k := pick(t, s, completed)
			return `UPDATE order_events SET content_hash = $3 WHERE order_id = $1 AND version = $2`,
				[]any{k.OrderID, k.Version, strings.Repeat("b", 64)}
		}},
		{"lost bad message", 3, "is not in dead_letters", func(s *scenario.Scenario) (string, []any) {
			return `DELETE FROM dead_letters WHERE keys = $1`, []any{s.Expected.Bad[0].Token}
		}},
		{"lost conflict", 3, "conflicting copy of", func(s *scenario.Scenario) (string, []any) {
			k := conflictKey(s)
			return `DELETE FROM dead_letters WHERE keys = $1 AND reason LIKE 'conflict:%' AND position(convert_to($2, 'UTF8') IN body) > 0`,
				[]any{k.OrderID, fmt.Sprintf(`"version":%d,`, k.Version)}
		}},
		{"vague reason", 4, "which mentions none of", func(s *scenario.Scenario) (string, []any) {
			return `UPDATE dead_letters SET reason = 'rejected' WHERE keys = $1`, []any{s.Expected.Bad[3].Token}
		}},
		{"valid event parked", 4, "was parked in dead_letters", func(s *scenario.Scenario) (string, []any) {
			o := pick(t, s, completed)
			e := fsm.Event{EventID: "x", OrderID: o.OrderID, UserID: o.UserID, Status: o.Status, Version: o.Version,
				AmountCents: o.AmountCents, OccurredAt: time.Now()}
			body, _ := json.Marshal(e)
			return `INSERT INTO dead_letters (fingerprint, keys, body, reason) VALUES ($1, $2, $3, 'temporal unavailable')`,
				[]any{strings.Repeat("c", 64), o.OrderID, body}
		}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := genScenario(t, fmt.Sprintf("chk-v%02d", i), int64(100+i))
			consume(t, db, shuffled(s.Messages, uint64(i)))
			r, err := Verify(ctx, gdb, &s.Expected)
			if err != nil {
				t.Fatal(err)
			}
			if !r.OK() {
				var out bytes.Buffer
				r.Write(&out)
				t.Fatalf("fails before the mutation:\n%s", out.String())
			}
			q, args := tc.mutate(s)
			res, err := db.ExecContext(ctx, q, args...)
			if err != nil {
				t.Fatalf("mutation: %v", err)
			}
			if n, _ := res.RowsAffected(); n == 0 {
				t.Fatal("mutation changed nothing")
			}
			r, err = Verify(ctx, gdb, &s.Expected)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			r.Write(&out)
			if r.OK() {
				t.Fatalf("violation not detected:\n%s", out.String())
			}
			inv := r.Invariants[tc.invariant-1]
			if inv.Pass() || !strings.Contains(strings.Join(inv.Failures, "\n"), tc.want) {
				t.Fatalf("want invariant %d to fail with %q:\n%s", tc.invariant, tc.want, out.String())
			}
			if r.Invariants[4].Pass() {
				t.Fatalf("invariant 5 holds although %d failed", tc.invariant)
			}
			if !strings.Contains(out.String(), "verdict: FAIL") || !strings.Contains(out.String(), fmt.Sprintf("invariant %d", tc.invariant)) {
				t.Fatalf("summary does not report the failure:\n%s", out.String())
			}
		})
	}
}
