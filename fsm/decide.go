package fsm

import "fmt"

// Order is what orderflow knows about one order: its current snapshot and
// the points it has been awarded.
type Order struct {
	OrderID     string `json:"order_id"`
	UserID      int64  `json:"user_id"`
	Status      Status `json:"status"`
	Version     int64  `json:"version"`
	AmountCents int64  `json:"amount_cents"`
	// ContentHash is the Event.ContentHash of the event that set Version.
	ContentHash string `json:"content_hash"`
	// Purchased is true once purchase points are due for the order;
	// PurchasePoints is how many, and PurchaseUserID the user who earned
	// them: the user of the event that first applied the order at a paid
	// status. A refund takes the points back from that user, whichever user
	// the cancelling event names.
	Purchased      bool  `json:"purchased"`
	PurchasePoints int64 `json:"purchase_points"`
	PurchaseUserID int64 `json:"purchase_user_id,omitempty"`
	// Refunded is true once the purchase points were taken back.
	Refunded bool `json:"refunded"`
}

// Outcome is how an event was judged against the stored order.
type Outcome string

// The outcomes of Decide.
const (
	Applied   Outcome = "applied"
	Stale     Outcome = "stale"
	Duplicate Outcome = "duplicate"
	Conflict  Outcome = "conflict"
	Illegal   Outcome = "illegal"
)

// Outcomes lists every outcome.
var Outcomes = []Outcome{Applied, Stale, Duplicate, Conflict, Illegal}

// PointsKind is the kind of a points ledger row.
type PointsKind string

// Points effects. PointsNone means the event moves no points.
const (
	PointsNone PointsKind = ""
	Purchase   PointsKind = "purchase"
	Refund     PointsKind = "refund"
)

// Decision is the verdict on one event.
type Decision struct {
	Outcome Outcome `json:"outcome"`
	// Gap is true when the event was applied over at least one missing
	// version (e.version > o.version + 1, or > 1 for a new order).
	Gap bool `json:"gap"`
	// Points is the points effect of the event; PointsDelta its signed
	// amount (positive for a purchase, negative for a refund).
	Points      PointsKind `json:"points"`
	PointsDelta int64      `json:"points_delta"`
	// Reason explains a stale, conflict or illegal outcome.
	Reason string `json:"reason,omitempty"`
	// Next is the order after the event (equal to the stored order unless
	// the outcome is Applied).
	Next Order `json:"next"`
}

// PurchasePointsFor is the purchase rule: one point per whole 100 cents.
func PurchasePointsFor(amountCents int64) int64 { return amountCents / 100 }

// Decide judges event e against the stored order o (nil when the order is
// unknown), following the decision table of docs/design.md. The event must be
// valid (see Event.Validate) and belong to o's order. Decide is pure.
func Decide(o *Order, e Event) Decision {
	hash := e.ContentHash()
	if o == nil {
		next := Order{OrderID: e.OrderID}
		return apply(next, 0, e, hash)
	}
	cur := *o
	switch {
	case e.Version < cur.Version:
		return Decision{Outcome: Stale, Next: cur,
			Reason: fmt.Sprintf("version %d is older than the order's version %d", e.Version, cur.Version)}
	case e.Version == cur.Version && hash == cur.ContentHash:
		return Decision{Outcome: Duplicate, Next: cur}
	case e.Version == cur.Version:
		return Decision{Outcome: Conflict, Next: cur,
			Reason: fmt.Sprintf("conflict: version %d was already recorded with different content", e.Version)}
	case !CanReach(cur.Status, e.Status):
		return Decision{Outcome: Illegal, Next: cur,
			Reason: fmt.Sprintf("illegal transition %s -> %s", cur.Status, e.Status)}
	}
	return apply(cur, cur.Version, e, hash)
}

func apply(next Order, prevVersion int64, e Event, hash string) Decision {
	d := Decision{Outcome: Applied, Gap: e.Version > prevVersion+1}
	next.UserID = e.UserID
	next.Status = e.Status
	next.Version = e.Version
	next.AmountCents = e.AmountCents
	next.ContentHash = hash
	switch {
	case e.Status.EarnsPurchase() && !next.Purchased:
		next.Purchased = true
		next.PurchasePoints = PurchasePointsFor(e.AmountCents)
		next.PurchaseUserID = e.UserID
		d.Points, d.PointsDelta = Purchase, next.PurchasePoints
	case e.Status == Cancelled && next.Purchased && !next.Refunded:
		next.Refunded = true
		d.Points, d.PointsDelta = Refund, -next.PurchasePoints
	}
	d.Next = next
	return d
}

// NetPoints is the order's net points: its purchase points, less the refund
// once cancelled after payment.
func (o Order) NetPoints() int64 {
	var n int64
	for _, p := range o.PointsDue() {
		n += p.Points
	}
	return n
}

// PointsEffect is one points ledger row an order is due.
type PointsEffect struct {
	Kind PointsKind
	// Points is signed: positive for a purchase, negative for a refund.
	Points int64
}

// PointsDue lists the points ledger rows the order is due, in the order
// they are written: the purchase once paid, then the refund once cancelled
// after payment.
func (o Order) PointsDue() []PointsEffect {
	var due []PointsEffect
	if o.Purchased {
		due = append(due, PointsEffect{Purchase, o.PurchasePoints})
	}
	if o.Refunded {
		due = append(due, PointsEffect{Refund, -o.PurchasePoints})
	}
	return due
}

// PointsUser is the user whose balance a points row of kind moves: the
// purchaser for both rows (PurchaseUserID, or UserID for an order stored
// before the purchaser was recorded).
func (o Order) PointsUser() int64 {
	if o.PurchaseUserID > 0 {
		return o.PurchaseUserID
	}
	return o.UserID
}
