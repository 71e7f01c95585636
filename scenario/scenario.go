// Package scenario generates order event scenarios for orderflow, publishes
// them to RocketMQ, and records the final state every order must reach.
//
// A scenario is deterministic from its seed: N orders walk lifecycle paths of
// docs/design.md (some cancelled before or after payment, some left open, some with
// data updates at the same status, terminal ones included), every event a
// full snapshot with a producer ID and sequence number. Distortions are then
// applied, each configurable: duplicates (the same body sent again, as a
// producer retry does), reordering (an order's events shuffled; orders
// interleaved at random), lost events (a middle version never published,
// though the producer spends its sequence number: a hole in the sequence),
// conflicts (a second event with an existing business key and different
// content), a user change on cancellation (the cancelling event names another
// user and amount than the payment) and bad messages (malformed JSON, wrong
// types, missing fields, invalid status, invalid order ID, oversize bodies).
//
// A scenario may have a second, late phase (Scenario.Late), to publish once
// the first has settled (and, to reach closed workflows, after their grace
// period): events an order's final status cannot reach (SHIPPED after
// CANCELLED, PAID after COMPLETED, ...), conflicting copies that differ from
// the recorded event in every content field, lost events that finally arrive,
// and repeats of old events. None of them may change anything but the
// order_events audit and dead_letters; since they come after the first phase
// settled, what each must record does not depend on delivery order.
//
// The expectations are the generator's own: it knows which statuses it
// published, which it lost, which are stale or illegal. It does not call the
// code it judges (fsm); its tests cross-check it against a simulation that
// does. Generated first-phase paths only move forward through the lifecycle,
// so whatever order the events arrive in, an order's final state is that of
// its highest published version. To keep points independent of delivery
// order too, an order's user and amount change only while it is CREATED and
// on its cancellation: every paid event (PAID, SHIPPED, DELIVERED, COMPLETED)
// of an order carries the same user and amount, so the purchase is the same
// whichever of them is applied first. A first-phase conflicting copy differs
// from its original only in occurred_at, so either of the two may be
// recorded (the other is parked as a conflict) without changing the order's
// status, version, amount or points. The points rule itself is applied by
// the checker (package check), to the facts recorded in Expected.
package scenario

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/orderflow/orderflow/internal/mq"
)

// MaxBodyBytes is the largest message body the contract accepts (64 KiB).
const MaxBodyBytes = 64 << 10

// Options configures a scenario. The zero value of a rate or count disables
// that distortion.
type Options struct {
	// Orders is the number of orders.
	Orders int `json:"orders"`
	// Seed makes the scenario reproducible.
	Seed int64 `json:"seed"`
	// Prefix starts every order ID ("<prefix>-<n>") and bad-message key; it
	// must be unique per run, as order IDs outlive a run in Temporal and
	// PostgreSQL.
	Prefix string `json:"prefix"`
	// Start is the occurred_at of the first event.
	Start time.Time `json:"start"`
	// ProducerID is the producer_id of every event (default "<prefix>-producer").
	ProducerID string `json:"producer_id"`
	// DupRate is the share of messages sent a second time.
	DupRate float64 `json:"dup_rate"`
	// Reorder is the share of orders whose events are shuffled.
	Reorder float64 `json:"reorder"`
	// CancelRate is the share of orders cancelled, half before and half
	// after payment.
	CancelRate float64 `json:"cancel_rate"`
	// OpenRate is the share of orders left at a non-terminal status.
	OpenRate float64 `json:"open_rate"`
	// UpdateRate is the chance of a data update (same status, higher
	// version) at each status of an order's path.
	UpdateRate float64 `json:"update_rate"`
	// GapRate is the share of orders (of three events or more) that lose
	// one middle version.
	GapRate float64 `json:"gap_rate"`
	// UserChangeRate is the share of cancelled orders whose cancelling
	// event names another user and amount than the events before it.
	UserChangeRate float64 `json:"user_change_rate"`
	// Conflicts is the number of conflicting copies in the first phase.
	Conflicts int `json:"conflicts"`
	// Bad is the number of bad messages.
	Bad int `json:"bad"`
	// Illegal is the number of orders that receive, in the late phase, an
	// event with a higher version stating a status their final status
	// cannot reach.
	Illegal int `json:"illegal"`
	// LateConflicts is the number of conflicting copies in the late phase,
	// each differing from the recorded event in every content field.
	LateConflicts int `json:"late_conflicts"`
	// LateRate is the share of orders that receive, in the late phase, the
	// event they lost (which is then stale) or else a repeat of an old one.
	LateRate float64 `json:"late_rate"`
}

