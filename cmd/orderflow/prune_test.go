package main

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/message"
	"github.com/orderflow/orderflow/store"
	"github.com/orderflow/orderflow/wire"
)

// prune on the real database: a bare command only counts; -yes removes
// the details of the long-finished orders only, and of their dead letters
// (found by the order their body names) the replayed ones, the others
// with -include-unreplayed; a late copy of a pruned key, delivered through
// why's eyes, changes nothing. (The 100,000-row run under concurrent load
// is store's TestPruneWhileEventsAreApplied.)
func TestPrune(t *testing.T) {
	gdb, dsn := testenv.NewDatabase(t)
	s := store.New(gdb)
	ctx := context.Background()
	at := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	apply := func(id string, st fsm.Status, v int64) {
		t.Helper()
		e := fsm.Event{EventID: "e", OrderID: id, UserID: 8, Status: st, Version: v, AmountCents: 1000, OccurredAt: at}
		res, err := s.ApplyEvent(ctx, e, wire.Envelope{MessageID: fmt.Sprintf("M-%s-%d", id, v)})
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
	// Dead letters, named by what becomes of them. A conflicting copy of
	// an old order's last event, never replayed.
	conflict := event(old[0], 3, fsm.Completed, 1000)
	conflict.UserID = 9
	if _, err := s.ApplyEvent(ctx, conflict, envelope(conflict)); err != nil {
		t.Fatal(err)
	}
	park := func(keys string, body []byte, reason string) int64 {
		t.Helper()
		p, err := s.ParkDeadLetter(ctx, wire.DeadLetter{Reason: reason,
			Envelope: wire.NewEnvelope("ORDER_EVENTS", uniq.Name("M"), keys, "PAID", body, time.Time{}, false)})
		if err != nil {
			t.Fatal(err)
		}
		return p.ID
	}
	encode := func(e fsm.Event) []byte {
		b, err := message.Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var unreplayedConflict int64
	if err := gdb.Raw(`SELECT id FROM dead_letters`).Row().Scan(&unreplayedConflict); err != nil {
		t.Fatal(err)
	}
	dl := map[string]int64{
		"unreplayed conflict": unreplayedConflict,
		// Replayed, its body an old order's event, its keys another order's.
		"replayed, old by its body": park(open[1], encode(event(old[2], 2, fsm.Paid, 1000)), "undeliverable: engine down"),
		// Replayed, its keys an old order, its body an open one's event.
		"replayed, old by its keys only": park(old[3], encode(event(open[0], 3, fsm.Shipped, 1000)), "undeliverable: engine down"),
		// Replayed, naming no order.
		"replayed, malformed": park(old[4], []byte(`{"order_id":`), "malformed_json: unexpected end of JSON input"),
		// Never replayed, invalid but naming an old order.
		"unreplayed invalid": park("x", []byte(`{"order_id":"`+old[5]+`","user_id":0}`), "missing_field: event_id: is required"),
		// Replayed, an old order's event, seen again lately.
		"replayed, seen lately": park(old[6], encode(event(old[6], 2, fsm.Paid, 1000)), "undeliverable: engine down"),
	}
	// Two producers' numbers: one silent for 40 days (two ranges: a hole
	// at 3), one heard from lately.
	for p, seqs := range map[string][]int64{prefix + "-silent": {1, 2, 4}, prefix + "-live": {1}} {
		for _, n := range seqs {
			if err := s.RecordSeq(ctx, p, n); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, q := range []string{
		`UPDATE received_seq_producers SET last_seen_at = now() - interval '40 days' WHERE producer_id = '` + prefix + `-silent'`,
		`UPDATE orders SET updated_at = now() - interval '40 days' WHERE starts_with(order_id, '` + prefix + `-old-') OR starts_with(order_id, '` + prefix + `-open-')`,
		`UPDATE dead_letters SET last_seen_at = now() - interval '40 days'`,
		fmt.Sprintf(`UPDATE dead_letters SET last_seen_at = now() WHERE id = %d`, dl["replayed, seen lately"]),
		fmt.Sprintf(`UPDATE dead_letters SET replayed_at = now(), replay_outcome = 'applied' WHERE id IN (%d, %d, %d, %d)`,
			dl["replayed, old by its body"], dl["replayed, old by its keys only"], dl["replayed, malformed"], dl["replayed, seen lately"]),
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
	left := func(want ...string) {
		t.Helper()
		var ids []int64
		if err := gdb.Raw(`SELECT id FROM dead_letters ORDER BY id`).Scan(&ids).Error; err != nil {
			t.Fatal(err)
		}
		var got []string
		for name, id := range dl {
			if slices.Contains(ids, id) {
				got = append(got, name)
			}
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("dead letters left: %q, want %q", got, want)
		}
	}
	all := []string{"unreplayed conflict", "replayed, old by its body", "replayed, old by its keys only", "replayed, malformed",
		"unreplayed invalid", "replayed, seen lately"}

	// A bare prune is a dry run.
	code, out, errOut := runCmd("prune", "-database-url", dsn, "-older-than", "30d")
	want := "dry run: orders COMPLETED or CANCELLED and unchanged since before "
	for _, w := range []string{"10 orders would lose 30 order_events rows and 1 dead letters; 2 dead letters of these orders were never replayed and stay",
		"1 producers silent since then would be retired (2 rows of received sequence numbers)",
		"nothing was removed: add -yes to remove them"} {
		if !strings.Contains(out, w) {
			t.Errorf("bare prune lacks %q", w)
		}
	}
	if code != 0 || !strings.HasPrefix(out, want) || rows(old) != 30 {
		t.Fatalf("bare prune: exit %d, want a dry run (%q) that removes nothing (%d rows of 30 left)\n%s%s", code, want, rows(old), out, errOut)
	}
	left(all...)
	producers := func() string {
		t.Helper()
		var ids []string
		if err := gdb.Raw(`SELECT producer_id FROM received_seq_producers ORDER BY producer_id`).Scan(&ids).Error; err != nil {
			t.Fatal(err)
		}
		return strings.Join(ids, ",")
	}
	if got, want := producers(), prefix+"-live,"+prefix+"-silent"; got != want {
		t.Errorf("after the dry run: producers %s, want %s", got, want)
	}
	t.Logf("%s", out)
	code, out, errOut = runCmd("prune", "-database-url", dsn, "-older-than", "30d", "-dry-run")
	if code != 0 || !strings.Contains(out, "10 orders would lose 30 order_events rows and 1 dead letters") || rows(old) != 30 {
		t.Fatalf("prune -dry-run: exit %d\n%s%s", code, out, errOut)
	}

	code, out, errOut = runCmd("prune", "-database-url", dsn, "-older-than", "720h", "-yes", "-batch", "7", "-json")
	var st store.PruneStats
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.DryRun || st.Orders != 10 || st.Events != 30 || st.DeadLetters != 1 ||
		st.KeptUnreplayed != 2 || st.Producers != 1 || st.SequenceRanges != 2 || st.Statements < 30/7 {
		t.Fatalf("prune -yes -json: exit %d\n%s%s", code, out, errOut)
	}
	if got, want := producers(), prefix+"-live"; got != want {
		t.Errorf("after the prune: producers %s, want %s", got, want)
	}
	if rows(old) != 0 || rows(open) != 20 || rows(fresh) != 30 {
		t.Errorf("after the prune: %d rows of old orders (want 0), %d of open ones (20), %d of fresh ones (30)", rows(old), rows(open), rows(fresh))
	}
	left("unreplayed conflict", "replayed, old by its keys only", "replayed, malformed", "unreplayed invalid", "replayed, seen lately")
	code, out, errOut = runCmd("prune", "-database-url", dsn, "-older-than", "720h", "-yes", "-include-unreplayed")
	if code != 0 || !strings.Contains(out, "0 orders lost 0 order_events rows and 2 dead letters") || strings.Contains(out, "never replayed") {
		t.Errorf("prune -include-unreplayed: exit %d\n%s%s", code, out, errOut)
	}
	left("replayed, old by its keys only", "replayed, malformed", "replayed, seen lately")

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
		{[]string{"prune", "-older-than", "1ns"}, 2, "-older-than 1ns is shorter than the floor of 24h: pass -force"},
		{[]string{"prune", "-older-than", "23h59m", "-yes"}, 2, "shorter than the floor of 24h"},
		{[]string{"prune", "-older-than", "0.5d"}, 2, "shorter than the floor of 24h"},
		{[]string{"prune", "-older-than", "30d", "-batch", "0"}, 2, "-batch 0"},
		{[]string{"prune", "-older-than", "30d", "-yes", "-dry-run"}, 2, "-yes and -dry-run contradict"},
		{[]string{"prune", "-older-than", "30d", "extra"}, 2, "unexpected arguments"},
		{[]string{"prune", "-database-url", dead, "-older-than", "1h", "-force"}, 1, "PostgreSQL at postgres://orderflow:xxxxx@" + deadAddr},
		{[]string{"prune", "-database-url", dead, "-older-than", "24h"}, 1, "PostgreSQL at postgres://orderflow:xxxxx@" + deadAddr},
	} {
		code, out, errOut := runCmd(c.args...)
		if code != c.code || !strings.Contains(out+errOut, c.says) || strings.Contains(out+errOut, "planted-pw") {
			t.Errorf("orderflow %v: exit %d, want %d saying %q (and no password):\n%s%s", c.args, code, c.code, c.says, out, errOut)
		}
	}
}

// An interrupted prune (SIGINT cancels the command's context) stops after
// the statement under way, says what it removed so far, and leaves every
// order that lost rows stamped pruned; a new run finishes the job.
func TestPruneInterrupted(t *testing.T) {
	gdb, dsn := testenv.NewDatabase(t)
	s := store.New(gdb)
	ctx := context.Background()
	prefix := uniq.Name("pri")
	var ids []string
	for n := range 6 {
		id := fmt.Sprintf("%s-%d", prefix, n)
		for v, st := range []fsm.Status{fsm.Created, fsm.Paid, fsm.Completed} {
			e := event(id, int64(v+1), st, 1000)
			res, err := s.ApplyEvent(ctx, e, wire.Envelope{})
			if err != nil {
				t.Fatal(err)
			}
			if d := res.Decision; d.Points != fsm.PointsNone {
				if _, err := s.AwardPoints(ctx, store.PointsRow{OrderID: id, UserID: e.UserID, Kind: d.Points, Points: d.PointsDelta, Version: e.Version}); err != nil {
					t.Fatal(err)
				}
			}
		}
		ids = append(ids, id)
	}
	if err := gdb.Exec(`UPDATE orders SET updated_at = now() - interval '40 days'`).Error; err != nil {
		t.Fatal(err)
	}
	count := func() (events, stamped, unstamped int64) {
		t.Helper()
		if err := gdb.Raw(`SELECT (SELECT count(*) FROM order_events),
				(SELECT count(*) FROM orders WHERE events_pruned_at IS NOT NULL),
				(SELECT count(*) FROM orders o WHERE events_pruned_at IS NULL
					AND (SELECT count(*) FROM order_events e WHERE e.order_id = o.order_id) < 3)`).
			Row().Scan(&events, &stamped, &unstamped); err != nil {
			t.Fatal(err)
		}
		return events, stamped, unstamped
	}

	// Two orders a round, two rows a statement, a second between
	// statements: cancelled once the first rows are gone.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var out, errOut strings.Builder
	done := make(chan int)
	go func() {
		done <- run(cctx, []string{"prune", "-database-url", dsn, "-older-than", "30d", "-yes", "-batch", "2", "-pause", "1s"}, &out, &errOut)
	}()
	testenv.WaitFor(t, 30*time.Second, func() error {
		if n, _, _ := count(); n == 18 {
			return errorf("nothing removed yet")
		}
		return nil
	})
	cancel()
	var code int
	select {
	case code = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("prune did not stop within 10s of the interruption")
	}
	events, stamped, unstamped := count()
	t.Logf("exit %d: %s", code, errOut.String())
	m := regexp.MustCompile(`interrupted: .*removed so far: (\d+) orders, (\d+) order_events rows, 0 dead letters`).FindStringSubmatch(errOut.String())
	if code != 1 || m == nil {
		t.Fatalf("interrupted prune: exit %d, want 1 saying what it removed so far\n%s%s", code, out.String(), errOut.String())
	}
	if m[2] != fmt.Sprint(18-events) || m[1] != fmt.Sprint(stamped) || events == 0 {
		t.Errorf("the interrupted prune says it removed %s rows of %s orders; the database lost %d rows, %d orders are stamped", m[2], m[1], 18-events, stamped)
	}
	if unstamped > 0 {
		t.Errorf("%d orders lost rows but are not stamped pruned", unstamped)
	}
	if code, o, e := runCmd("audit", "-database-url", dsn, "-settle", "0s"); code != 0 {
		t.Errorf("audit after the interrupted prune: exit %d\n%s%s", code, o, e)
	}
	// A new run finishes.
	if code, o, e := runCmd("prune", "-database-url", dsn, "-older-than", "30d", "-yes"); code != 0 || !strings.Contains(o, fmt.Sprintf("lost %d order_events rows", events)) {
		t.Errorf("prune after the interruption: exit %d\n%s%s", code, o, e)
	}
	if events, stamped, _ := count(); events != 0 || stamped != int64(len(ids)) {
		t.Errorf("after the second run: %d rows left, %d orders stamped (want 0 and %d)", events, stamped, len(ids))
	}
}
