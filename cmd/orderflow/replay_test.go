package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/orderflow/orderflow/internal/compresstest"
	"maps"
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

type replayOutput struct {
	Summary replaySummary `json:"summary"`
	Items   []replayItem  `json:"items"`
}

// dlq replay on the real workflow: a dry run classifies every dead letter
// and changes nothing; a replay re-delivers the valid events through the
// workflow, marks them with the decision the workflow recorded, keeps
// invalid messages and conflicts as they are, and a second replay does
// nothing new.
func TestDLQReplay(t *testing.T) {
	p := newPipeline(t)
	ctx := context.Background()
	a, b, c, d := uniq.Name("rp-a"), uniq.Name("rp-b"), uniq.Name("rp-c"), uniq.Name("rp-d")
	// Through the workflow: a at v1; b at v1 then v3 (v2 missing); c
	// cancelled at v2; a conflicting copy of a's v1, parked by the workflow.
	conflicting := event(a, 1, fsm.Created, 700)
	conflicting.UserID = 43
	p.deliver(event(a, 1, fsm.Created, 700), event(b, 1, fsm.Created, 100), event(b, 3, fsm.Paid, 100),
		event(c, 1, fsm.Created, 100), event(c, 2, fsm.Cancelled, 100), conflicting)
	p.waitRecorded(a, 1, 1)
	p.waitRecorded(b, 2, 0)
	p.waitRecorded(c, 2, 0)

	// Valid events parked by an older rule (as a bridge of an earlier
	// release might have), and messages still invalid.
	park := func(env wire.Envelope, reason string) int64 {
		t.Helper()
		r, err := p.s.ParkDeadLetter(ctx, wire.DeadLetter{Envelope: env, Reason: reason})
		if err != nil {
			t.Fatal(err)
		}
		return r.ID
	}
	oldRule := "invalid_field: amount_cents: must be below 500 (a rule since dropped)"
	// d's first event is number 2 of a producer whose numbers 1 and 3 a
	// bridge recorded; parked, it recorded nothing: a hole until replayed.
	pid := uniq.Name("rp-producer")
	numbered := event(d, 1, fsm.Created, 900)
	numbered.ProducerID, numbered.Seq = pid, 2
	for _, n := range []int64{1, 3} {
		if err := p.s.RecordSeq(ctx, pid, n); err != nil {
			t.Fatal(err)
		}
	}
	holes := func() [][2]int64 {
		t.Helper()
		ps, err := p.s.SequenceGaps(ctx, pid)
		if err != nil || len(ps) != 1 {
			t.Fatalf("SequenceGaps(%s) = %+v, %v", pid, ps, err)
		}
		out := [][2]int64{}
		for _, g := range ps[0].Gaps {
			out = append(out, [2]int64{g.From, g.To})
		}
		return out
	}
	ids := map[string]int64{
		"a-v2-applied":   park(envelope(event(a, 2, fsm.Paid, 700)), oldRule),
		"a-v1-duplicate": park(envelope(event(a, 1, fsm.Created, 700)), oldRule),
		"b-v2-stale":     park(envelope(event(b, 2, fsm.Created, 100)), oldRule),
		"c-v3-illegal":   park(envelope(event(c, 3, fsm.Shipped, 100)), oldRule),
		// Parked by the bridge while Temporal was down for longer than
		// -undeliverable-after: a valid event, delivered by the replay.
		"d-v1-new-order": park(envelope(numbered),
			"undeliverable: not delivered for 1h0m40s: temporal: gave up after 11 attempts: rpc error: code = Unavailable desc = connection refused"),
		"malformed": park(wire.NewEnvelope("ORDER_EVENTS", "M-bad", a, "PAID", []byte(`{"order_id":`), time.Time{}, false), "malformed_json: unexpected end of JSON input"),
		// A zlib bomb, parked compressed by a bridge of an earlier release (no compression stored).
		"compressed": park(wire.NewEnvelope("ORDER_EVENTS", "M-zip", a, "PAID", compresstest.Zlib(t, make([]byte, 1<<20)), time.Time{}, false),
			message.OversizeCompressed().Reason),
	}
	h, err := p.s.OrderHistory(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	ids["conflict"] = h.DeadLetters[0].ID
	want := map[string][2]string{ // now, action of a replay
		"a-v2-applied":   {"applied", actionDelivered},
		"a-v1-duplicate": {"duplicate", actionDelivered},
		"b-v2-stale":     {"stale", actionDelivered},
		"c-v3-illegal":   {"illegal", actionDelivered},
		"d-v1-new-order": {"applied", actionDelivered},
		"malformed":      {"invalid", actionKept},
		"compressed":     {"invalid", actionKept},
		"conflict":       {"conflict", actionKept},
	}
	byID := func(out replayOutput) map[int64]replayItem {
		m := map[int64]replayItem{}
		for _, it := range out.Items {
			m[it.ID] = it
		}
		return m
	}
	replay := func(extra ...string) (int, replayOutput, string) {
		t.Helper()
		code, out, errOut := runCmd(append(append([]string{"dlq", "replay"}, p.env()...), append(extra, "-json")...)...)
		var r replayOutput
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("dlq replay %v: exit %d, %v\n%s%s", extra, code, err, out, errOut)
		}
		return code, r, out + errOut
	}
	snapshot := func() string {
		var rows []map[string]any
		if err := p.db.Raw(`SELECT 'o' AS t, order_id AS k, version::text || status AS v FROM orders
			UNION ALL SELECT 'e', order_id || '@' || version, outcome || times_seen FROM order_events
			UNION ALL SELECT 'l', order_id || kind, points::text FROM points_ledger
			UNION ALL SELECT 'd', id::text, times_seen || coalesce(replay_outcome, '') FROM dead_letters ORDER BY 1, 2`).
			Scan(&rows).Error; err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(rows)
	}

	// The dry run says what a replay would do, and changes nothing.
	before := snapshot()
	code, dry, out := replay("-dry-run")
	if code != 0 || !dry.Summary.DryRun || len(dry.Items) != len(want) {
		t.Fatalf("dry run: exit %d\n%s", code, out)
	}
	got := byID(dry)
	for name, w := range want {
		action := w[1]
		if action == actionDelivered {
			action = actionWouldDeliver
		}
		if it := got[ids[name]]; it.Now != w[0] || it.Action != action {
			t.Errorf("dry run of %s: now %q, action %q; want %q, %q (%+v)", name, it.Now, it.Action, w[0], action, it)
		}
	}
	if it := got[ids["compressed"]]; !strings.HasPrefix(it.Reason, "oversize:") {
		t.Errorf("a compressed body refused inflation is judged %q, want its oversize reason", it.Reason)
	}
	if after := snapshot(); after != before {
		t.Errorf("the dry run changed the database:\nbefore %s\nafter  %s", before, after)
	}
	if h := holes(); len(h) != 1 || h[0] != [2]int64{2, 2} {
		t.Errorf("after the dry run: holes %v, want [2 2]", h)
	}
	// The table for people.
	if code, out, errOut := runCmd(append(append([]string{"dlq", "replay"}, p.env()...), "-dry-run")...); code != 0 ||
		!strings.Contains(out, "would deliver") || !strings.Contains(out, "dry run: 8 dead letters: 5 would deliver, 3 kept") {
		t.Errorf("dry run table: exit %d\n%s%s", code, out, errOut)
	}

	// Filters select what a replay looks at.
	if _, r, out := replay("-dry-run", "-order", c); len(r.Items) != 1 || r.Items[0].ID != ids["c-v3-illegal"] {
		t.Errorf("dry run -order %s:\n%s", c, out)
	}
	if _, r, out := replay("-dry-run", "-reason", "conflict"); len(r.Items) != 1 || r.Items[0].ID != ids["conflict"] {
		t.Errorf("dry run -reason conflict:\n%s", out)
	}
	if _, r, out := replay("-dry-run", "-reason", wire.KindUndeliverable); len(r.Items) != 1 || r.Items[0].ID != ids["d-v1-new-order"] ||
		r.Items[0].Action != actionWouldDeliver {
		t.Errorf("dry run -reason undeliverable:\n%s", out)
	}

	// The replay.
	code, real, out := replay()
	if code != 0 {
		t.Fatalf("replay: exit %d\n%s", code, out)
	}
	if h := holes(); len(h) != 0 {
		t.Errorf("after the replay delivered number 2: holes %v, want none", h)
	}
	got = byID(real)
	for name, w := range want {
		it := got[ids[name]]
		wantOutcome := ""
		if w[1] == actionDelivered {
			wantOutcome = w[0]
		}
		if it.Action != w[1] || it.Outcome != wantOutcome {
			t.Errorf("replay of %s: action %q outcome %q, want %q %q (%+v)", name, it.Action, it.Outcome, w[1], wantOutcome, it)
		}
		dl, _, err := p.s.DeadLetter(ctx, ids[name])
		if err != nil {
			t.Fatal(err)
		}
		if (dl.ReplayedAt != nil) != (w[1] == actionDelivered) || dl.ReplayOutcome != wantOutcome {
			t.Errorf("dead letter %s after the replay: replayed %v with %q, want %q", name, dl.ReplayedAt, dl.ReplayOutcome, wantOutcome)
		}
		if w[1] == actionKept && dl.TimesSeen != 1 {
			t.Errorf("dead letter %s kept, but seen %d times", name, dl.TimesSeen)
		}
	}
	// The workflow applied what was applicable: a paid (with its points), d
	// created.
	ha, _ := p.s.OrderHistory(ctx, a)
	hd, _ := p.s.OrderHistory(ctx, d)
	if ha.Order.Status != fsm.Paid || ha.Order.Version != 2 || !hd.Found || hd.Order.Status != fsm.Created {
		t.Errorf("after the replay: a %+v, d %+v", ha.Order, hd.Order)
	}
	testenv.WaitFor(t, 30*time.Second, func() error {
		if h, _ := p.s.OrderHistory(ctx, a); len(h.Ledger) != 1 || h.Ledger[0].Points != 7 {
			return fmt.Errorf("ledger of %s: %+v", a, h.Ledger)
		}
		return nil
	})

	// Again: nothing new. The replay changes the database itself before it
	// exits, and through the workflows only by signals, which Temporal has
	// recorded once it exits: neither may have changed.
	before = snapshot()
	sentBefore := signalled(t, p.c, a, b, c, d)
	code, again, out := replay()
	if code != 0 || again.Summary.Actions[actionDelivered] != 0 || again.Summary.Actions[actionAlready] != 5 ||
		again.Summary.Actions[actionKept] != 3 {
		t.Errorf("second replay: exit %d\n%s", code, out)
	}
	if sentAfter := signalled(t, p.c, a, b, c, d); !maps.Equal(sentAfter, sentBefore) {
		t.Errorf("the second replay signalled workflows:\nbefore %v\nafter  %v", sentBefore, sentAfter)
	}
	if after := snapshot(); after != before {
		t.Errorf("the second replay changed the database:\nbefore %s\nafter  %s", before, after)
	}
	if code, out, errOut := runCmd("dlq", "show", "-database-url", p.dsn, fmt.Sprint(ids["a-v2-applied"])); code != 0 ||
		!strings.Contains(out, "replayed:   applied ") {
		t.Errorf("dlq show of a replayed dead letter: exit %d\n%s%s", code, out, errOut)
	}

	// Failure paths: Temporal down (a valid dead letter stays unmarked),
	// the database down, bad usage.
	e := uniq.Name("rp-e")
	pending := park(envelope(event(e, 1, fsm.Created, 100)), oldRule)
	dead, deadAddr := downDatabase(t)
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"dlq", "replay", "-database-url", p.dsn, "-temporal-address", "127.0.0.1:1", "-temporal-timeout", "2s", "-order", e}, 1,
			"the Temporal server at 127.0.0.1:1 (namespace default) is unreachable"},
		{[]string{"dlq", "replay", "-database-url", dead}, 1, "PostgreSQL at postgres://orderflow:xxxxx@" + deadAddr},
		{[]string{"dlq", "replay", "-limit", "0"}, 2, "-limit 0"},
		{[]string{"dlq", "replay", "-since", "last week"}, 2, "last week"},
		{[]string{"dlq", "replay", "17"}, 2, "unexpected arguments"},
		{[]string{"dlq", "replay", "-dry-run=maybe"}, 2, "dry-run"},
	} {
		code, out, errOut := runCmd(c.args...)
		if code != c.code || !strings.Contains(out+errOut, c.says) || strings.Contains(out+errOut, "planted-pw") {
			t.Errorf("orderflow %v: exit %d, want %d saying %q (and no password):\n%s%s", c.args, code, c.code, c.says, out, errOut)
		}
	}
	if dl, _, _ := p.s.DeadLetter(ctx, pending); dl.ReplayedAt != nil {
		t.Errorf("a dead letter was marked replayed although Temporal was down: %+v", dl)
	}
}

