package check

import (
	"fmt"
	"sort"

	"github.com/orderflow/orderflow/scenario"
)

// judgement is what the five invariants read: the expected state, the
// database's snapshot, and the facts derived once from both.
type judgement struct {
	exp *scenario.Expected
	s   *snapshot
	// orders is the expected orders by order ID; due the points rule per
	// order.
	orders map[string]scenario.ExpectedOrder
	due    map[string]Due
	// published and conflicts are the business keys and the conflicting
	// copies of the phases the run published.
	published map[scenario.Key]scenario.PublishedKey
	conflicts map[scenario.Key]scenario.ExpectedConflict
	// parked is which dead letter holds what the run meant to park.
	parked parking
}

// parking matches the run's dead letters to the messages meant to be parked.
type parking struct {
	// bad holds, per exp.Bad, the index of its dead letter, or -1.
	bad []int
	// copies holds the conflicting copies expected in dead_letters.
	copies []parkedCopy
	// matched marks the dead letters that hold a bad message or a
	// conflicting copy.
	matched []bool
}

// parkedCopy is the copy of a conflicting business key that was not
// recorded, and the dead letters that hold it.
type parkedCopy struct {
	key   scenario.Key
	other scenario.Content
	at    []int
}

// judge gives the verdict on the five invariants for snapshot s of the run
// exp describes.
func judge(exp *scenario.Expected, s *snapshot) *Report {
	j := newJudgement(exp, s)
	r := summarize(exp, s)
	for _, d := range j.due {
		r.ExpectedPoints += d.Net()
	}
	first := []*Invariant{j.exactlyOnce(), j.monotonic(), j.nothingLost(), j.parkedNotFatal()}
	r.Invariants = append(first, crashSafety(first))
	return r
}

func newJudgement(exp *scenario.Expected, s *snapshot) *judgement {
	j := &judgement{
		exp:       exp,
		s:         s,
		orders:    make(map[string]scenario.ExpectedOrder, len(exp.Orders)),
		due:       PointsDue(exp),
		published: map[scenario.Key]scenario.PublishedKey{},
		conflicts: map[scenario.Key]scenario.ExpectedConflict{},
	}
	for _, o := range exp.Orders {
		j.orders[o.OrderID] = o
	}
	for _, k := range exp.Keys {
		if exp.Published(k.Phase) {
			j.published[k.Key()] = k
		}
	}
	for _, c := range exp.Conflicts {
		if exp.Published(c.Phase) {
			j.conflicts[c.Key()] = c
		}
	}
	j.parked = j.matchParked()
	return j
}

// summarize counts what the database holds for the run.
func summarize(exp *scenario.Expected, s *snapshot) *Report {
	r := &Report{
		Prefix:              exp.Prefix,
		ExpectedOrders:      len(exp.Orders),
		OrdersByStatus:      map[string]int{},
		EventsByOutcome:     map[string]int{},
		DeadLettersByReason: map[string]int{},
	}
	for _, o := range s.orders {
		r.OrdersByStatus[o.status]++
	}
	for _, e := range s.eventList {
		r.EventsByOutcome[e.outcome]++
		r.Messages += e.timesSeen
		if e.gap {
			r.Gaps++
		}
	}
	for _, rows := range s.ledger {
		for _, l := range rows {
			r.Points += l.points
			r.LedgerRows++
		}
	}
	for _, d := range s.deadLetters {
		r.DeadLettersByReason[reasonKind(d.reason)]++
	}
	return r
}

// exactlyOnce is invariant 1: one order_events row per business key, at most
// one points_ledger row per (order, kind), the points the rule gives, no
// effect for an order never published.
func (j *judgement) exactlyOnce() *Invariant {
	inv := &Invariant{Number: 1, Name: "exactly-once effects"}
	s := j.s
	for _, k := range sortedEventKeys(s.events) {
		if rows := s.events[k]; len(rows) > 1 {
			inv.fail("business key %s has %d order_events rows", k, len(rows))
		}
	}
	for _, id := range sortedKeys(s.ledger) {
		byKind := map[string][]ledgerRow{}
		for _, l := range s.ledger[id] {
			byKind[l.kind] = append(byKind[l.kind], l)
		}
		for _, kind := range sortedKeys(byKind) {
			if ls := byKind[kind]; len(ls) > 1 {
				inv.fail("order %s has %d %s rows in points_ledger", id, len(ls), kind)
			}
		}
		if _, ok := j.orders[id]; !ok {
			inv.fail("order %s has points_ledger rows but was never published", id)
		}
	}
	for _, o := range j.exp.Orders {
		checkPoints(inv, o, j.due[o.OrderID], s.ledger[o.OrderID])
	}
	checkBalances(inv, Balances(j.due), s.ledger)
	for _, id := range sortedKeys(s.orders) {
		if _, ok := j.orders[id]; !ok {
			inv.fail("order %s has an orders row but was never published", id)
		}
	}
	return inv
}

