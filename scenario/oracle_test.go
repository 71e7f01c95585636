package scenario_test

// These tests cross-check two independent derivations of a scenario's
// outcome: the generator's expectations (from the paths it wrote) with the
// checker's points rule, against a simulation of the consumer that decides
// every event with fsm, the pipeline's own lifecycle code. Neither side
// shares code with the other; they must agree for every seed and delivery
// order.

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/orderflow/orderflow/check"
	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/message"
	"github.com/orderflow/orderflow/scenario"
)

func oracleOptions(seed int64) scenario.Options {
	return scenario.Options{
		Orders: 150, Seed: seed, Prefix: "t-orc",
		Start:   time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC),
		DupRate: 0.15, Reorder: 0.5, CancelRate: 0.35, OpenRate: 0.15,
		UpdateRate: 0.3, GapRate: 0.15, UserChangeRate: 0.5, Conflicts: 8, Bad: 6,
		Illegal: 12, LateConflicts: 8, LateRate: 0.25,
	}
}

// ledgerRow is a points row the simulation wrote.
type ledgerRow struct {
	user   int64
	points int64
}

// model is the consumer as docs/design.md describes it, deciding with fsm: per
// order a serializer that knows every recorded business key.
type model struct {
	cur      map[string]*fsm.Order
	recorded map[fsm.Key]fsm.Event
	outcome  map[fsm.Key]fsm.Outcome
	ledger   map[string]map[fsm.PointsKind]ledgerRow
	parked   map[fsm.Key][]fsm.Event
	rejected int
}

func newModel() *model {
	return &model{cur: map[string]*fsm.Order{}, recorded: map[fsm.Key]fsm.Event{}, outcome: map[fsm.Key]fsm.Outcome{},
		ledger: map[string]map[fsm.PointsKind]ledgerRow{}, parked: map[fsm.Key][]fsm.Event{}}
}

func (m *model) consume(t *testing.T, msgs []scenario.Message) {
	t.Helper()
	for _, msg := range msgs {
		e, err := message.Decode(msg.Msg.Body)
		if err != nil {
			var rej *message.Rejection
			if !errors.As(err, &rej) || msg.Kind != scenario.KindBad {
				t.Fatalf("%s message rejected: %v", msg.Kind, err)
			}
			m.rejected++
			continue
		}
		if msg.Kind == scenario.KindBad {
			t.Fatalf("bad message accepted: %.200s", msg.Msg.Body)
		}
		if prev, ok := m.recorded[e.Key()]; ok {
			if prev.ContentHash() != e.ContentHash() && !parkedAlready(m.parked[e.Key()], e) {
				// A dead letter is stored once, whatever the repeats.
				m.parked[e.Key()] = append(m.parked[e.Key()], e)
			}
			continue
		}
		m.recorded[e.Key()] = e
		d := fsm.Decide(m.cur[e.OrderID], e)
		m.outcome[e.Key()] = d.Outcome
		if d.Outcome != fsm.Applied {
			continue
		}
		next := d.Next
		m.cur[e.OrderID] = &next
		if d.Points != fsm.PointsNone {
			if m.ledger[e.OrderID] == nil {
				m.ledger[e.OrderID] = map[fsm.PointsKind]ledgerRow{}
			}
			if _, dup := m.ledger[e.OrderID][d.Points]; dup {
				t.Fatalf("order %s earned %s twice", e.OrderID, d.Points)
			}
			m.ledger[e.OrderID][d.Points] = ledgerRow{user: next.PointsUser(), points: d.PointsDelta}
		}
	}
}

func parkedAlready(parked []fsm.Event, e fsm.Event) bool {
	for _, p := range parked {
		if p.ContentHash() == e.ContentHash() {
			return true
		}
	}
	return false
}

func shuffled(msgs []scenario.Message, rng *rand.Rand) []scenario.Message {
	out := append([]scenario.Message(nil), msgs...)
	rng.Shuffle(len(out), func(a, b int) { out[a], out[b] = out[b], out[a] })
	return out
}

func fsmKey(k scenario.Key) fsm.Key { return fsm.Key{OrderID: k.OrderID, Version: k.Version} }

func sameContent(e fsm.Event, c scenario.Content) bool {
	return e.UserID == c.UserID && string(e.Status) == string(c.Status) && e.AmountCents == c.AmountCents && e.OccurredAt.Equal(c.OccurredAt)
}

