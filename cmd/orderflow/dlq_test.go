package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/store"
	"github.com/orderflow/orderflow/wire"
)

func TestDLQCommands(t *testing.T) {
	gdb, dsn := testenv.NewDatabase(t)
	t.Setenv("DATABASE_URL", dsn)
	s := store.New(gdb)
	ctx := context.Background()
	park := func(id, keys, tag string, body []byte, reason string) int64 {
		t.Helper()
		p, err := s.ParkDeadLetter(ctx, wire.DeadLetter{
			Envelope: wire.NewEnvelope("ORDER_EVENTS", id, keys, tag, body, time.Time{}, false), Reason: reason})
		if err != nil {
			t.Fatal(err)
		}
		return p.ID
	}
	binary := []byte{0x78, 0xda, 0x00, 0xff, 0xfe}
	c1 := park("M1", "order-a", "PAID", []byte(`{"order_id":"order-a","version":2}`), "conflict: order-a@2 was recorded with content aaa")
	park("M1b", "order-a", "PAID", []byte(`{"order_id":"order-a","version":2}`), "conflict: order-a@2 again") // the same message: times seen 2
	c2 := park("M2", "order-a", "SHIPPED", []byte(`{"order_id":"order-a","version":3}`), "conflict: order-a@3 was recorded with content bbb")
	ov := park("M3", "order-b", "CREATED", binary, "oversize: compressed body inflates past 65536 bytes")
	mj := park("M4", "bad-1", "", []byte(`{"order_id":`), "malformed_json: unexpected end of JSON input")

	run := func(args ...string) (int, string) {
		var out, errOut bytes.Buffer
		code := run(ctx, args, &out, &errOut)
		return code, out.String() + errOut.String()
	}
	// The table lists every dead letter, oldest first.
	code, out := run("dlq", "list")
	if code != 0 {
		t.Fatalf("dlq list: exit %d\n%s", code, out)
	}
	for _, id := range []int64{c1, c2, ov, mj} {
		if !strings.Contains(out, fmt.Sprintf("\n%d ", id)) {
			t.Errorf("dlq list lacks dead letter %d:\n%s", id, out)
		}
	}
	// Filters.
	var rows []store.DeadLetterRow
	for _, c := range []struct {
		args []string
		want []int64
	}{
		{[]string{"-reason", "conflict"}, []int64{c1, c2}},
		{[]string{"-order", "order-a"}, []int64{c1, c2}},
		{[]string{"-order", "order-b"}, []int64{ov}},
		{[]string{"-reason", "malformed_json"}, []int64{mj}},
		{[]string{"-since", "1h"}, []int64{c1, c2, ov, mj}},
		{[]string{"-since", "2999-01-01T00:00:00Z"}, nil},
		{[]string{"-limit", "2"}, []int64{c1, c2}},
	} {
		code, out := run(append([]string{"dlq", "list", "-json"}, c.args...)...)
		rows = nil
		if code != 0 || json.Unmarshal([]byte(out), &rows) != nil {
			t.Fatalf("dlq list -json %v: exit %d\n%s", c.args, code, out)
		}
		var got []int64
		for _, r := range rows {
			got = append(got, r.ID)
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) && !(len(got) == 0 && len(c.want) == 0) {
			t.Errorf("dlq list %v = %v, want %v", c.args, got, c.want)
		}
	}
	// The summary counts what was parked: 2 conflicts (3 deliveries), 1 oversize, 1 malformed.
	code, out = run("dlq", "list", "-summary", "-json")
	var counts []store.KindCount
	if code != 0 || json.Unmarshal([]byte(out), &counts) != nil {
		t.Fatalf("dlq list -summary -json: exit %d\n%s", code, out)
	}
	got := map[string][2]int64{}
	for _, c := range counts {
		got[c.Kind] = [2]int64{c.Count, c.TimesSeen}
	}
	if got["conflict"] != [2]int64{2, 3} || got["oversize"] != [2]int64{1, 1} || got["malformed_json"] != [2]int64{1, 1} || len(got) != 3 {
		t.Errorf("summary %v, want conflict 2 (3 deliveries), oversize 1, malformed_json 1", got)
	}
	if code, out := run("dlq", "list", "-summary"); code != 0 || !strings.Contains(out, "total") || !strings.Contains(out, "conflict") {
		t.Errorf("dlq list -summary: exit %d\n%s", code, out)
	}
	// show: the raw message; a binary body in base64.
	code, out = run("dlq", "show", fmt.Sprint(c1))
	if code != 0 || !strings.Contains(out, "message ID: M1") || !strings.Contains(out, `{"order_id":"order-a","version":2}`) ||
		!strings.Contains(out, "times seen: 2") {
		t.Errorf("dlq show %d: exit %d\n%s", c1, code, out)
	}
	code, out = run("dlq", "show", fmt.Sprint(ov))
	if code != 0 || !strings.Contains(out, base64.StdEncoding.EncodeToString(binary)) || !strings.Contains(out, "binary") {
		t.Errorf("dlq show %d: exit %d\n%s", ov, code, out)
	}
	var one store.DeadLetterRow
	if code, out := run("dlq", "show", "-json", fmt.Sprint(mj)); code != 0 || json.Unmarshal([]byte(out), &one) != nil ||
		one.Kind() != "malformed_json" || string(one.Body) != `{"order_id":` {
		t.Errorf("dlq show -json %d: exit %d %+v\n%s", mj, code, one, out)
	}
	// Failure paths: not found 1, bad usage 2, an unreachable database 1,
	// named without its password.
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"dlq", "show", "99999999"}, 1, "not found"},
		{[]string{"dlq", "show", "abc"}, 2, "not a dead letter ID"},
		{[]string{"dlq", "show"}, 2, "one dead letter ID"},
		{[]string{"dlq"}, 2, "list, show or replay"},
		{[]string{"dlq", "purge"}, 2, "purge"},
		{[]string{"dlq", "list", "-since", "yesterday"}, 2, "yesterday"},
		{[]string{"dlq", "list", "-database-url", "postgres://nobody:planted-pw@127.0.0.1:1/none?sslmode=disable&connect_timeout=2"}, 1, "127.0.0.1:1"},
	} {
		code, out := run(c.args...)
		if code != c.code || !strings.Contains(out, c.says) || strings.Contains(out, "planted-pw") {
			t.Errorf("orderflow %v: exit %d, want %d saying %q (and no password):\n%s", c.args, code, c.code, c.says, out)
		}
	}
}