// monotonic is invariant 2: each order is its highest published event's
// snapshot, reached by increasing versions; every event recorded with the
// outcome the lifecycle gives it.
func (j *judgement) monotonic() *Invariant {
	inv := &Invariant{Number: 2, Name: "monotonic state"}
	applied := map[string][]eventRow{}
	for _, e := range j.s.eventList {
		if e.outcome == outcomeApplied {
			applied[e.orderID] = append(applied[e.orderID], e)
		}
	}
	for _, o := range j.exp.Orders {
		checkFinalState(inv, o, j.s.orders, applied[o.OrderID])
	}
	for _, k := range j.exp.Keys {
		rows := j.s.events[k.Key()]
		if !j.exp.Published(k.Phase) || len(rows) == 0 {
			continue
		}
		switch got := rows[0].outcome; {
		case k.Outcome != "" && got != k.Outcome:
			inv.fail("event %s (%s) is recorded as %s, expected %s", k.Key(), k.Status, got, k.Outcome)
		case k.Outcome == "" && got != outcomeApplied && got != outcomeStale:
			inv.fail("event %s (%s) is recorded as %s; in any delivery order it is applied or stale", k.Key(), k.Status, got)
		}
	}
	return inv
}

// checkFinalState compares one order's row with its highest published event
// and checks that its applied events (evs) only increased its version.
func checkFinalState(inv *Invariant, o scenario.ExpectedOrder, orders map[string]orderRow, evs []eventRow) {
	got, ok := orders[o.OrderID]
	if !ok {
		inv.fail("order %s has no orders row (expected %s v%d)", o.OrderID, o.Status, o.Version)
		return
	}
	if got.status != string(o.Status) || got.version != o.Version || got.amount != o.AmountCents || got.user != o.UserID {
		inv.fail("order %s is %s v%d %d¢ user %d, expected %s v%d %d¢ user %d",
			o.OrderID, got.status, got.version, got.amount, got.user, o.Status, o.Version, o.AmountCents, o.UserID)
	}
	sort.SliceStable(evs, func(a, b int) bool {
		if !evs[a].firstSeen.Equal(evs[b].firstSeen) {
			return evs[a].firstSeen.Before(evs[b].firstSeen)
		}
		return evs[a].version < evs[b].version
	})
	for i := 1; i < len(evs); i++ {
		if evs[i].version <= evs[i-1].version {
			inv.fail("order %s applied v%d after v%d: its version decreased", o.OrderID, evs[i].version, evs[i-1].version)
		}
	}
	if n := len(evs); n > 0 && evs[n-1].version != got.version {
		inv.fail("order %s is at v%d but its last applied event is v%d", o.OrderID, got.version, evs[n-1].version)
	}
}

// nothingLost is invariant 3: every published business key is recorded with
// the published content; every bad message and conflicting copy is parked.
func (j *judgement) nothingLost() *Invariant {
	inv := &Invariant{Number: 3, Name: "nothing lost"}
	for _, k := range j.exp.Keys {
		if j.exp.Published(k.Phase) {
			j.checkRecorded(inv, k)
		}
	}
	for _, k := range sortedEventKeys(j.s.events) {
		if _, ok := j.published[k]; !ok {
			inv.fail("order_events has %s, which was never published", k)
		}
	}
	for i, b := range j.exp.Bad {
		if j.parked.bad[i] < 0 {
			inv.fail("bad message %s (%s) is not in dead_letters", b.Token, describeBad(b))
		}
	}
	for _, c := range j.parked.copies {
		if len(c.at) == 0 {
			inv.fail("conflicting copy of %s (%s) is not in dead_letters", c.key, describe(c.other))
		}
	}
	return inv
}

