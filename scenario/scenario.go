// Package scenario generates order event scenarios for orderflow, publishes
// them to RocketMQ, and records the final state every order must reach.
//
// A scenario is deterministic from its seed: N orders walk lifecycle paths of
// DESIGN.md (some cancelled before or after payment, some left open, some with
// data updates at the same status), every event a full snapshot with a
// producer ID and sequence number. Distortions are then applied, each
// configurable: duplicates (the same body sent again, as a producer retry
// does), reordering (an order's events shuffled; orders interleaved at
// random), lost events (a middle version never published), conflicts (a
// second event with an existing business key and different content) and bad
// messages (malformed JSON, wrong types, missing fields, invalid status,
// invalid order ID, oversize bodies).
//
// The expected final state does not depend on delivery order. Generated paths
// only move forward through the lifecycle, so whatever order the events
// arrive in, the highest published version is applied last or finds every
// later arrival stale; the expected status and version are those of the walk
// of fsm.Decide over the published events in version order. To keep points
// independent of delivery order too, an order's amount changes only while it
// is CREATED: every paid event (PAID, SHIPPED, DELIVERED, COMPLETED) carries
// the same amount, so the purchase points are the same whichever of them is
// applied first. A conflicting copy differs from its original only in
// occurred_at, so either of the two may be recorded (the other is parked as a
// conflict) without changing the order's status, version, amount or points.
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

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/mq"
)

// MaxBodyBytes is the largest message body the contract accepts (64 KiB).
const MaxBodyBytes = 64 << 10

// Options configures a scenario. The zero value of a rate disables that
// distortion.
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
	// version) at each non-terminal status of an order's path.
	UpdateRate float64 `json:"update_rate"`
	// GapRate is the share of orders (of three events or more) that lose
	// one middle version.
	GapRate float64 `json:"gap_rate"`
	// Conflicts is the number of conflicting copies.
	Conflicts int `json:"conflicts"`
	// Bad is the number of bad messages.
	Bad int `json:"bad"`
}

