package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/scenario"
	"github.com/orderflow/orderflow/store"
)

func TestGapsListsHolesAndSuspectedLosses(t *testing.T) {
	gdb, dsn := testenv.NewDatabase(t)
	t.Setenv("DATABASE_URL", dsn)
	s := store.New(gdb)
	ctx := context.Background()
	for _, r := range []struct {
		p    string
		seqs []int64
	}{{"shop-a", []int64{1, 2, 3, 5, 6, 7, 10}}, {"shop-b", []int64{1, 2, 3}}} {
		for _, n := range r.seqs {
			if err := s.RecordSeq(ctx, r.p, n); err != nil {
				t.Fatal(err)
			}
		}
	}
	gaps := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := run(ctx, append([]string{"gaps"}, args...), &out, &errOut)
		return code, out.String(), errOut.String()
	}

	code, out, errOut := gaps("-gap-window", "0s")
	if code != 1 || !strings.Contains(out, "suspected lost: 3 messages from producer shop-a (seq 4, 8-9)") ||
		!strings.Contains(errOut, "3 suspected lost messages in 2 gaps") {
		t.Fatalf("gaps -gap-window 0s: exit %d\n%s%s", code, out, errOut)
	}
	if strings.Contains(out, "from producer shop-b") {
		t.Fatalf("shop-b has no hole:\n%s", out)
	}

	// Younger than the window: listed as open, no finding.
	code, out, errOut = gaps("-gap-window", "1h")
	if code != 0 || !strings.Contains(out, "8-9") || !strings.Contains(out, "open") || strings.Contains(out, "suspected lost:") {
		t.Fatalf("gaps -gap-window 1h: exit %d\n%s%s", code, out, errOut)
	}

	code, out, errOut = gaps("-producer", "shop-b", "-json")
	var r gapsReport
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil || len(r.Producers) != 1 || r.Producers[0].Highest != 3 ||
		len(r.Producers[0].Gaps) != 0 {
		t.Fatalf("gaps -producer shop-b -json: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut = gaps("-producer", "nobody"); code != 1 || !strings.Contains(errOut, "not found") {
		t.Fatalf("gaps -producer nobody: exit %d\n%s", code, errOut)
	}
	if code, _, _ = gaps("-gap-window", "-1s"); code != 2 {
		t.Fatalf("gaps -gap-window -1s: exit %d, want 2", code)
	}

	// -expected: a run of producer shop-a that lost the events numbered
	// seqs (the file written by hand, as publish would).
	runFile := func(seqs ...int64) string {
		exp := scenario.Expected{Prefix: "shop", Options: scenario.Options{ProducerID: "shop-a"}, Phases: 1,
			Orders: []scenario.ExpectedOrder{{OrderID: "shop-00000"}}}
		for _, n := range seqs {
			exp.Holes = append(exp.Holes, scenario.Hole{ProducerID: "shop-a", Seq: n, OrderID: "shop-00000", Version: n})
			exp.Lost = append(exp.Lost, scenario.PublishedKey{OrderID: "shop-00000", Version: n})
		}
		path := filepath.Join(t.TempDir(), "expected.json")
		if err := exp.WriteFile(path); err != nil {
			t.Fatal(err)
		}
		return path
	}
	code, out, errOut = gaps("-expected", runFile(4, 8, 9), "-gap-window", "0s")
	if code != 0 || !strings.Contains(out, "suspected lost: 3 messages from producer shop-a (seq 4, 8-9)") ||
		!strings.Contains(out, "run shop: the suspected losses are the 3 event(s) it lost") || strings.Contains(out, "shop-b") {
		t.Fatalf("gaps -expected (matching): exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = gaps("-expected", runFile(4, 8), "-gap-window", "0s", "-wait", "1s")
	if code != 1 || !strings.Contains(errOut, "3 suspected lost messages from producer shop-a, the run lost 2 (seq 4, 8)") {
		t.Fatalf("gaps -expected (one number more suspected): exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = gaps("-expected", runFile(4, 8, 11), "-gap-window", "0s")
	if code != 1 || !strings.Contains(errOut, "seq 9 suspected lost, but the run lost seq 4, 8, 11") {
		t.Fatalf("gaps -expected (another number): exit %d\n%s%s", code, out, errOut)
	}
	for _, args := range [][]string{
		{"-wait", "5s"},
		{"-expected", filepath.Join(t.TempDir(), "missing.json")},
		{"-expected", runFile(4), "-producer", "shop-b"},
	} {
		if code, _, errOut = gaps(args...); code != 2 {
			t.Errorf("gaps %v: exit %d, want 2\n%s", args, code, errOut)
		}
	}
}

// A producer ID recorded before producer IDs had a rule may hold control
// characters: the tables and the summary line show it escaped; -json keeps
// it exact.
func TestGapsEscapesControlCharacters(t *testing.T) {
	gdb, dsn := testenv.NewDatabase(t)
	t.Setenv("DATABASE_URL", dsn)
	ctx := context.Background()
	const pid = "shop\x1b]0;owned\x07\x1b[2J"
	for _, q := range []string{
		`INSERT INTO received_seq_producers (producer_id, received) VALUES (?, 2)`,
		`INSERT INTO received_seq_ranges (producer_id, lo, hi) VALUES (?, 1, 1), (?, 3, 3)`,
	} {
		args := []any{pid}
		if strings.Count(q, "?") == 2 {
			args = append(args, pid)
		}
		if err := gdb.Exec(q, args...).Error; err != nil {
			t.Fatal(err)
		}
	}
	var out, errOut bytes.Buffer
	if code := run(ctx, []string{"gaps", "-gap-window", "0s"}, &out, &errOut); code != 1 {
		t.Fatalf("gaps: exit %d, want 1\n%s%s", code, out.String(), errOut.String())
	}
	if c := rawControls(out.String()); len(c) > 0 {
		t.Errorf("gaps prints the control characters %q raw:\n%q", c, out.String())
	}
	if want := `suspected lost: 1 messages from producer shop\x1b]0;owned\x07\x1b[2J (seq 2)`; !strings.Contains(out.String(), want) {
		t.Errorf("gaps lacks %q:\n%s", want, out.String())
	}
	if n := strings.Count(out.String(), `shop\x1b]0;owned\x07\x1b[2J`); n != 3 {
		t.Errorf("the producer ID shows escaped %d times, want 3 (two tables, one summary):\n%s", n, out.String())
	}
	out.Reset()
	var r gapsReport
	if code := run(ctx, []string{"gaps", "-gap-window", "0s", "-json"}, &out, &errOut); code != 1 ||
		json.Unmarshal(out.Bytes(), &r) != nil || len(r.Producers) != 1 || r.Producers[0].ProducerID != pid || r.Suspected[pid] != 1 {
		t.Errorf("gaps -json is not exact: exit %d %+v\n%s", code, r, out.String())
	}
}
