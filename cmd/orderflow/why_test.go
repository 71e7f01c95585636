package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/store"
	"github.com/orderflow/orderflow/wire"
)

// why explains an order delivered through the real workflow: every business
// key with its decision, the conflicting copy's dead letter, the ledger and
// the workflow; a version in a gap, a version not arrived yet, an unknown
// order, bad usage and unreachable services.
func TestWhy(t *testing.T) {
	p := newPipeline(t)
	id := uniq.Name("why")
	v3 := event(id, 3, fsm.Paid, 94321)
	other := v3
	other.OccurredAt = other.OccurredAt.Add(time.Second) // same key, other content
	// v1, v3 over a gap (v2 missing), a conflicting copy of v3, v1 again.
	p.deliver(event(id, 1, fsm.Created, 94321), v3, other, event(id, 1, fsm.Created, 94321))
	p.waitRecorded(id, 2, 1)
	// A completed order whose workflow closes after its grace period.
	done := uniq.Name("why-done")
	p.deliver(event(done, 1, fsm.Created, 500), event(done, 2, fsm.Paid, 500), event(done, 3, fsm.Completed, 500))
	p.waitRecorded(done, 3, 0)

	ui := "https://temporal.example.com:8443/"
	args := func(a ...string) []string {
		return append(append([]string{"why"}, p.env()...), append([]string{"-temporal-ui", ui}, a...)...)
	}
	code, out, errOut := runCmd(args(id)...)
	if code != 0 {
		t.Fatalf("why %s: exit %d\n%s%s", id, code, out, errOut)
	}
	t.Logf("why %s:\n%s", id, out)
	for _, want := range []string{
		"stored:  PAID v3, user 42, 94321 cents",
		"points:  purchase +943 (user 42)",
		"business keys (2):",
		"applied  gap  +943 purchase",
		"dead letters (1):",
		"conflict: " + id + "@3 was recorded with content",
		"points ledger (1):",
		"purchase  42    +943",
		"workflow order:" + id + ":",
		"latest run: running, 1 run(s)",
		"state:   PAID v3, +943 points",
		"details: PAID v3 · +943 points",
		"applied 2 · stale 0 · duplicate 1 · conflict 1 · illegal 0 · 1 gap",
		"UI:      https://temporal.example.com:8443/namespaces/default/workflows/order:" + id,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("why %s lacks %q", id, want)
		}
	}

	// JSON, and one version.
	code, out, errOut = runCmd(args("-json", id, "3")...)
	var r whyReport
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil {
		t.Fatalf("why -json %s 3: exit %d\n%s%s", id, code, out, errOut)
	}
	if !r.Found || len(r.Events) != 2 || r.Version == nil || !r.Version.Seen || r.Version.Event.Outcome != fsm.Applied ||
		len(r.Version.DeadLetters) != 1 || r.Version.DeadLetters[0] != r.DeadLetters[0].ID ||
		r.Workflow == nil || !r.Workflow.Found || r.Workflow.Status != "running" || r.Workflow.State == nil ||
		r.Workflow.State.Order.Version != 3 || r.Workflow.Runs != 1 {
		t.Errorf("why -json %s 3:\n%s", id, out)
	}

	// A version in the gap, one newer than the order: not seen, exit 1.
	for v, says := range map[string]string{
		"2":  "@2 was never seen: it lies in the gap that v3 was applied over",
		"v7": "@7 was never seen: it is newer than the order's version 3",
	} {
		code, out, errOut = runCmd(args(id, v)...)
		if code != 1 || !strings.Contains(out, says) || !strings.Contains(errOut, "not found") {
			t.Errorf("why %s %s: exit %d, want 1 saying %q\n%s%s", id, v, code, says, out, errOut)
		}
	}

	// The completed order's workflow closes; why reads its final state.
	testenv.WaitFor(t, 60*time.Second, func() error {
		code, out, errOut = runCmd(args(done)...)
		if code != 0 || !strings.Contains(out, "latest run: completed (grace-period)") {
			return errorf("why %s: exit %d\n%s%s", done, code, out, errOut)
		}
		return nil
	})
	if !strings.Contains(out, "state:   COMPLETED v3, +5 points") || !strings.Contains(out, "closed ") {
		t.Errorf("why of a closed workflow:\n%s", out)
	}

	// Without Temporal: the database alone.
	if code, out, errOut := runCmd("why", "-no-temporal", "-database-url", p.dsn, id); code != 0 ||
		strings.Contains(out, "workflow order:") || !strings.Contains(out, "business keys (2)") {
		t.Errorf("why -no-temporal: exit %d\n%s%s", code, out, errOut)
	}

	// Failure paths.
	dead, deadAddr := downDatabase(t)
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{args(uniq.Name("nobody")), 1, "is unknown: no row, no business key and no dead letter in PostgreSQL, and no workflow in Temporal"},
		{[]string{"why"}, 2, "why takes an order ID"},
		{[]string{"why", "a", "1", "2"}, 2, "why takes an order ID"},
		{[]string{"why", "bad id!"}, 2, "is not an order ID"},
		{[]string{"why", id, "zero"}, 2, `"zero" is not a version`},
		{[]string{"why", id, "0"}, 2, `"0" is not a version`},
		{[]string{"why", "-frobnicate", id}, 2, "frobnicate"},
		{[]string{"why", "-database-url", dead, id}, 1, "PostgreSQL at postgres://orderflow:xxxxx@" + deadAddr},
		// Temporal down: the database's part is printed, then the failure.
		{[]string{"why", "-database-url", p.dsn, "-temporal-address", "127.0.0.1:1", "-temporal-timeout", "2s", id}, 1,
			"the Temporal server at 127.0.0.1:1 (namespace default) is unreachable"},
	} {
		code, out, errOut := runCmd(c.args...)
		if code != c.code || !strings.Contains(out+errOut, c.says) || strings.Contains(out+errOut, "planted-pw") {
			t.Errorf("orderflow %v: exit %d, want %d saying %q (and no password):\n%s%s", c.args, code, c.code, c.says, out, errOut)
		}
		if c.code == 1 && strings.Contains(c.says, "Temporal server at") && !strings.Contains(out, "business keys (2)") {
			t.Errorf("with Temporal down, why did not print what the database knows:\n%s", out)
		}
	}
}

