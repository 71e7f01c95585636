package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/message"
	"github.com/orderflow/orderflow/store"
)

// prune on the real database: the dry run counts, the prune removes the
// details of the long-finished orders only, and a late copy of a pruned
// key, delivered through why's eyes, changes nothing. (The 100,000-row run
// under concurrent load is store's TestPruneWhileEventsAreApplied.)
func TestPrune(t *testing.T) {
	gdb, dsn := testenv.NewDatabase(t)
	s := store.New(gdb)
	ctx := context.Background()
	at := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	apply := func(id string, st fsm.Status, v int64) {
		t.Helper()
		e := fsm.Event{EventID: "e", OrderID: id, UserID: 8, Status: st, Version: v, AmountCents: 1000, OccurredAt: at}
		res, err := s.ApplyEvent(ctx, e, message.Envelope{MessageID: fmt.Sprintf("M-%s-%d", id, v)})
		if err != nil {
			t.Fatal(err)
		}
		if d := res.Decision; d.Points != fsm.PointsNone {
			if _, err := s.AwardPoints(ctx, store.PointsRow{OrderID: id, UserID: 8, Kind: d.Points, Points: d.PointsDelta, Version: v}); err != nil {
				t.Fatal(err)
			}
		}
	}
	prefix := uniq.Name("pr")
	var old, open, fresh []string
	for n := range 10 {
		o, op, f := fmt.Sprintf("%s-old-%d", prefix, n), fmt.Sprintf("%s-open-%d", prefix, n), fmt.Sprintf("%s-fresh-%d", prefix, n)
		for v, st := range []fsm.Status{fsm.Created, fsm.Paid, fsm.Completed} {
			apply(o, st, int64(v+1))
			apply(f, st, int64(v+1))
		}
		apply(op, fsm.Created, 1)
		apply(op, fsm.Paid, 2)
		old, open, fresh = append(old, o), append(open, op), append(fresh, f)
	}
	// A conflicting copy of an old order's last event: its dead letter.
	if _, err := s.ApplyEvent(ctx, fsm.Event{EventID: "x", OrderID: old[0], UserID: 9, Status: fsm.Completed, Version: 3,
		AmountCents: 1000, OccurredAt: at}, message.Envelope{}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`UPDATE orders SET updated_at = now() - interval '40 days' WHERE starts_with(order_id, '` + prefix + `-old-') OR starts_with(order_id, '` + prefix + `-open-')`,
		`UPDATE dead_letters SET last_seen_at = now() - interval '40 days'`,
	} {
		if err := gdb.Exec(q).Error; err != nil {
			t.Fatal(err)
		}
	}
	rows := func(ids []string) (n int64) {
		t.Helper()
		if err := gdb.Raw(`SELECT count(*) FROM order_events WHERE order_id IN ?`, ids).Scan(&n).Error; err != nil {
			t.Fatal(err)
		}
		return n
	}

	code, out, errOut := runCmd("prune", "-database-url", dsn, "-older-than", "30d", "-dry-run")
	want := "10 orders would lose 30 order_events rows and 1 dead letters"
	if code != 0 || !strings.Contains(out, want) || rows(old) != 30 {
		t.Fatalf("prune -dry-run: exit %d, want %q and nothing removed\n%s%s", code, want, out, errOut)
	}
	t.Logf("%s", out)
	code, out, errOut = runCmd("prune", "-database-url", dsn, "-older-than", "720h", "-batch", "7", "-json")
	var st store.PruneStats
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.Orders != 10 || st.Events != 30 || st.DeadLetters != 1 || st.Statements < 30/7 {
		t.Fatalf("prune -json: exit %d\n%s%s", code, out, errOut)
	}
	if rows(old) != 0 || rows(open) != 20 || rows(fresh) != 30 {
		t.Errorf("after the prune: %d rows of old orders (want 0), %d of open ones (20), %d of fresh ones (30)", rows(old), rows(open), rows(fresh))
	}
	code, out, errOut = runCmd("prune", "-database-url", dsn, "-older-than", "720h")
	if code != 0 || !strings.Contains(out, "0 orders lost 0 order_events rows and 0 dead letters") {
		t.Errorf("second prune: exit %d\n%s%s", code, out, errOut)
	}

	// why shows the pruned order; its last event, late, is a duplicate.
	apply(old[1], fsm.Completed, 3)
	code, out, errOut = runCmd("why", "-no-temporal", "-database-url", dsn, old[1], "2")
	if code != 1 || !strings.Contains(out, "pruned:  ") || !strings.Contains(out, "@2 has no row: the order's events were pruned on") {
		t.Errorf("why of a pruned order's version: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCmd("why", "-no-temporal", "-database-url", dsn, old[1], "3")
	if code != 0 || !strings.Contains(out, "@3 (COMPLETED) was duplicate: the order already held this version") ||
		!strings.Contains(out, "stored:  COMPLETED v3") || !strings.Contains(out, "purchase  8     +10") {
		t.Errorf("why of a pruned order's late copy: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := runCmd("audit", "-database-url", dsn, "-settle", "0s"); code != 0 {
		t.Errorf("audit after the prune: exit %d\n%s%s", code, out, errOut)
	}

	dead, deadAddr := downDatabase(t)
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"prune"}, 2, "-older-than is required"},
		{[]string{"prune", "-older-than", "soon"}, 2, `-older-than "soon" is not a positive duration`},
		{[]string{"prune", "-older-than", "-5m"}, 2, "not a positive duration"},
		{[]string{"prune", "-older-than", "0d"}, 2, "not a positive duration"},
		{[]string{"prune", "-older-than", "1h", "-batch", "0"}, 2, "-batch 0"},
		{[]string{"prune", "-older-than", "1h", "extra"}, 2, "unexpected arguments"},
		{[]string{"prune", "-database-url", dead, "-older-than", "1h"}, 1, "PostgreSQL at postgres://orderflow:xxxxx@" + deadAddr},
	} {
		code, out, errOut := runCmd(c.args...)
		if code != c.code || !strings.Contains(out+errOut, c.says) || strings.Contains(out+errOut, "planted-pw") {
			t.Errorf("orderflow %v: exit %d, want %d saying %q (and no password):\n%s%s", c.args, code, c.code, c.says, out, errOut)
		}
	}
}
