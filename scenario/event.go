package scenario

import (
	"regexp"
	"strconv"
	"time"
)

// This file is the generator's own reading of the message contract and the
// lifecycle of docs/design.md. It shares no code with fsm, the package the
// scenarios judge: a rule written wrongly there must not be copied into the
// expectations.

// Status is an order lifecycle state, as the message contract spells it.
type Status string

// The lifecycle states. COMPLETED and CANCELLED are terminal.
const (
	Created   Status = "CREATED"
	Paid      Status = "PAID"
	Shipped   Status = "SHIPPED"
	Delivered Status = "DELIVERED"
	Completed Status = "COMPLETED"
	Cancelled Status = "CANCELLED"
)

// Statuses lists every lifecycle state in lifecycle order.
var Statuses = []Status{Created, Paid, Shipped, Delivered, Completed, Cancelled}

// steps is the lifecycle, one step at a time:
//
//	CREATED ──► PAID ──► SHIPPED ──► DELIVERED ──► COMPLETED
//	   │          │
//	   └──────────┴──► CANCELLED
var steps = map[Status][]Status{
	Created:   {Paid, Cancelled},
	Paid:      {Shipped, Cancelled},
	Shipped:   {Delivered},
	Delivered: {Completed},
}

// Reachable reports whether to follows from in zero or more lifecycle steps
// (zero steps: a data update at the same status).
func Reachable(from, to Status) bool {
	if from == to {
		return true
	}
	for _, n := range steps[from] {
		if Reachable(n, to) {
			return true
		}
	}
	return false
}

// Unreachable lists, in lifecycle order, the statuses an event may not move
// an order at from to: an event stating one of them, with a higher version,
// is illegal.
func Unreachable(from Status) []Status {
	var out []Status
	for _, s := range Statuses {
		if !Reachable(from, s) {
			out = append(out, s)
		}
	}
	return out
}

// Terminal reports whether s is COMPLETED or CANCELLED.
func (s Status) Terminal() bool { return s == Completed || s == Cancelled }

// Outcomes an order_events row records, as the contract spells them; the
// scenario names the ones it can predict.
const (
	OutcomeApplied = "applied"
	OutcomeStale   = "stale"
	OutcomeIllegal = "illegal"
)

// MaxOrderIDLen is the longest order ID the contract accepts.
const MaxOrderIDLen = 64

var orderIDPattern = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,64}$`)

// validOrderID reports whether id follows the contract's order ID rule:
// 1-64 characters of [A-Za-z0-9_.:-].
func validOrderID(id string) bool { return orderIDPattern.MatchString(id) }

// Event is a valid event of a scenario, with the fields of the message
// contract; its JSON encoding is the message body.
type Event struct {
	EventID     string    `json:"event_id"`
	OrderID     string    `json:"order_id"`
	UserID      int64     `json:"user_id"`
	Status      Status    `json:"status"`
	Version     int64     `json:"version"`
	AmountCents int64     `json:"amount_cents"`
	OccurredAt  time.Time `json:"occurred_at"`
	ProducerID  string    `json:"producer_id,omitempty"`
	Seq         int64     `json:"seq,omitempty"`
}

// Key is a business key: (order_id, version).
type Key struct {
	OrderID string `json:"order_id"`
	Version int64  `json:"version"`
}

// String renders the key as "order_id@version".
func (k Key) String() string { return k.OrderID + "@" + strconv.FormatInt(k.Version, 10) }

// Key returns the event's business key.
func (e Event) Key() Key { return Key{OrderID: e.OrderID, Version: e.Version} }

// Content is what, besides the business key, makes two events the same
// event (docs/design.md §2.1): user_id, status, amount_cents and occurred_at.
// event_id, producer_id and seq are tracing metadata, not content.
type Content struct {
	UserID      int64     `json:"user_id"`
	Status      Status    `json:"status"`
	AmountCents int64     `json:"amount_cents"`
	OccurredAt  time.Time `json:"occurred_at"`
}

// Content returns the event's content.
func (e Event) Content() Content {
	return Content{UserID: e.UserID, Status: e.Status, AmountCents: e.AmountCents, OccurredAt: e.OccurredAt}
}