// rawControls lists the characters of a human-readable output that a
// terminal would act on or hide: C0 controls other than the newline, DEL,
// C1 controls, and the bidirectional overrides and isolates.
func rawControls(out string) []rune {
	var found []rune
	for _, r := range out {
		switch {
		case r == '\n':
		case r < 0x20, r >= 0x7f && r <= 0x9f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
			found = append(found, r)
		}
	}
	return found
}

// The text a producer controls (keys, tag, message ID, body, the reason
// quoting them) reaches the terminal escaped in every table; -json keeps
// it exact.
func TestDLQEscapesControlCharacters(t *testing.T) {
	gdb, dsn := testenv.NewDatabase(t)
	t.Setenv("DATABASE_URL", dsn)
	s := store.New(gdb)
	ctx := context.Background()
	const (
		esc   = "\x1b]0;owned\x07\x1b[2J"
		keys  = "order-e" + esc
		tag   = "PAID\r\x1b[1A"
		msgID = "M\u202eevil"
	)
	body := []byte("{\"order_id\":\"order-e\",\"note\":\"" + esc + "\"}\r\n\u0085")
	reason := "\x1b[31minvalid_field: status: \"" + esc + "\" is not a lifecycle state"
	p, err := s.ParkDeadLetter(ctx, wire.DeadLetter{
		Envelope: wire.NewEnvelope("ORDER_EVENTS", msgID, keys, tag, body, time.Time{}, false), Reason: reason})
	if err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (int, string) {
		var out, errOut bytes.Buffer
		code := run(ctx, args, &out, &errOut)
		return code, out.String() + errOut.String()
	}
	for _, args := range [][]string{
		{"dlq", "list"},
		{"dlq", "list", "-summary"},
		{"dlq", "show", fmt.Sprint(p.ID)},
	} {
		code, out := run(args...)
		if code != 0 {
			t.Fatalf("orderflow %v: exit %d\n%s", args, code, out)
		}
		if c := rawControls(out); len(c) > 0 {
			t.Errorf("orderflow %v prints the control characters %q raw:\n%q", args, c, out)
		}
		if !strings.Contains(out, `\x1b`) {
			t.Errorf("orderflow %v does not show the escape as \\x1b:\n%s", args, out)
		}
	}
	code, out := run("dlq", "show", fmt.Sprint(p.ID))
	if code != 0 {
		t.Fatalf("orderflow dlq show: exit %d\n%s", code, out)
	}
	for _, want := range []string{`keys:       order-e\x1b]0;owned\x07\x1b[2J`, `tag:        PAID\r\x1b[1A`, `message ID: M\u202eevil`,
		`reason:     \x1b[31minvalid_field`, `"note":"\x1b]0;owned\x07\x1b[2J"}\r` + "\n" + `\u0085`} {
		if !strings.Contains(out, want) {
			t.Errorf("dlq show lacks %q:\n%s", want, out)
		}
	}
	var one store.DeadLetterRow
	if code, out = run("dlq", "show", "-json", fmt.Sprint(p.ID)); code != 0 || json.Unmarshal([]byte(out), &one) != nil ||
		one.Keys != keys || one.Tags != tag || one.MessageID != msgID || string(one.Body) != string(body) || one.Reason != reason {
		t.Errorf("dlq show -json is not exact: exit %d %+v\n%s", code, one, out)
	}
	var rows []store.DeadLetterRow
	if code, out = run("dlq", "list", "-json"); code != 0 || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 1 ||
		rows[0].Keys != keys || rows[0].Tags != tag || rows[0].MessageID != msgID || rows[0].Reason != reason {
		t.Errorf("dlq list -json is not exact: exit %d %+v\n%s", code, rows, out)
	}
}

// -limit must be positive: 0 or less is a usage error, not an empty page.
func TestDLQListRefusesANonPositiveLimit(t *testing.T) {
	for _, limit := range []string{"0", "-1"} {
		code, out, errOut := runCmd("dlq", "list", "-limit", limit,
			"-database-url", "postgres://nobody:planted-pw@127.0.0.1:1/none?sslmode=disable&connect_timeout=2")
		if code != 2 || !strings.Contains(errOut, "-limit "+limit+" must be at least 1") {
			t.Errorf("dlq list -limit %s: exit %d, want 2 naming -limit\n%s%s", limit, code, out, errOut)
		}
	}
}