// Validate checks the options.
func (o Options) Validate() error {
	var errs []error
	if o.Orders < 1 {
		errs = append(errs, fmt.Errorf("orders must be >= 1, got %d", o.Orders))
	}
	if o.Prefix == "" {
		errs = append(errs, errors.New("prefix is required"))
	} else if len(o.Prefix)+8 > MaxOrderIDLen || !validOrderID(o.Prefix) {
		errs = append(errs, fmt.Errorf("prefix %q must be 1-%d characters of [A-Za-z0-9_.:-]", o.Prefix, MaxOrderIDLen-8))
	}
	for _, r := range []struct {
		name string
		v    float64
	}{{"dup-rate", o.DupRate}, {"reorder", o.Reorder}, {"cancel-rate", o.CancelRate}, {"open-rate", o.OpenRate},
		{"update-rate", o.UpdateRate}, {"gap-rate", o.GapRate}, {"user-change-rate", o.UserChangeRate}, {"late-rate", o.LateRate}} {
		if r.v < 0 || r.v > 1 {
			errs = append(errs, fmt.Errorf("%s must be within [0, 1], got %g", r.name, r.v))
		}
	}
	if o.CancelRate+o.OpenRate > 1 {
		errs = append(errs, fmt.Errorf("cancel-rate + open-rate must be <= 1, got %g", o.CancelRate+o.OpenRate))
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"conflicts", o.Conflicts}, {"bad", o.Bad}, {"illegal", o.Illegal}, {"late-conflicts", o.LateConflicts}} {
		if n.v < 0 {
			errs = append(errs, fmt.Errorf("%s must be >= 0, got %d", n.name, n.v))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("scenario: invalid options: %w", errors.Join(errs...))
	}
	return nil
}

// Kind says what a published message is.
type Kind string

// Message kinds.
const (
	// KindEvent is the first copy of a valid event.
	KindEvent Kind = "event"
	// KindDuplicate is a repeat of an earlier message, byte for byte.
	KindDuplicate Kind = "duplicate"
	// KindConflict is a second event with an existing business key and
	// different content.
	KindConflict Kind = "conflict"
	// KindIllegal is a valid event its order's final status cannot reach
	// (late phase only).
	KindIllegal Kind = "illegal"
	// KindBad is a message that breaks the contract.
	KindBad Kind = "bad"
)

// Message is one message of a scenario, in publish order.
type Message struct {
	Kind Kind `json:"kind"`
	// Msg is what goes to the broker (its Topic is set when publishing).
	Msg mq.Message `json:"-"`
	// Event is the event carried (zero for a bad message).
	Event Event `json:"-"`
	// LostAfter are the lost events that would have been sent right after
	// this message (it carries the order's previous version): when
	// publishing, the producer spends their sequence numbers after sending
	// it, but never sends them (see Publish). Consumers of Messages that
	// deliver them directly ignore it: a lost event is not delivered.
	LostAfter []Event `json:"-"`
}

// Scenario is a generated scenario: the messages in publish order and what
// the database must hold once they are all consumed.
type Scenario struct {
	// Messages is the first phase.
	Messages []Message
	// Late is the late phase, empty unless Options ask for one: publish it
	// once the first phase has settled (check the database against
	// Expected.FirstPhase()), so that what each late message must record
	// does not depend on delivery order.
	Late []Message
	// Expected is the state after both phases (Phases is 2 when there is a
	// late phase).
	Expected Expected
}

// Bad-message kinds.
const (
	BadMalformedJSON = "malformed_json"
	BadWrongType     = "wrong_type"
	BadMissingField  = "missing_field"
	BadInvalidStatus = "invalid_status"
	BadOrderID       = "bad_order_id"
	BadOversize      = "oversize"
)

// badKinds is the rotation of bad-message kinds.
var badKinds = []string{BadMalformedJSON, BadMissingField, BadInvalidStatus, BadOversize, BadOrderID, BadWrongType}

// missingFields is the rotation of required fields left out of
// missing-field messages. amount_cents is not among them: a missing amount
// reads as 0, which is valid.
var missingFields = []string{"user_id", "status", "version", "occurred_at", "event_id"}