// compare checks the simulation after the phases exp says were published
// against the generator's expectations and the checker's points rule.
func compare(t *testing.T, label string, exp *scenario.Expected, m *model) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf(label+": "+format, args...)
	}
	due := check.PointsDue(exp)
	balances := map[int64]int64{}
	for _, o := range exp.Orders {
		got := m.cur[o.OrderID]
		if got == nil {
			t.Fatalf("%s: order %s never applied", label, o.OrderID)
		}
		if string(got.Status) != string(o.Status) || got.Version != o.Version || got.AmountCents != o.AmountCents || got.UserID != o.UserID {
			fail("order %s ended %s v%d %d¢ user %d, expected %s v%d %d¢ user %d", o.OrderID,
				got.Status, got.Version, got.AmountCents, got.UserID, o.Status, o.Version, o.AmountCents, o.UserID)
		}
		d := due[o.OrderID]
		if d.Problem != "" {
			fail("order %s: %s", o.OrderID, d.Problem)
		}
		rows := m.ledger[o.OrderID]
		if len(rows) == 0 && (d.Optional || len(d.Rows) == 0) {
			continue
		}
		if len(rows) != len(d.Rows) {
			fail("order %s has ledger %v, the rule gives %+v", o.OrderID, rows, d)
		}
		for _, want := range d.Rows {
			r, ok := rows[fsm.PointsKind(want.Kind)]
			if !ok || r.user != want.UserID || r.points != want.Points {
				fail("order %s %s row %+v (present %v), the rule gives %+v", o.OrderID, want.Kind, r, ok, want)
			}
			balances[r.user] += r.points
		}
	}
	for u, want := range check.Balances(due) {
		if balances[u] != want {
			fail("user %d holds %d points, the rule gives %d", u, balances[u], want)
		}
	}

	keys := 0
	original := map[scenario.Key]scenario.Content{}
	for _, k := range exp.Keys {
		original[k.Key()] = k.Content
		if !exp.Published(k.Phase) {
			if _, ok := m.recorded[fsmKey(k.Key())]; ok {
				fail("key %s of phase %d recorded before it was published", k.Key(), k.Phase)
			}
			continue
		}
		keys++
		out, ok := m.outcome[fsmKey(k.Key())]
		switch {
		case !ok:
			fail("key %s never recorded", k.Key())
		case k.Outcome != "" && string(out) != k.Outcome:
			fail("key %s (%s) decided %s, expected %s", k.Key(), k.Status, out, k.Outcome)
		case k.Outcome == "" && out != fsm.Applied && out != fsm.Stale:
			fail("key %s (%s) decided %s, expected applied or stale", k.Key(), k.Status, out)
		}
	}
	if len(m.recorded) != keys {
		fail("%d business keys recorded, expected %d", len(m.recorded), keys)
	}
	conflicts := 0
	for _, c := range exp.Conflicts {
		if !exp.Published(c.Phase) {
			continue
		}
		conflicts++
		k := fsmKey(c.Key())
		rec, parked := m.recorded[k], m.parked[k]
		if len(parked) != 1 {
			fail("conflict %s parked %d times", c.Key(), len(parked))
		}
		orig := original[c.Key()]
		switch {
		case sameContent(rec, orig) && sameContent(parked[0], c.Copy):
		case c.Phase == 1 && sameContent(rec, c.Copy) && sameContent(parked[0], orig):
		default:
			fail("conflict %s (phase %d): recorded %+v, parked %+v; original %+v, copy %+v", c.Key(), c.Phase, rec, parked[0], orig, c.Copy)
		}
	}
	if len(m.parked) != conflicts {
		fail("%d keys parked as conflicts, expected %d", len(m.parked), conflicts)
	}
	if m.rejected != len(exp.Bad) {
		fail("%d messages rejected, expected %d bad", m.rejected, len(exp.Bad))
	}
}

// TestExpectationsAgreeWithFSMSimulation generates scenarios for many
// seeds, consumes each in many delivery orders with the fsm-driven model
// (the first phase, then, once it has settled, the late phase), and
// compares the result after each phase with the generator's expectations
// and the checker's points rule.
func TestExpectationsAgreeWithFSMSimulation(t *testing.T) {
	seeds, rounds := 25, 8
	if testing.Short() {
		seeds, rounds = 6, 4
	}
	var illegal, lateStale, lateConflicts, userChanges, refunds int
	for seed := int64(1); seed <= int64(seeds); seed++ {
		s, err := scenario.Generate(oracleOptions(seed))
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Late) == 0 {
			t.Fatalf("seed %d: no late phase", seed)
		}
		rng := rand.New(rand.NewPCG(uint64(seed), 5))
		for round := 0; round < rounds; round++ {
			first := s.Messages
			if round > 0 {
				first = shuffled(first, rng)
			}
			m := newModel()
			m.consume(t, first)
			compare(t, "after the first phase", s.Expected.FirstPhase(), m)
			m.consume(t, shuffled(s.Late, rng))
			compare(t, "after the late phase", &s.Expected, m)
			for _, rows := range m.ledger {
				if _, ok := rows[fsm.Refund]; ok {
					refunds++
				}
			}
		}
		c := s.Expected.Counts
		illegal += c.Illegal
		userChanges += c.UserChanges
		for _, k := range s.Expected.Keys {
			if k.Outcome == scenario.OutcomeStale {
				lateStale++
			}
		}
		for _, cf := range s.Expected.Conflicts {
			if cf.Phase == 2 {
				lateConflicts++
			}
		}
	}
	t.Logf("%d seeds x %d delivery orders agree: %d illegal events, %d late stale events, %d late conflicts, %d user changes, %d refunds",
		seeds, rounds, illegal, lateStale, lateConflicts, userChanges, refunds)
	if illegal == 0 || lateStale == 0 || lateConflicts == 0 || userChanges == 0 || refunds == 0 {
		t.Fatal("a case was never exercised")
	}
}

// TestLifecycleAgreesWithFSM compares the generator's lifecycle table and
// the checker's purchase rule with fsm's, pair by pair.
func TestLifecycleAgreesWithFSM(t *testing.T) {
	for _, from := range scenario.Statuses {
		for _, to := range scenario.Statuses {
			if got, want := scenario.Reachable(from, to), fsm.CanReach(fsm.Status(from), fsm.Status(to)); got != want {
				t.Errorf("%s -> %s: the generator says reachable %v, fsm %v", from, to, got, want)
			}
		}
	}
	if len(scenario.Statuses) != len(fsm.Statuses) {
		t.Errorf("statuses: %v vs %v", scenario.Statuses, fsm.Statuses)
	}
	for _, a := range []int64{0, 1, 99, 100, 101, 199, 200, 12345, 1 << 40} {
		if check.PurchasePoints(a) != fsm.PurchasePointsFor(a) {
			t.Errorf("%d cents: checker %d points, fsm %d", a, check.PurchasePoints(a), fsm.PurchasePointsFor(a))
		}
	}
}
