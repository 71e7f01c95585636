package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orderflow/orderflow/check"
	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/message"
	"github.com/orderflow/orderflow/scenario"
	"github.com/orderflow/orderflow/store"
	"github.com/orderflow/orderflow/wire"
)

// messageIDs numbers the messages apply writes, as the broker would.
var messageIDs atomic.Int64

// apply writes the scenario's messages to the database as the pipeline
// would: bad ones parked, events applied with their points.
func apply(t *testing.T, s *store.Store, topic string, msgs []scenario.Message) {
	t.Helper()
	ctx := context.Background()
	for _, m := range msgs {
		env := wire.NewEnvelope(topic, fmt.Sprintf("msg-%d", messageIDs.Add(1)), m.Msg.Keys, m.Msg.Tag, m.Msg.Body, time.Time{}, false)
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
		if d := res.Decision; d.Outcome == fsm.Applied && d.Points != fsm.PointsNone {
			if _, err := s.AwardPoints(ctx, store.PointsRow{OrderID: r.Event.OrderID, UserID: d.Next.PointsUser(),
				Kind: d.Points, Points: d.PointsDelta, Version: r.Event.Version}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestCheckCommand(t *testing.T) {
	gdb, dsn := testenv.NewDatabase(t)
	ctx := context.Background()
	sc, err := scenario.Generate(scenario.Options{Orders: 6, Seed: 5, Prefix: uniq.Name("chk"),
		Start: time.Now().UTC().Truncate(time.Second), DupRate: 0.3, Reorder: 0.5, CancelRate: 0.3, Conflicts: 1, Bad: 3,
		UserChangeRate: 1, Illegal: 2, LateConflicts: 1, LateRate: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	sc.Expected.Topic = "ORDER_EVENTS"
	path := filepath.Join(t.TempDir(), "expected.json")
	// As orderflow publish writes it: the first phase published.
	if err := sc.Expected.FirstPhase().WriteFile(path); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DATABASE_URL", dsn)

	// Nothing consumed yet: the run does not settle, exit 1.
	var out, errOut bytes.Buffer
	code := run(ctx, []string{"check", "-expected", path, "-wait", "1s", "-interval", "200ms", "-settle", "0s"}, &out, &errOut)
	if code != 1 || !strings.Contains(out.String(), "not settled") || !strings.Contains(out.String(), "has no order_events row") {
		t.Fatalf("unconsumed run: exit %d\n%s%s", code, out.String(), errOut.String())
	}

	// The first phase consumed: it settles and passes.
	apply(t, store.New(gdb), sc.Expected.Topic, sc.Messages)
	out.Reset()
	code = run(ctx, []string{"check", "-expected", path, "-wait", "30s", "-interval", "200ms", "-settle", "300ms"}, &out, &errOut)
	if code != 0 || !strings.Contains(out.String(), "verdict: PASS") || !strings.Contains(out.String(), "(first phase published)") {
		t.Fatalf("first phase consumed: exit %d\n%s%s", code, out.String(), errOut.String())
	}

	// The late phase published (as orderflow publish -late records it) and
	// consumed: it settles and passes, exit 0, with the JSON report.
	if err := sc.Expected.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	apply(t, store.New(gdb), sc.Expected.Topic, sc.Late)
	out.Reset()
	jsonPath := filepath.Join(t.TempDir(), "report.json")
	code = run(ctx, []string{"check", "-expected", path, "-wait", "30s", "-interval", "200ms", "-settle", "300ms", "-json", jsonPath}, &out, &errOut)
	if code != 0 || !strings.Contains(out.String(), "verdict: PASS") || !strings.Contains(out.String(), "(both phases published)") ||
		!strings.Contains(out.String(), "illegal 2") {
		t.Fatalf("consumed run: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	c := sc.Expected.Conflicts[0]
	if want := fmt.Sprintf("example order: %s (version %d arrived twice", c.OrderID, c.Version); !strings.Contains(out.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, out.String())
	}
	var rep check.Report
	data, err := os.ReadFile(jsonPath)
	if err != nil || json.Unmarshal(data, &rep) != nil || len(rep.Invariants) != 5 {
		t.Errorf("JSON report: %v %s", err, data)
	}

	// Failures: a missing file and bad flags are usage errors (2); an
	// unreachable database is a failure (1) that names it without the password.
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"check", "-expected", filepath.Join(t.TempDir(), "none.json")}, 2, "none.json"},
		{[]string{"check", "-bogus"}, 2, "-bogus"},
		{[]string{"check", "stray"}, 2, "stray"},
		{[]string{"check", "-expected", path, "-database-url", "postgres://nobody:planted-pw@127.0.0.1:1/none?sslmode=disable"}, 1, "127.0.0.1:1"},
		{[]string{"nonesuch"}, 2, "unknown subcommand"},
	} {
		out.Reset()
		errOut.Reset()
		got := run(ctx, c.args, &out, &errOut)
		text := out.String() + errOut.String()
		if got != c.code || !strings.Contains(text, c.says) || strings.Contains(text, "planted-pw") {
			t.Errorf("orderflow %v: exit %d, want %d saying %q (and no password):\n%s", c.args, got, c.code, c.says, text)
		}
	}
}