// An event ID, a message ID and a dead letter's reason carrying escape
// sequences (all valid: only NUL is refused) reach the terminal escaped;
// -json keeps them exact.
func TestWhyEscapesControlCharacters(t *testing.T) {
	gdb, dsn := testenv.NewDatabase(t)
	s := store.New(gdb)
	ctx := context.Background()
	id := uniq.Name("why-esc")
	const (
		eventID = "e\x1b]0;owned\x07"
		msgID   = "M\x1b[2J\u202e"
		reason  = "invalid_field: status: \"\x1b[31mPAID\r\" is not a lifecycle state"
	)
	e := fsm.Event{EventID: eventID, OrderID: id, UserID: 8, Status: fsm.Created, Version: 1, AmountCents: 100,
		OccurredAt: time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)}
	if _, err := s.ApplyEvent(ctx, e, wire.Envelope{MessageID: msgID}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ParkDeadLetter(ctx, wire.DeadLetter{Reason: reason,
		Envelope: wire.NewEnvelope("ORDER_EVENTS", msgID, id, "\x1b[1A", []byte(`{"version":1}`), time.Time{}, false)}); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCmd("why", "-no-temporal", "-database-url", dsn, id, "1")
	if code != 0 {
		t.Fatalf("why: exit %d\n%s%s", code, out, errOut)
	}
	if c := rawControls(out); len(c) > 0 {
		t.Errorf("why prints the control characters %q raw:\n%q", c, out)
	}
	for _, want := range []string{`event ID e\x1b]0;owned\x07,`, `message(s) M\x1b[2J\u202e,`, `"\x1b[31mPAID\r" is not a lifecycle state`} {
		if !strings.Contains(out, want) {
			t.Errorf("why lacks %q:\n%s", want, out)
		}
	}
	var r whyReport
	code, out, errOut = runCmd("why", "-json", "-no-temporal", "-database-url", dsn, id, "1")
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil || r.Version == nil || r.Version.Event == nil ||
		r.Version.Event.EventID != eventID || len(r.Version.Event.MessageIDs) != 1 || r.Version.Event.MessageIDs[0] != msgID ||
		len(r.DeadLetters) != 1 || r.DeadLetters[0].Reason != reason {
		t.Errorf("why -json is not exact: exit %d\n%s%s", code, out, errOut)
	}
}
