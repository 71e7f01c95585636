package store_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/message"
	"github.com/orderflow/orderflow/store"
	"github.com/orderflow/orderflow/wire"
)

// pruneFixture fills a database with orders in bulk (SQL), in four groups:
// "old-done" terminal for two days (pruned), "old-open" not terminal and
// untouched for two days, "new-done" terminal an hour ago, and "live"
// orders the test applies events to while Prune runs.
type pruneFixture struct {
	s      *store.Store
	prefix string
}

// bulk inserts n orders of group g, each with events rows (versions 1..events)
// and one replayed dead letter whose body names the order, all last changed
// age ago.
func (f pruneFixture) bulk(t *testing.T, g string, n, events int, status fsm.Status, age time.Duration) {
	t.Helper()
	id := fmt.Sprintf("'%s-%s-' || lpad(i::text, 6, '0')", f.prefix, g)
	ago := fmt.Sprintf("now() - interval '%d seconds'", int(age.Seconds()))
	hash := `md5(i::text) || md5(i::text || 'x')`
	for _, q := range []string{
		`INSERT INTO orders (order_id, user_id, status, version, amount_cents, content_hash, created_at, updated_at)
		 SELECT ` + id + `, 1 + i % 97, '` + string(status) + `', ` + fmt.Sprint(events) + `, 1000, ` + hash + `, ` + ago + `, ` + ago + `
		 FROM generate_series(1, ` + fmt.Sprint(n) + `) i`,
		`INSERT INTO order_events (order_id, version, event_id, user_id, status, amount_cents, content_hash, outcome,
			occurred_at, first_seen_at, last_seen_at)
		 SELECT ` + id + `, v, 'e', 1 + i % 97, 'CREATED', 1000, ` + hash + `, 'applied', ` + ago + `, ` + ago + `, ` + ago + `
		 FROM generate_series(1, ` + fmt.Sprint(n) + `) i, generate_series(1, ` + fmt.Sprint(events) + `) v`,
		`INSERT INTO dead_letters (fingerprint, topic, keys, tags, body, reason, first_seen_at, last_seen_at, replayed_at, replay_outcome)
		 SELECT md5(` + id + `) || md5(` + id + ` || 'dl'), 'T', ` + id + `, 'PAID', convert_to('{"order_id":"' || ` + id + ` || '"}', 'UTF8'),
			'undeliverable: bulk', ` + ago + `, ` + ago + `, ` + ago + `, 'applied'
		 FROM generate_series(1, ` + fmt.Sprint(n) + `) i`,
	} {
		if err := f.s.DB().Exec(q).Error; err != nil {
			t.Fatalf("bulk %s: %v", g, err)
		}
	}
}

