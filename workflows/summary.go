package workflows

import (
	"fmt"
	"strings"

	"github.com/orderflow/orderflow/fsm"
)

// The Temporal UI reads as the order's log: each database step carries a
// one-line summary (user metadata on its command, which replay does not
// compare), and the workflow's current details show the order's status,
// version and counts.

// SummaryLoadOrder is the summary of the LoadOrder step.
const SummaryLoadOrder = "load the order from PostgreSQL"

// SummaryResync is the summary of the LoadOrder step of a run that found
// the database behind its memory.
const SummaryResync = "reload the order: the database is behind this run"

// Summaries of the timers with which the workflow ends a workflow task
// (ChangeCarryPendingSignals).
const (
	SummaryYieldTask          = "end the workflow task: more events pending"
	SummaryYieldContinueAsNew = "end the workflow task, then continue as new"
)

// DecisionSummary is the one-line summary of a decision d on event e:
// "v3 PAID → applied, +943 points", "v2 CREATED → conflict, parked",
// "v2 CREATED → stale, order at v4", "v5 SHIPPED → illegal after CANCELLED".
func DecisionSummary(e fsm.Event, d fsm.Decision) string {
	var b strings.Builder
	fmt.Fprintf(&b, "v%d %s → %s", e.Version, e.Status, d.Outcome)
	switch d.Outcome {
	case fsm.Applied:
		if d.Gap {
			b.WriteString(", over a gap")
		}
		if d.Points != fsm.PointsNone {
			fmt.Fprintf(&b, ", %+d points", d.PointsDelta)
		}
	case fsm.Stale:
		fmt.Fprintf(&b, ", order at v%d", d.Next.Version)
	case fsm.Conflict:
		b.WriteString(", parked")
	case fsm.Illegal:
		fmt.Fprintf(&b, " after %s", d.Next.Status)
	}
	return b.String()
}

// FirstStepSummary is the one-line summary of a fresh run's first step,
// which loads the order and then decides on event e: "v3 PAID, on the
// order loaded from PostgreSQL".
func FirstStepSummary(e fsm.Event) string {
	return fmt.Sprintf("v%d %s, on the order loaded from PostgreSQL", e.Version, e.Status)
}

// PointsSummary is the summary of an AwardPoints step: "+943 points
// (purchase) for user 42".
func PointsSummary(kind fsm.PointsKind, points, userID int64) string {
	return fmt.Sprintf("%+d points (%s) for user %d", points, kind, userID)
}

// expect is the workflow's own decision on e, before the database's: the
// decision of fsm.Decide against the workflow's state, except that a
// business key it has recorded with other content is a conflict, as the
// database will say. The workflow serializes the order's events, so the
// database decides the same unless the order's rows were changed outside
// the workflow; the step's result (the authoritative decision) then
// differs, is logged, and is what the current details show.
func (r *run) expect(e fsm.Event) fsm.Decision {
	var cur *fsm.Order
	if r.state.Exists {
		o := r.state.Order
		cur = &o
	}
	d := fsm.Decide(cur, e)
	if h, ok := r.state.Recorded[e.Version]; ok && h != e.ContentHash() {
		d = fsm.Decision{Outcome: fsm.Conflict, Next: d.Next}
		if cur != nil {
			d.Next = *cur
		}
	}
	return d
}

// CurrentDetails is the text the workflow shows as its current details:
// the order's status, version and net points, the signals handled per
// outcome, and the last decision, e.g.
//
//	**PAID** v3 · +943 points
//	applied 3 · stale 1 · duplicate 1 · conflict 1 · illegal 0 · 1 gap
//	last: v3 PAID → applied, +943 points
func CurrentDetails(s State, last string) string {
	var b strings.Builder
	if s.Exists {
		fmt.Fprintf(&b, "**%s** v%d · %+d points", s.Order.Status, s.Order.Version, s.Points)
	} else {
		b.WriteString("**no order row yet**")
	}
	if s.Order.Status.Terminal() && !s.TerminalAt.IsZero() {
		b.WriteString(" · waiting for late events")
	}
	b.WriteString("\n" + Counts(s))
	if last != "" {
		b.WriteString("\nlast: " + last)
	}
	return b.String()
}

// Counts is the line of CurrentDetails that counts the signals handled per
// outcome, the gaps and the failures: "applied 3 · stale 1 · duplicate 1 ·
// conflict 1 · illegal 0 · 1 gap".
func Counts(s State) string {
	var b strings.Builder
	for i, o := range fsm.Outcomes {
		if i > 0 {
			b.WriteString(" · ")
		}
		fmt.Fprintf(&b, "%s %d", o, s.Counts[o])
	}
	if s.Gaps > 0 {
		fmt.Fprintf(&b, " · %d gap%s", s.Gaps, plural(s.Gaps))
	}
	if s.Failed > 0 {
		fmt.Fprintf(&b, " · %d failed", s.Failed)
	}
	return b.String()
}

func plural(n int64) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// firstLine is the first line of s, at most n runes.
func firstLine(s string, n int) string {
	s, _, _ = strings.Cut(s, "\n")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