// ReasonWords lists, per bad-message kind, words of which a dead letter's
// reason must contain at least one (case-insensitive) to count as the
// right kind of reason: the problem, or the field at fault. (A
// missing-field message's reason must name its missing field.)
var ReasonWords = map[string][]string{
	BadMalformedJSON: {"json", "malformed", "syntax", "parse"},
	BadWrongType:     {"version"},
	BadInvalidStatus: {"status"},
	BadOrderID:       {"order_id"},
	BadOversize:      {"size", "large", "bytes", "limit", "exceed"},
	"conflict":       {"conflict"},
}

// Generate builds the scenario described by o. It is deterministic: the same
// options give the same messages and the same expectations.
func Generate(o Options) (*Scenario, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.ProducerID == "" {
		o.ProducerID = o.Prefix + "-producer"
	}
	if o.Start.IsZero() {
		o.Start = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	o.Start = o.Start.UTC().Truncate(time.Second)
	g := &generator{o: o, rng: rand.New(rand.NewPCG(uint64(o.Seed), 0x6f72646572666c6f))}
	return g.run()
}

type generator struct {
	o   Options
	rng *rand.Rand
	seq int64
}

// orderPlan is one order's generated events.
type orderPlan struct {
	id        string
	events    []Event // version order, as generated
	published []Event // version order, published in the first phase
	lost      []Event // never published in the first phase
	lateLost  []Event // lost events the late phase publishes
	reordered bool
	// userChanged: the cancellation names another user than the events
	// before it.
	userChanged bool
}

// final is the order's highest-version event of the first phase.
func (p *orderPlan) final() Event { return p.published[len(p.published)-1] }

// run generates the scenario: the orders' plans, the first phase's
// messages (lost events, shuffled queues interleaved, conflicts, bad
// messages, duplicates), the late phase, and the expected state.
func (g *generator) run() (*Scenario, error) {
	plans := make([]*orderPlan, g.o.Orders)
	for i := range plans {
		plans[i] = g.plan(i)
	}
	g.loseMiddle(plans)
	queues, err := g.queues(plans)
	if err != nil {
		return nil, err
	}
	msgs := g.interleave(queues)
	msgs, conflicts, conflicted, err := g.conflicts(msgs)
	if err != nil {
		return nil, err
	}
	msgs, bads := g.addBad(msgs)
	msgs, dups := g.duplicate(msgs)
	if err := loseAfter(msgs, plans); err != nil {
		return nil, err
	}
	late, lateKeys, lateConflicts, lateDups, err := g.latePhase(plans, conflicted)
	if err != nil {
		return nil, err
	}
	conflicts = append(conflicts, lateConflicts...)

	exp := g.expected(plans, conflicts, bads, lateKeys)
	exp.Counts.Messages = len(msgs) + len(late)
	exp.Counts.Late = len(late)
	exp.Counts.Duplicates = dups + lateDups
	if len(late) > 0 {
		exp.Phases = 2
	}
	return &Scenario{Messages: msgs, Late: late, Expected: exp}, nil
}

// loseMiddle picks the lost events: in some orders, a middle version is
// never published in the first phase.
func (g *generator) loseMiddle(plans []*orderPlan) {
	for _, p := range plans {
		p.published = p.events
		if len(p.events) >= 3 && g.rng.Float64() < g.o.GapRate {
			k := 1 + g.rng.IntN(len(p.events)-2)
			p.lost = []Event{p.events[k]}
			p.published = append(append([]Event{}, p.events[:k]...), p.events[k+1:]...)
		}
	}
}

// queues returns each order's publish queue, some shuffled.
func (g *generator) queues(plans []*orderPlan) ([][]Message, error) {
	queues := make([][]Message, len(plans))
	for i, p := range plans {
		q := make([]Message, 0, len(p.published))
		for _, e := range p.published {
			m, err := eventMessage(KindEvent, e)
			if err != nil {
				return nil, err
			}
			q = append(q, m)
		}
		if len(q) >= 2 && g.rng.Float64() < g.o.Reorder {
			p.reordered = true
			g.shuffle(q, p.published)
		}
		queues[i] = q
	}
	return queues, nil
}

// shuffle shuffles q until it is out of the order of published.
func (g *generator) shuffle(q []Message, published []Event) {
	for same := true; same; {
		g.rng.Shuffle(len(q), func(a, b int) { q[a], q[b] = q[b], q[a] })
		for k := range q {
			if q[k].Event.Version != published[k].Version {
				same = false
				break
			}
		}
	}
}

// interleave merges the orders' queues at random, keeping each queue's
// order.
func (g *generator) interleave(queues [][]Message) []Message {
	total := 0
	for _, q := range queues {
		total += len(q)
	}
	msgs := make([]Message, 0, total*2)
	live := make([]int, 0, len(queues))
	for i, q := range queues {
		if len(q) > 0 {
			live = append(live, i)
		}
	}
	for len(live) > 0 {
		j := g.rng.IntN(len(live))
		i := live[j]
		msgs = append(msgs, queues[i][0])
		queues[i] = queues[i][1:]
		if len(queues[i]) == 0 {
			live[j] = live[len(live)-1]
			live = live[:len(live)-1]
		}
	}
	return msgs
}

// conflicts inserts the first phase's conflicts into msgs: a copy of a
// published event with a different occurred_at, at a random position. It
// returns the messages, the conflicts, and the business keys they copy.
func (g *generator) conflicts(msgs []Message) ([]Message, []ExpectedConflict, map[Key]bool, error) {
	var conflicts []ExpectedConflict
	conflicted := map[Key]bool{}
	if g.o.Conflicts <= 0 {
		return msgs, conflicts, conflicted, nil
	}
	events := make([]Event, 0, len(msgs))
	for _, m := range msgs {
		events = append(events, m.Event)
	}
	pick := g.rng.Perm(len(events))
	if g.o.Conflicts < len(pick) {
		pick = pick[:g.o.Conflicts]
	}
	sort.Ints(pick)
	for _, k := range pick {
		orig := events[k]
		c := orig
		c.EventID = orig.EventID + "-conflict"
		c.OccurredAt = orig.OccurredAt.Add(time.Second)
		g.seq++
		c.Seq = g.seq
		m, err := eventMessage(KindConflict, c)
		if err != nil {
			return nil, nil, nil, err
		}
		msgs = insertAt(msgs, g.rng.IntN(len(msgs)+1), m)
		conflicts = append(conflicts, ExpectedConflict{OrderID: orig.OrderID, Version: orig.Version, Copy: c.Content(), Phase: 1})
		conflicted[orig.Key()] = true
	}
	return msgs, conflicts, conflicted, nil
}

// addBad inserts the bad messages into msgs at random positions.
func (g *generator) addBad(msgs []Message) ([]Message, []BadMessage) {
	var bads []BadMessage
	for n := 0; n < g.o.Bad; n++ {
		m, b := g.badMessage(n)
		msgs = insertAt(msgs, g.rng.IntN(len(msgs)+1), m)
		bads = append(bads, b)
	}
	return msgs, bads
}

// expected is the expected state of the orders planned: their final
// snapshots, the business keys published (lateKeys those of the second
// phase), the lost events, and the counts that follow from them. The
// caller adds the counts of messages, late messages and duplicates.
func (g *generator) expected(plans []*orderPlan, conflicts []ExpectedConflict, bads []BadMessage, lateKeys []PublishedKey) Expected {
	exp := Expected{
		Prefix:    g.o.Prefix,
		Options:   g.o,
		Phases:    1,
		Conflicts: conflicts,
		Bad:       bads,
	}
	for _, p := range plans {
		f := p.final()
		exp.Orders = append(exp.Orders, ExpectedOrder{
			OrderID: p.id, UserID: f.UserID, Status: f.Status, Version: f.Version, AmountCents: f.AmountCents,
		})
		exp.Keys = append(exp.Keys, publishedKeys(p)...)
		for _, e := range p.lost {
			if !containsEvent(p.lateLost, e) {
				exp.Lost = append(exp.Lost, PublishedKey{OrderID: e.OrderID, Version: e.Version, Content: e.Content()})
			}
		}
		if p.reordered {
			exp.Counts.Reordered++
		}
		if p.userChanged {
			exp.Counts.UserChanges++
		}
	}
	exp.Keys = append(exp.Keys, lateKeys...)
	exp.Counts.Orders = len(plans)
	exp.Counts.Events = len(exp.Keys)
	exp.Counts.Lost = len(exp.Lost)
	exp.Counts.Conflicts = len(conflicts)
	exp.Counts.Bad = len(bads)
	for _, k := range lateKeys {
		if k.Outcome == OutcomeIllegal {
			exp.Counts.Illegal++
		}
	}
	return exp
}

// publishedKeys are the business keys of p's first phase.
func publishedKeys(p *orderPlan) []PublishedKey {
	f := p.final()
	keys := make([]PublishedKey, 0, len(p.published))
	for _, e := range p.published {
		k := PublishedKey{OrderID: e.OrderID, Version: e.Version, Content: e.Content(), Phase: 1}
		if e.Version == f.Version {
			// The highest version finds every earlier status able to reach
			// it, whenever it arrives.
			k.Outcome = OutcomeApplied
		}
		keys = append(keys, k)
	}
	return keys
}

// loseAfter attaches each lost event to the first copy of its order's
// previous version in msgs: the producer would have sent it next.
func loseAfter(msgs []Message, plans []*orderPlan) error {
	at := map[Key]int{}
	for i, m := range msgs {
		if m.Kind == KindEvent {
			at[m.Event.Key()] = i
		}
	}
	for _, p := range plans {
		for _, e := range p.lost {
			i, ok := at[Key{OrderID: e.OrderID, Version: e.Version - 1}]
			if !ok {
				return fmt.Errorf("scenario: lost event %s has no published previous version", e.Key())
			}
			msgs[i].LostAfter = append(msgs[i].LostAfter, e)
		}
	}
	return nil
}

func containsEvent(es []Event, e Event) bool {
	for _, x := range es {
		if x.Key() == e.Key() {
			return true
		}
	}
	return false
}

// duplicate sends a share of the valid messages a second time, a little
// later, as a producer retry does. It returns the messages and the number of
// copies added.
func (g *generator) duplicate(msgs []Message) ([]Message, int) {
	if g.o.DupRate <= 0 {
		return msgs, 0
	}
	type pending struct {
		at int
		m  Message
	}
	dups := 0
	out := make([]Message, 0, len(msgs)+len(msgs)/2)
	var wait []pending
	for i, m := range msgs {
		out = append(out, m)
		if m.Kind != KindBad && g.rng.Float64() < g.o.DupRate {
			d := m
			d.Kind = KindDuplicate
			wait = append(wait, pending{i + 1 + g.rng.IntN(20), d})
		}
		for k := 0; k < len(wait); {
			if wait[k].at <= i+1 {
				out = append(out, wait[k].m)
				dups++
				wait = append(wait[:k], wait[k+1:]...)
				continue
			}
			k++
		}
	}
	for _, p := range wait {
		out = append(out, p.m)
		dups++
	}
	return out, dups
}

// latePhase builds the late phase, published once the first has settled:
// illegal events, conflicting copies that differ in every content field,
// lost events that finally arrive, and repeats. None may change an order. It
// returns the messages in publish order, the business keys they add, the
// conflicts, and the number of repeats. Keys in taken (first-phase
// conflicts, whose recorded content depends on delivery order) are left
// alone.
func (g *generator) latePhase(plans []*orderPlan, taken map[Key]bool) ([]Message, []PublishedKey, []ExpectedConflict, int, error) {
	o := g.o
	var (
		msgs      []Message
		keys      []PublishedKey
		conflicts []ExpectedConflict
		repeats   int
	)
	add := func(kind Kind, e Event) error {
		m, err := eventMessage(kind, e)
		if err == nil {
			msgs = append(msgs, m)
		}
		return err
	}

	// Illegal events: a higher version stating a status the order's final
	// status cannot reach. An order at CREATED can reach every status.
	if o.Illegal > 0 {
		n := 0
		for _, i := range g.rng.Perm(len(plans)) {
			if n == o.Illegal {
				break
			}
			p := plans[i]
			f := p.final()
			targets := Unreachable(f.Status)
			if len(targets) == 0 {
				continue
			}
			e := f
			e.Status = targets[g.rng.IntN(len(targets))]
			e.Version = f.Version + 1 + g.rng.Int64N(2)
			e.EventID = fmt.Sprintf("%s-v%d-illegal", p.id, e.Version)
			e.OccurredAt = f.OccurredAt.Add(time.Hour)
			g.seq++
			e.Seq = g.seq
			if err := add(KindIllegal, e); err != nil {
				return nil, nil, nil, 0, err
			}
			keys = append(keys, PublishedKey{OrderID: e.OrderID, Version: e.Version, Content: e.Content(),
				Phase: 2, Outcome: OutcomeIllegal})
			n++
		}
	}

	// Conflicting copies of recorded events, every content field changed:
	// the order's final event for every other one (the copy would move the
	// order if it were applied), any published event otherwise.
	if o.LateConflicts > 0 {
		n := 0
		for _, i := range g.rng.Perm(len(plans)) {
			if n == o.LateConflicts {
				break
			}
			p := plans[i]
			orig := p.final()
			if n%2 == 1 {
				orig = p.published[g.rng.IntN(len(p.published))]
			}
			if taken[orig.Key()] {
				continue
			}
			c := orig
			c.EventID = orig.EventID + "-late-conflict"
			c.UserID = g.otherUser(orig.UserID)
			others := make([]Status, 0, len(Statuses)-1)
			for _, s := range Statuses {
				if s != orig.Status {
					others = append(others, s)
				}
			}
			c.Status = others[g.rng.IntN(len(others))]
			c.AmountCents = orig.AmountCents + 1 + g.rng.Int64N(100000)
			c.OccurredAt = orig.OccurredAt.Add(time.Hour + time.Duration(1+g.rng.IntN(3600))*time.Second)
			g.seq++
			c.Seq = g.seq
			if err := add(KindConflict, c); err != nil {
				return nil, nil, nil, 0, err
			}
			conflicts = append(conflicts, ExpectedConflict{OrderID: orig.OrderID, Version: orig.Version, Copy: c.Content(), Phase: 2})
			taken[orig.Key()] = true
			n++
		}
	}

	// Late arrivals: the lost event, now stale, or a repeat of an old one.
	if o.LateRate > 0 {
		for _, p := range plans {
			if g.rng.Float64() >= o.LateRate {
				continue
			}
			if len(p.lost) > 0 {
				e := p.lost[0]
				if err := add(KindEvent, e); err != nil {
					return nil, nil, nil, 0, err
				}
				p.lateLost = append(p.lateLost, e)
				keys = append(keys, PublishedKey{OrderID: e.OrderID, Version: e.Version, Content: e.Content(),
					Phase: 2, Outcome: OutcomeStale})
				continue
			}
			e := p.published[g.rng.IntN(len(p.published))]
			if taken[e.Key()] {
				continue
			}
			if err := add(KindDuplicate, e); err != nil {
				return nil, nil, nil, 0, err
			}
			repeats++
		}
	}
	g.rng.Shuffle(len(msgs), func(a, b int) { msgs[a], msgs[b] = msgs[b], msgs[a] })
	return msgs, keys, conflicts, repeats, nil
}

// otherUser returns a user ID other than u.
func (g *generator) otherUser(u int64) int64 {
	v := 1 + g.rng.Int64N(10000)
	if v == u {
		v = u%10000 + 1
	}
	return v
}

func insertAt(msgs []Message, at int, m Message) []Message {
	msgs = append(msgs, Message{})
	copy(msgs[at+1:], msgs[at:])
	msgs[at] = m
	return msgs
}

// OrderID returns the ID of order n of a run.
func OrderID(prefix string, n int) string { return fmt.Sprintf("%s-%05d", prefix, n) }

// plan generates order i's lifecycle events.
func (g *generator) plan(i int) *orderPlan {
	o := g.o
	id := OrderID(o.Prefix, i)
	user := 1 + g.rng.Int64N(10000)
	amount := 100 + g.rng.Int64N(100000)

	full := []Status{Created, Paid, Shipped, Delivered, Completed}
	var path []Status
	switch r := g.rng.Float64(); {
	case r < o.CancelRate/2:
		path = []Status{Created, Cancelled}
	case r < o.CancelRate:
		path = []Status{Created, Paid, Cancelled}
	case r < o.CancelRate+o.OpenRate:
		path = full[:1+g.rng.IntN(4)]
	default:
		path = full
	}

	p := &orderPlan{id: id}
	at := o.Start.Add(time.Duration(i) * time.Second)
	add := func(s Status) {
		v := int64(len(p.events) + 1)
		g.seq++
		p.events = append(p.events, Event{
			EventID:     fmt.Sprintf("%s-v%d", id, v),
			OrderID:     id,
			UserID:      user,
			Status:      s,
			Version:     v,
			AmountCents: amount,
			OccurredAt:  at.Add(time.Duration(v) * time.Minute),
			ProducerID:  o.ProducerID,
			Seq:         g.seq,
		})
	}
	for _, s := range path {
		if s == Cancelled && g.rng.Float64() < o.UserChangeRate {
			// Another user and amount on the cancellation: a refund must
			// still take back the purchase from its purchaser.
			p.userChanged = true
			user = g.otherUser(user)
			amount = 100 + g.rng.Int64N(100000)
		}
		add(s)
		for n := 0; n < 2 && g.rng.Float64() < o.UpdateRate; n++ {
			if s == Created {
				// User and amount may change only before payment (see
				// the package documentation).
				amount = 100 + g.rng.Int64N(100000)
				if g.rng.IntN(2) == 0 {
					user = g.otherUser(user)
				}
			}
			add(s)
		}
	}
	return p
}

// eventMessage returns the message of kind carrying e, its body the JSON of
// the contract's fields.
func eventMessage(kind Kind, e Event) (Message, error) {
	body, err := json.Marshal(e)
	if err != nil {
		return Message{}, fmt.Errorf("scenario: encode event %s: %w", e.Key(), err)
	}
	m, err := mq.EventMessage("", body)
	if err != nil {
		return Message{}, fmt.Errorf("scenario: event %s: %w", e.Key(), err)
	}
	return Message{Kind: kind, Msg: m, Event: e}, nil
}

// badMessage builds bad message n, of the kind the rotation gives it. Its
// key (and, where the body has room, its body) carries a unique token
// "<prefix>-bad-<n>" so that the checker can find its dead letter.
func (g *generator) badMessage(n int) (Message, BadMessage) {
	o := g.o
	kind := badKinds[n%len(badKinds)]
	token := fmt.Sprintf("%s-bad-%03d", o.Prefix, n)
	ts := o.Start.Add(time.Duration(n) * time.Second).Format(time.RFC3339)
	b := BadMessage{Token: token, Kind: kind}
	var body []byte
	tag := "CREATED"
	switch kind {
	case BadMalformedJSON:
		body = []byte(fmt.Sprintf(`{"event_id":"%s","order_id":"%s","user_id":7,"status":"CREATED","version":1,`, token, token))
		tag = ""
	case BadWrongType:
		body = []byte(fmt.Sprintf(`{"event_id":"%s","order_id":"%s","user_id":7,"status":"CREATED","version":"one","amount_cents":100,"occurred_at":"%s"}`, token, token, ts))
	case BadMissingField:
		field := missingFields[(n/len(badKinds))%len(missingFields)]
		b.Field = field
		fields := map[string]any{
			"event_id": token, "order_id": token, "user_id": 7, "status": "CREATED",
			"version": 1, "amount_cents": 100, "occurred_at": ts,
		}
		if field == "event_id" {
			// Keep the token in the body for the dead-letter lookup.
			fields["note"] = token
		}
		delete(fields, field)
		body, _ = json.Marshal(fields)
		if field == "status" {
			tag = ""
		}
	case BadInvalidStatus:
		body = []byte(fmt.Sprintf(`{"event_id":"%s","order_id":"%s","user_id":7,"status":"REFUNDED","version":1,"amount_cents":100,"occurred_at":"%s"}`, token, token, ts))
		tag = "REFUNDED"
	case BadOrderID:
		bad := []string{token + " has spaces", token + "/slash", token + "-" + strings.Repeat("x", MaxOrderIDLen)}[(n/len(badKinds))%3]
		body = []byte(fmt.Sprintf(`{"event_id":"%s","order_id":%q,"user_id":7,"status":"CREATED","version":1,"amount_cents":100,"occurred_at":"%s"}`, token, bad, ts))
	case BadOversize:
		head := fmt.Sprintf(`{"event_id":"%s","order_id":"%s","user_id":7,"status":"CREATED","version":1,"amount_cents":100,"occurred_at":"%s","note":"`, token, token, ts)
		pad := MaxBodyBytes + 1 + g.rng.IntN(4096) - len(head)
		body = []byte(head + strings.Repeat("x", pad) + `"}`)
	}
	sum := sha256.Sum256(body)
	b.BodySHA256 = hex.EncodeToString(sum[:])
	b.Size = len(body)
	b.ReasonWords = ReasonWords[kind]
	if kind == BadMissingField {
		b.ReasonWords = []string{b.Field}
	}
	m := mq.Message{Body: body, Keys: token, Tag: tag}
	return Message{Kind: KindBad, Msg: m}, b
}