func (f pruneFixture) count(t *testing.T, table, group string) (n int64) {
	t.Helper()
	col := "order_id"
	if table == "dead_letters" {
		col = "keys"
	}
	if err := f.s.DB().Raw(`SELECT count(*) FROM `+table+` WHERE starts_with(`+col+`, ?)`,
		f.prefix+"-"+group+"-").Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// Prune removes the details of orders terminal for longer than the window,
// in batches, while events are applied to other orders; it keeps every
// orders row, every ledger row and everything of the other orders, and
// a late copy of a pruned business key changes nothing.
func TestPruneWhileEventsAreApplied(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	f := pruneFixture{s: s, prefix: uniq.Name("prune")}
	const (
		oldDone, oldDoneEvents = 20000, 5 // 100,000 order_events rows to prune
		oldOpen, oldOpenEvents = 2000, 3
		newDone, newDoneEvents = 1000, 4
	)
	f.bulk(t, "olddone", oldDone, oldDoneEvents, fsm.Completed, 48*time.Hour)
	f.bulk(t, "oldopen", oldOpen, oldOpenEvents, fsm.Shipped, 48*time.Hour)
	f.bulk(t, "newdone", newDone, newDoneEvents, fsm.Cancelled, time.Hour)

	// Orders that went through ApplyEvent and AwardPoints for real, then
	// aged: their late copies are replayed after the prune.
	at := time.Date(2026, 1, 5, 8, 0, 0, 0, time.UTC)
	var real [][]fsm.Event
	for n := range 20 {
		id := fmt.Sprintf("%s-olddone-real-%02d", f.prefix, n)
		last := fsm.Completed
		if n%2 == 1 {
			last = fsm.Cancelled
		}
		var evs []fsm.Event
		for v, st := range []fsm.Status{fsm.Created, fsm.Paid, last} {
			e := fsm.Event{EventID: fmt.Sprintf("%s-%d", id, v+1), OrderID: id, UserID: int64(100 + n), Status: st,
				Version: int64(v + 1), AmountCents: 94321, OccurredAt: at.Add(time.Duration(v) * time.Minute)}
			evs = append(evs, e)
			res, err := s.ApplyEvent(ctx, e, wire.Envelope{MessageID: fmt.Sprintf("M-%s-%d", id, v+1)})
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
		real = append(real, evs)
	}
	if err := s.DB().Exec(`UPDATE orders SET updated_at = now() - interval '48 hours' WHERE starts_with(order_id, ?)`,
		f.prefix+"-olddone-real-").Error; err != nil {
		t.Fatal(err)
	}
	snapshot := func() string {
		var rows []map[string]any
		if err := s.DB().Raw(`SELECT o.order_id, o.status, o.version, o.content_hash, o.purchased, o.purchase_points,
				o.refunded, o.updated_at, (SELECT json_agg(l ORDER BY l.kind) FROM points_ledger l WHERE l.order_id = o.order_id) AS ledger
			FROM orders o WHERE starts_with(o.order_id, ?) ORDER BY 1`, f.prefix+"-olddone-real-").Scan(&rows).Error; err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(rows)
	}
	before := snapshot()

	// The dry run counts what the prune then removes, and removes nothing.
	dry, err := s.Prune(ctx, store.PruneOptions{OlderThan: 24 * time.Hour,
		BodyOrderID: message.BodyOrderID, DryRun: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantEvents := int64(oldDone*oldDoneEvents + 20*3)
	if dry.Orders != oldDone+20 || dry.Events != wantEvents || dry.DeadLetters != oldDone {
		t.Fatalf("dry run: %+v, want %d orders, %d events, %d dead letters", dry, oldDone+20, wantEvents, oldDone)
	}
	if got := f.count(t, "order_events", "olddone"); got != wantEvents {
		t.Fatalf("the dry run removed rows: %d left of %d", got, wantEvents)
	}

	// Live traffic: 8 appliers move every old open order on by one event
	// and take fresh orders through their lifecycle, until the prune is
	// done.
	var (
		wg          sync.WaitGroup
		applied     atomic.Int64
		slowest     atomic.Int64
		done        atomic.Bool
		duringPrune int64
		pruneErr    error
		stats       store.PruneStats
	)
	errs := make(chan error, 16)
	work := make(chan fsm.Event)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e := range work {
				began := time.Now()
				if _, err := s.ApplyEvent(ctx, e, wire.Envelope{}); err != nil {
					errs <- err
					return
				}
				if d := time.Since(began).Microseconds(); d > slowest.Load() {
					slowest.Store(d)
				}
				applied.Add(1)
			}
		}()
	}
	pruned := make(chan struct{})
	go func() {
		defer close(pruned)
		stats, pruneErr = s.Prune(ctx, store.PruneOptions{OlderThan: 24 * time.Hour,
			BodyOrderID: message.BodyOrderID, Batch: 1000}, nil)
		duringPrune = applied.Load()
		done.Store(true)
	}()
	live := 0
	for i := 0; i < oldOpen || !done.Load(); i++ {
		if i < oldOpen {
			work <- fsm.Event{EventID: "o", OrderID: fmt.Sprintf("%s-oldopen-%06d", f.prefix, i+1), UserID: 5,
				Status: fsm.Delivered, Version: oldOpenEvents + 1, AmountCents: 1000, OccurredAt: at}
		}
		id := fmt.Sprintf("%s-live-%06d", f.prefix, i)
		for v, st := range []fsm.Status{fsm.Created, fsm.Paid, fsm.Shipped, fsm.Delivered} {
			work <- fsm.Event{EventID: "l", OrderID: id, UserID: 5, Status: st, Version: int64(v + 1),
				AmountCents: 2500, OccurredAt: at}
		}
		live++
	}
	close(work)
	wg.Wait()
	<-pruned
	close(errs)
	for err := range errs {
		t.Fatalf("apply during the prune: %v", err)
	}
	if pruneErr != nil {
		t.Fatalf("prune: %v", pruneErr)
	}
	t.Logf("prune: %+v; %d events applied while it ran, slowest ApplyEvent %s", stats, duringPrune,
		time.Duration(slowest.Load())*time.Microsecond)
	if duringPrune == 0 {
		t.Error("no event was applied while the prune ran")
	}
	if stats.Events != wantEvents || stats.Orders != oldDone+20 || stats.DeadLetters != oldDone {
		t.Errorf("prune removed %+v, want the dry run's %+v", stats, dry)
	}
	if stats.Statements < wantEvents/1000 {
		t.Errorf("prune ran %d statements for %d rows: not in batches of 1000", stats.Statements, wantEvents)
	}

	// What stays: every orders row, every row of the other groups.
	for _, c := range []struct {
		table, group string
		want         int64
	}{
		{"order_events", "olddone", 0},
		{"dead_letters", "olddone", 0},
		{"orders", "olddone", oldDone + 20},
		{"order_events", "newdone", newDone * newDoneEvents},
		{"dead_letters", "newdone", newDone},
		{"order_events", "live", int64(live) * 4},
		{"order_events", "oldopen", oldOpen * (oldOpenEvents + 1)},
		{"dead_letters", "oldopen", oldOpen},
	} {
		if got := f.count(t, c.table, c.group); got != c.want {
			t.Errorf("%s rows of %s: %d, want %d", c.table, c.group, got, c.want)
		}
	}
	var stamped, unstamped int64
	if err := s.DB().Raw(`SELECT count(*) FILTER (WHERE events_pruned_at IS NOT NULL AND starts_with(order_id, ?)),
			count(*) FILTER (WHERE events_pruned_at IS NOT NULL AND NOT starts_with(order_id, ?))
		FROM orders`, f.prefix+"-olddone-", f.prefix+"-olddone-").Row().Scan(&stamped, &unstamped); err != nil {
		t.Fatal(err)
	}
	if stamped != oldDone+20 || unstamped != 0 {
		t.Errorf("events_pruned_at set on %d pruned orders (want %d) and %d others (want 0)", stamped, oldDone+20, unstamped)
	}

	// Late copies of every pruned business key of the real orders: the
	// earlier versions are stale, the terminal one a duplicate of the
	// orders row; nothing is applied, no points move, and the audit still
	// passes on them.
	for _, evs := range real {
		for _, e := range evs {
			res, err := s.ApplyEvent(ctx, e, wire.Envelope{MessageID: "late-" + e.EventID})
			if err != nil {
				t.Fatal(err)
			}
			want := fsm.Stale
			if e.Version == evs[len(evs)-1].Version {
				want = fsm.Duplicate
			}
			if d := res.Decision; d.Outcome != want || d.Points != fsm.PointsNone || res.Repeat {
				t.Errorf("late copy of pruned %s: %+v, want %s and no points", e.Key(), res, want)
			}
			for _, k := range []fsm.PointsKind{fsm.Purchase, fsm.Refund} {
				if ins, err := s.AwardPoints(ctx, store.PointsRow{OrderID: e.OrderID, UserID: e.UserID, Kind: k,
					Points: map[fsm.PointsKind]int64{fsm.Purchase: 943, fsm.Refund: -943}[k], Version: e.Version}); ins {
					t.Errorf("a late %s of %s inserted a ledger row (%v)", k, e.Key(), err)
				}
			}
		}
		// A copy of the terminal key with other content is a conflict,
		// parked; the order does not move.
		other := evs[len(evs)-1]
		other.AmountCents++
		if res, err := s.ApplyEvent(ctx, other, wire.Envelope{}); err != nil || res.Decision.Outcome != fsm.Conflict {
			t.Errorf("conflicting late copy of pruned %s: %+v %v", other.Key(), res, err)
		}
	}
	if after := snapshot(); after != before {
		t.Errorf("late copies changed the pruned orders:\nbefore %s\nafter  %s", before, after)
	}
	var found []store.Violation
	if _, err := s.Audit(ctx, store.AuditFilter{OrderID: real[0][0].OrderID}, func(v store.Violation) { found = append(found, v) }); err != nil {
		t.Fatal(err)
	}
	for _, evs := range real[1:] {
		if _, err := s.Audit(ctx, store.AuditFilter{OrderID: evs[0].OrderID}, func(v store.Violation) { found = append(found, v) }); err != nil {
			t.Fatal(err)
		}
	}
	if len(found) > 0 {
		t.Errorf("audit of pruned orders: %+v", found)
	}
	// The ledger of a pruned order is still audited, against its orders row.
	victim := real[0][0].OrderID
	if err := s.DB().Exec(`UPDATE points_ledger SET points = points + 1 WHERE order_id = ? AND kind = 'purchase'`, victim).Error; err != nil {
		t.Fatal(err)
	}
	found = nil
	if _, err := s.Audit(ctx, store.AuditFilter{OrderID: victim}, func(v store.Violation) { found = append(found, v) }); err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || found[0].Check != "net_points" || !strings.Contains(found[0].Detail, "events pruned") {
		t.Errorf("audit of a pruned order with a corrupted ledger row: %+v", found)
	}

	// A second prune finds only the late copies' rows recorded since.
	again, err := s.Prune(ctx, store.PruneOptions{OlderThan: 24 * time.Hour, BodyOrderID: message.BodyOrderID}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if again.Events != 20*3 || again.Orders != 20 || again.DeadLetters != 0 {
		t.Errorf("second prune: %+v, want the 60 late copies' rows of 20 orders and no dead letter (seen today)", again)
	}
}

func TestPruneRefusesANonPositiveWindow(t *testing.T) {
	s := newStore(t)
	if _, err := s.Prune(context.Background(), store.PruneOptions{BodyOrderID: message.BodyOrderID}, nil); err == nil {
		t.Error("prune with no window succeeded")
	}
}

// The store does not decode bodies: a prune without the decoder's reading
// of a dead letter's order is refused, and removes nothing.
func TestPruneRefusesNoBodyOrderID(t *testing.T) {
	s := newStore(t)
	_, err := s.Prune(context.Background(), store.PruneOptions{OlderThan: 24 * time.Hour}, nil)
	if !errors.Is(err, store.ErrInvalid) {
		t.Errorf("prune without BodyOrderID: err %v, want ErrInvalid", err)
	}
}

// Prune retires the producers whose last number arrived before the cutoff
// (their sequence rows go, in batches), counts them in a dry run, and
// keeps every producer heard from since.
func TestPruneRetiresIdleProducers(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	for p, seqs := range map[string][]int64{"idle-1": {1, 2, 4}, "idle-2": {1, 2, 3}, "idle-3": {2}, "busy": {1, 3}, "back": {1}} {
		for _, n := range seqs {
			if err := s.RecordSeq(ctx, p, n); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Two days without a number; "back" sends one again afterwards.
	if err := s.DB().Exec(`UPDATE received_seq_producers SET last_seen_at = now() - interval '2 days'
		WHERE producer_id IN ('idle-1', 'idle-2', 'idle-3', 'back')`).Error; err != nil {
		t.Fatal(err)
	}
	if err := s.RecordSeq(ctx, "back", 2); err != nil {
		t.Fatal(err)
	}
	producers := func() []string {
		t.Helper()
		ps, err := s.SequenceGaps(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, p := range ps {
			ids = append(ids, p.ProducerID)
		}
		return ids
	}
	// idle-1 holds 2 ranges (1-2, 4), idle-2 one (1-3), idle-3 one (2).
	const wantProducers, wantRanges = 3, 4
	st, err := s.Prune(ctx, store.PruneOptions{OlderThan: 24 * time.Hour,
		BodyOrderID: message.BodyOrderID, Batch: 2, DryRun: true}, nil)
	if err != nil || st.Producers != wantProducers || st.SequenceRanges != wantRanges {
		t.Fatalf("dry run: %+v, %v; want %d producers, %d ranges", st, err, wantProducers, wantRanges)
	}
	if got := strings.Join(producers(), ","); got != "back,busy,idle-1,idle-2,idle-3" {
		t.Fatalf("after the dry run: producers %s", got)
	}
	st, err = s.Prune(ctx, store.PruneOptions{OlderThan: 24 * time.Hour,
		BodyOrderID: message.BodyOrderID, Batch: 2}, nil)
	if err != nil || st.Producers != wantProducers || st.SequenceRanges != wantRanges {
		t.Fatalf("prune: %+v, %v; want %d producers, %d ranges", st, err, wantProducers, wantRanges)
	}
	if got := strings.Join(producers(), ","); got != "back,busy" {
		t.Fatalf("after the prune: producers %s, want back,busy", got)
	}
	var orphans int64
	if err := s.DB().Raw(`SELECT count(*) FROM received_seq_ranges WHERE producer_id LIKE 'idle-%'`).Scan(&orphans).Error; err != nil || orphans != 0 {
		t.Fatalf("%d ranges of retired producers left, %v", orphans, err)
	}
	// A retired producer that sends again starts a new record.
	if err := s.RecordSeq(ctx, "idle-2", 4); err != nil {
		t.Fatal(err)
	}
	if gaps, _ := gapsOf(t, s, "idle-2"); !reflect.DeepEqual(gaps, [][2]int64{{1, 3}}) {
		t.Fatalf("gaps of idle-2 after its return: %v, want [1 3]", gaps)
	}
}