// checkRecorded checks that published key k has its order_events row, with
// its content or, for a first-phase conflict, its copy's.
func (j *judgement) checkRecorded(inv *Invariant, k scenario.PublishedKey) {
	key := k.Key()
	rows := j.s.events[key]
	if len(rows) == 0 {
		inv.fail("event %s was published but has no order_events row", key)
		return
	}
	got := rows[0].content
	c, conflict := j.conflicts[key]
	switch {
	case sameContent(got, k.Content):
	case conflict && max(c.Phase, 1) == 1 && sameContent(got, c.Copy):
	case conflict && max(c.Phase, 1) > 1 && sameContent(got, c.Copy):
		inv.fail("event %s is recorded with the content of its late conflicting copy (%s), not the original (%s)",
			key, describe(got), describe(k.Content))
	case conflict:
		inv.fail("event %s is recorded with content %s, which neither conflicting copy has", key, describe(got))
	default:
		inv.fail("event %s is recorded with content %s, published with %s", key, describe(got), describe(k.Content))
	}
}

// matchParked finds the dead letter of each bad message and of each
// conflicting copy that was not recorded.
func (j *judgement) matchParked() parking {
	p := parking{bad: make([]int, len(j.exp.Bad)), matched: make([]bool, len(j.s.deadLetters))}
	for i, b := range j.exp.Bad {
		p.bad[i] = findBad(j.s.deadLetters, b)
		if p.bad[i] >= 0 {
			p.matched[p.bad[i]] = true
		}
	}
	for _, c := range j.exp.Conflicts {
		if !j.exp.Published(c.Phase) {
			continue
		}
		key := c.Key()
		rows := j.s.events[key]
		if len(rows) == 0 {
			continue // invariant 3 reports the missing row
		}
		// The copy that was not recorded is the one parked; a late copy
		// must be parked whatever was recorded.
		pc := parkedCopy{key: key, other: c.Copy}
		if max(c.Phase, 1) == 1 && sameContent(rows[0].content, c.Copy) {
			pc.other = j.published[key].Content
		}
		for i, d := range j.s.deadLetters {
			e, ok := parkedEvent(d.body)
			if ok && e.key() == key && sameContent(e.content(), pc.other) {
				pc.at = append(pc.at, i)
				p.matched[i] = true
			}
		}
		p.copies = append(p.copies, pc)
	}
	return p
}

// parkedNotFatal is invariant 4: every dead letter of the run has a reason
// of the right kind, and no valid event was parked.
func (j *judgement) parkedNotFatal() *Invariant {
	inv := &Invariant{Number: 4, Name: "bad input parked, not fatal"}
	dls := j.s.deadLetters
	for i, b := range j.exp.Bad {
		at := j.parked.bad[i]
		if at >= 0 && !reasonHasWord(dls[at].reason, b.ReasonWords) {
			inv.fail("bad message %s (%s) is parked with reason %q, which mentions none of %v", b.Token, describeBad(b), dls[at].reason, b.ReasonWords)
		}
	}
	for _, c := range j.parked.copies {
		for _, at := range c.at {
			if !reasonHasWord(dls[at].reason, scenario.ReasonWords["conflict"]) {
				inv.fail("conflicting copy of %s is parked with reason %q, which does not say conflict", c.key, dls[at].reason)
			}
		}
	}
	for i, d := range dls {
		if !j.parked.matched[i] {
			inv.fail("%s", j.unexpectedParking(d))
		}
	}
	return inv
}

// unexpectedParking says why dead letter d, which holds nothing the run
// meant to park, is wrong.
func (j *judgement) unexpectedParking(d deadLetterRow) string {
	if e, ok := parkedEvent(d.body); ok {
		if _, pub := j.published[e.key()]; pub {
			if _, conflict := j.conflicts[e.key()]; !conflict {
				return fmt.Sprintf("valid event %s was parked in dead_letters (id %d) with reason %q", e.key(), d.id, d.reason)
			}
			if rows := j.s.events[e.key()]; len(rows) > 0 && sameContent(rows[0].content, e.content()) {
				return fmt.Sprintf("event %s was both recorded and parked (dead letter %d, reason %q)", e.key(), d.id, d.reason)
			}
		}
	}
	return fmt.Sprintf("dead letter %d (keys %q, reason %q) matches no message the run published as bad", d.id, d.keys, d.reason)
}

// crashSafety is invariant 5: the others hold after whatever the run did to
// the processes.
func crashSafety(others []*Invariant) *Invariant {
	inv := &Invariant{Number: 5, Name: "crash safety"}
	for _, o := range others {
		if !o.Pass() {
			inv.fail("invariant %d (%s) does not hold after the run", o.Number, o.Name)
		}
	}
	return inv
}