// Validate checks the options.
func (o Options) Validate() error {
	var errs []error
	if o.Orders < 1 {
		errs = append(errs, fmt.Errorf("orders must be >= 1, got %d", o.Orders))
	}
	if o.Prefix == "" {
		errs = append(errs, errors.New("prefix is required"))
	} else if len(o.Prefix)+8 > fsm.MaxOrderIDLen || !fsm.ValidOrderID(o.Prefix) {
		errs = append(errs, fmt.Errorf("prefix %q must be 1-%d characters of [A-Za-z0-9_.:-]", o.Prefix, fsm.MaxOrderIDLen-8))
	}
	for _, r := range []struct {
		name string
		v    float64
	}{{"dup-rate", o.DupRate}, {"reorder", o.Reorder}, {"cancel-rate", o.CancelRate}, {"open-rate", o.OpenRate}, {"update-rate", o.UpdateRate}, {"gap-rate", o.GapRate}} {
		if r.v < 0 || r.v > 1 {
			errs = append(errs, fmt.Errorf("%s must be within [0, 1], got %g", r.name, r.v))
		}
	}
	if o.CancelRate+o.OpenRate > 1 {
		errs = append(errs, fmt.Errorf("cancel-rate + open-rate must be <= 1, got %g", o.CancelRate+o.OpenRate))
	}
	if o.Conflicts < 0 {
		errs = append(errs, fmt.Errorf("conflicts must be >= 0, got %d", o.Conflicts))
	}
	if o.Bad < 0 {
		errs = append(errs, fmt.Errorf("bad must be >= 0, got %d", o.Bad))
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
	// KindBad is a message that breaks the contract.
	KindBad Kind = "bad"
)

// Message is one message of a scenario, in publish order.
type Message struct {
	Kind Kind `json:"kind"`
	// Msg is what goes to the broker (its Topic is set when publishing).
	Msg mq.Message `json:"-"`
	// Event is the event carried (zero for a bad message).
	Event fsm.Event `json:"-"`
}

// Scenario is a generated scenario: the messages in publish order and what
// the database must hold once they are all consumed.
type Scenario struct {
	Messages []Message
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
	events    []fsm.Event // version order, as generated
	published []fsm.Event // version order, after losses
	lost      []fsm.Event
	reordered bool
}

func (g *generator) run() (*Scenario, error) {
	o := g.o
	plans := make([]*orderPlan, o.Orders)
	for i := range plans {
		plans[i] = g.plan(i)
	}

	// Lost events: a middle version is never published.
	for _, p := range plans {
		p.published = p.events
		if len(p.events) >= 3 && g.rng.Float64() < o.GapRate {
			k := 1 + g.rng.IntN(len(p.events)-2)
			p.lost = []fsm.Event{p.events[k]}
			p.published = append(append([]fsm.Event{}, p.events[:k]...), p.events[k+1:]...)
		}
	}

	// Per-order publish queues, some shuffled.
	queues := make([][]Message, len(plans))
	for i, p := range plans {
		q := make([]Message, 0, len(p.published))
		for _, e := range p.published {
			m, err := eventMessage(e)
			if err != nil {
				return nil, err
			}
			q = append(q, Message{Kind: KindEvent, Msg: m, Event: e})
		}
		if len(q) >= 2 && g.rng.Float64() < o.Reorder {
			p.reordered = true
			for same := true; same; {
				g.rng.Shuffle(len(q), func(a, b int) { q[a], q[b] = q[b], q[a] })
				for k := range q {
					if q[k].Event.Version != p.published[k].Version {
						same = false
						break
					}
				}
			}
		}
		queues[i] = q
	}

	// Interleave the orders at random, keeping each order's queue order.
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

	// Conflicts: a copy of a published event with a different occurred_at,
	// inserted at a random position.
	var conflicts []ExpectedConflict
	if o.Conflicts > 0 {
		events := make([]fsm.Event, 0, len(msgs))
		for _, m := range msgs {
			events = append(events, m.Event)
		}
		pick := g.rng.Perm(len(events))
		if o.Conflicts < len(pick) {
			pick = pick[:o.Conflicts]
		}
		sort.Ints(pick)
		for _, k := range pick {
			orig := events[k]
			c := orig
			c.EventID = orig.EventID + "-conflict"
			c.OccurredAt = orig.OccurredAt.Add(time.Second)
			g.seq++
			c.Seq = g.seq
			m, err := eventMessage(c)
			if err != nil {
				return nil, err
			}
			msgs = insertAt(msgs, g.rng.IntN(len(msgs)+1), Message{Kind: KindConflict, Msg: m, Event: c})
			conflicts = append(conflicts, ExpectedConflict{
				OrderID: orig.OrderID, Version: orig.Version,
				Hashes: [2]string{orig.ContentHash(), c.ContentHash()},
			})
		}
	}

	// Bad messages at random positions.
	var bads []BadMessage
	for n := 0; n < o.Bad; n++ {
		m, b := g.badMessage(n)
		msgs = insertAt(msgs, g.rng.IntN(len(msgs)+1), m)
		bads = append(bads, b)
	}

	// Duplicates: a copy of a valid message a little later, as a producer
	// retry.
	dups := 0
	if o.DupRate > 0 {
		out := make([]Message, 0, len(msgs)+len(msgs)/2)
		var pending []struct {
			at int
			m  Message
		}
		for i, m := range msgs {
			out = append(out, m)
			if m.Kind != KindBad && g.rng.Float64() < o.DupRate {
				d := m
				d.Kind = KindDuplicate
				pending = append(pending, struct {
					at int
					m  Message
				}{i + 1 + g.rng.IntN(20), d})
			}
			for k := 0; k < len(pending); {
				if pending[k].at <= i+1 {
					out = append(out, pending[k].m)
					dups++
					pending = append(pending[:k], pending[k+1:]...)
					continue
				}
				k++
			}
		}
		for _, p := range pending {
			out = append(out, p.m)
			dups++
		}
		msgs = out
	}

	exp := Expected{
		Prefix:    o.Prefix,
		Options:   o,
		Conflicts: conflicts,
		Bad:       bads,
	}
	exp.Counts.Messages = len(msgs)
	exp.Counts.Orders = len(plans)
	exp.Counts.Duplicates = dups
	exp.Counts.Conflicts = len(conflicts)
	exp.Counts.Bad = len(bads)
	for _, p := range plans {
		eo, err := expectOrder(p.id, p.published)
		if err != nil {
			return nil, err
		}
		exp.Orders = append(exp.Orders, eo)
		exp.Counts.Events += len(p.published)
		exp.Counts.Lost += len(p.lost)
		if p.reordered {
			exp.Counts.Reordered++
		}
		for _, e := range p.published {
			exp.Keys = append(exp.Keys, PublishedKey{OrderID: e.OrderID, Version: e.Version, Hash: e.ContentHash()})
		}
		for _, e := range p.lost {
			exp.Lost = append(exp.Lost, PublishedKey{OrderID: e.OrderID, Version: e.Version, Hash: e.ContentHash()})
		}
	}
	return &Scenario{Messages: msgs, Expected: exp}, nil
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

	full := []fsm.Status{fsm.Created, fsm.Paid, fsm.Shipped, fsm.Delivered, fsm.Completed}
	var path []fsm.Status
	switch r := g.rng.Float64(); {
	case r < o.CancelRate/2:
		path = []fsm.Status{fsm.Created, fsm.Cancelled}
	case r < o.CancelRate:
		path = []fsm.Status{fsm.Created, fsm.Paid, fsm.Cancelled}
	case r < o.CancelRate+o.OpenRate:
		path = full[:1+g.rng.IntN(4)]
	default:
		path = full
	}

	p := &orderPlan{id: id}
	at := o.Start.Add(time.Duration(i) * time.Second)
	add := func(s fsm.Status) {
		v := int64(len(p.events) + 1)
		g.seq++
		p.events = append(p.events, fsm.Event{
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
		add(s)
		if s.Terminal() {
			continue
		}
		for n := 0; n < 2 && g.rng.Float64() < o.UpdateRate; n++ {
			if s == fsm.Created {
				// The amount may change only before payment (see the
				// package documentation).
				amount = 100 + g.rng.Int64N(100000)
			}
			add(s)
		}
	}
	return p
}

func eventMessage(e fsm.Event) (mq.Message, error) {
	body, err := json.Marshal(e)
	if err != nil {
		return mq.Message{}, fmt.Errorf("scenario: encode event %s: %w", e.Key(), err)
	}
	return mq.EventMessage("", body)
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
		bad := []string{token + " has spaces", token + "/slash", token + "-" + strings.Repeat("x", fsm.MaxOrderIDLen)}[(n/len(badKinds))%3]
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

// expectOrder walks fsm.Decide over the published events of one order in
// version order and returns the final state they must produce.
func expectOrder(id string, published []fsm.Event) (ExpectedOrder, error) {
	events := append([]fsm.Event(nil), published...)
	sort.Slice(events, func(a, b int) bool { return events[a].Version < events[b].Version })
	var cur *fsm.Order
	var points int64
	paid := false
	for _, e := range events {
		if err := e.Validate(); err != nil {
			return ExpectedOrder{}, fmt.Errorf("scenario: generated an invalid event %s: %w", e.Key(), err)
		}
		if e.Status.EarnsPurchase() {
			paid = true
		}
		d := fsm.Decide(cur, e)
		if d.Outcome != fsm.Applied {
			return ExpectedOrder{}, fmt.Errorf("scenario: event %s is %s in version order: %s", e.Key(), d.Outcome, d.Reason)
		}
		points += d.PointsDelta
		next := d.Next
		cur = &next
	}
	if cur == nil {
		return ExpectedOrder{}, fmt.Errorf("scenario: order %s has no published event", id)
	}
	return ExpectedOrder{
		OrderID:        id,
		UserID:         cur.UserID,
		Status:         cur.Status,
		Version:        cur.Version,
		AmountCents:    cur.AmountCents,
		Points:         points,
		PurchasePoints: fsm.PurchasePointsFor(cur.AmountCents),
		RefundPossible: cur.Status == fsm.Cancelled && paid,
	}, nil
}