// A dead letter whose stored reason holds control characters (its kind
// column shows them) is listed escaped by dlq replay (a dry run here: the
// table is the same); -json keeps it exact.
func TestDLQReplayEscapesControlCharacters(t *testing.T) {
	gdb, dsn := testenv.NewDatabase(t)
	t.Setenv("DATABASE_URL", dsn)
	ctx := context.Background()
	const esc = "\x1b]0;owned\x07\x1b[2J"
	reason := esc + "malformed_json: unexpected end of JSON input"
	if _, err := store.New(gdb).ParkDeadLetter(ctx, wire.DeadLetter{
		Envelope: wire.NewEnvelope("ORDER_EVENTS", "M-esc", "order-esc", "PAID", []byte(`{"order_id":`), time.Time{}, false),
		Reason:   reason}); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run(ctx, []string{"dlq", "replay", "-dry-run"}, &out, &errOut); code != 0 {
		t.Fatalf("dlq replay -dry-run: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	if c := rawControls(out.String()); len(c) > 0 {
		t.Errorf("dlq replay prints the control characters %q raw:\n%q", c, out.String())
	}
	if want := `\x1b]0;owned\x07\x1b[2Jmalformed_json`; !strings.Contains(out.String(), want) {
		t.Errorf("dlq replay lacks %q:\n%s", want, out.String())
	}
	out.Reset()
	var r replayOutput
	if code := run(ctx, []string{"dlq", "replay", "-dry-run", "-json"}, &out, &errOut); code != 0 ||
		json.Unmarshal(out.Bytes(), &r) != nil || len(r.Items) != 1 || r.Items[0].Kind != esc+"malformed_json" {
		t.Errorf("dlq replay -json is not exact: exit %d %+v\n%s", code, r, out.String())
	}
}
