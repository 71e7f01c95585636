package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/store"
	"github.com/orderflow/orderflow/wire"
)

func TestAuditFindsEveryKindOfCorruption(t *testing.T) {
	gdb, dsn := testenv.NewDatabase(t)
	t.Setenv("DATABASE_URL", dsn)
	s := store.New(gdb)
	ctx := context.Background()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// Six orders, each paid (12345 cents: 123 points) and then completed or
	// cancelled, written as the pipeline writes them.
	orders := map[string]fsm.Status{}
	for n := range 6 {
		id := fmt.Sprintf("audit-%d", n)
		final := fsm.Completed
		if n%2 == 1 {
			final = fsm.Cancelled
		}
		orders[id] = final
		for v, st := range []fsm.Status{fsm.Created, fsm.Paid, final} {
			e := fsm.Event{EventID: fmt.Sprintf("%s-%d", id, v), OrderID: id, UserID: int64(10 + n), Status: st,
				Version: int64(v + 1), AmountCents: 12345, OccurredAt: at.Add(time.Duration(v) * time.Minute)}
			res, err := s.ApplyEvent(ctx, e, wire.Envelope{})
			if err != nil {
				t.Fatal(err)
			}
			if d := res.Decision; d.Points != fsm.PointsNone {
				if _, err := s.AwardPoints(ctx, store.PointsRow{OrderID: id, UserID: e.UserID, Kind: d.Points,
					Points: d.PointsDelta, Version: e.Version}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	audit := func() (int, []store.Violation, string) {
		var out, errOut bytes.Buffer
		code := run(ctx, []string{"audit", "-settle", "0s", "-batch", "2", "-json"}, &out, &errOut)
		var r struct {
			Stats      store.AuditStats  `json:"stats"`
			Violations []store.Violation `json:"violations"`
		}
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			t.Fatalf("audit -json: %v\n%s%s", err, out.String(), errOut.String())
		}
		if r.Stats.Orders != int64(len(orders)) || r.Stats.Batches != int64(len(orders)/2) {
			t.Errorf("audit read %d orders in %d rounds, want %d in %d", r.Stats.Orders, r.Stats.Batches, len(orders), len(orders)/2)
		}
		return code, r.Violations, out.String() + errOut.String()
	}
	if code, v, out := audit(); code != 0 || len(v) != 0 {
		t.Fatalf("audit of faithful rows: exit %d, violations %v\n%s", code, v, out)
	}

	// One corruption of each kind, each on its own order.
	for _, q := range []string{
		// A second purchase row (the unique key dropped first, as a botched
		// manual repair might).
		`ALTER TABLE points_ledger DROP CONSTRAINT points_ledger_order_kind_key`,
		`INSERT INTO points_ledger (order_id, user_id, kind, points, version) VALUES ('audit-0', 10, 'purchase', 123, 2)`,
		// The ledger nets other points than the decisions moved.
		`UPDATE points_ledger SET points = points + 7 WHERE order_id = 'audit-2' AND kind = 'purchase'`,
		`UPDATE order_events SET points_delta = points_delta + 7 WHERE order_id = 'audit-2' AND points_kind = 'purchase'`,
		// A refund on another user.
		`UPDATE points_ledger SET user_id = 99 WHERE order_id = 'audit-3' AND kind = 'refund'`,
		// The order row is not its highest applied event.
		`UPDATE orders SET status = 'SHIPPED' WHERE order_id = 'audit-4'`,
		// An outcome nobody knows (its check dropped first).
		`ALTER TABLE order_events DROP CONSTRAINT order_events_outcome_check`,
		`UPDATE order_events SET outcome = 'maybe' WHERE order_id = 'audit-5' AND version = 1`,
	} {
		if err := gdb.Exec(q).Error; err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	code, v, out := audit()
	if code != 1 {
		t.Fatalf("audit of corrupted rows: exit %d, want 1\n%s", code, out)
	}
	got := map[string]string{}
	for _, x := range v {
		got[x.Check] += x.OrderID + " "
	}
	for check, order := range map[string]string{"duplicate_ledger_row": "audit-0", "net_points": "audit-0",
		"purchase_rule": "audit-2", "refund_user": "audit-3", "order_row": "audit-4", "unknown_outcome": "audit-5"} {
		if !strings.Contains(got[check], order) {
			t.Errorf("audit did not name %s for %s; violations: %+v", check, order, v)
		}
	}
	var text, errOut bytes.Buffer
	if code := run(ctx, []string{"audit", "-settle", "0s"}, &text, &errOut); code != 1 ||
		!strings.Contains(text.String(), "audit-3") || !strings.Contains(text.String(), "violations") {
		t.Errorf("audit table: exit %d\n%s%s", code, text.String(), errOut.String())
	}
	if code := run(ctx, []string{"audit", "-order", "audit-1", "-settle", "0s"}, &text, &errOut); code != 0 {
		t.Errorf("audit of an untouched order: exit %d", code)
	}
	if code := run(ctx, []string{"audit", "-since", "tomorrow"}, &text, &errOut); code != 2 {
		t.Errorf("audit with a bad -since: exit %d, want 2", code)
	}
}

// What audit quotes from the rows (here an outcome a manual repair
// wrote, holding control characters) is shown escaped; -json keeps it
// exact.
func TestAuditEscapesControlCharacters(t *testing.T) {
	gdb, dsn := testenv.NewDatabase(t)
	t.Setenv("DATABASE_URL", dsn)
	s := store.New(gdb)
	ctx := context.Background()
	e := fsm.Event{EventID: "esc-1", OrderID: "audit-esc", UserID: 1, Status: fsm.Created, Version: 1, AmountCents: 100,
		OccurredAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	if _, err := s.ApplyEvent(ctx, e, wire.Envelope{}); err != nil {
		t.Fatal(err)
	}
	const outcome = "maybe\x1b]0;owned\x07\x1b[2J"
	for _, q := range []string{
		`ALTER TABLE order_events DROP CONSTRAINT order_events_outcome_check`,
		`UPDATE order_events SET outcome = '` + outcome + `' WHERE order_id = 'audit-esc'`,
	} {
		if err := gdb.Exec(q).Error; err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var out, errOut bytes.Buffer
	if code := run(ctx, []string{"audit", "-settle", "0s"}, &out, &errOut); code != 1 {
		t.Fatalf("audit: exit %d, want 1\n%s%s", code, out.String(), errOut.String())
	}
	if c := rawControls(out.String()); len(c) > 0 {
		t.Errorf("audit prints the control characters %q raw:\n%q", c, out.String())
	}
	if want := `v1 has outcome 'maybe\x1b]0;owned\x07\x1b[2J'`; !strings.Contains(out.String(), want) {
		t.Errorf("audit lacks %q:\n%s", want, out.String())
	}
	out.Reset()
	var r struct {
		Violations []store.Violation `json:"violations"`
	}
	code := run(ctx, []string{"audit", "-settle", "0s", "-json"}, &out, &errOut)
	exact := false
	if err := json.Unmarshal(out.Bytes(), &r); err == nil {
		for _, v := range r.Violations {
			exact = exact || v.Check == "unknown_outcome" && v.Detail == "v1 has outcome '"+outcome+"'"
		}
	}
	if code != 1 || !exact {
		t.Errorf("audit -json is not exact: exit %d %+v\n%s", code, r, out.String())
	}
}
