package check

import (
	"fmt"
	"sort"

	"github.com/orderflow/orderflow/scenario"
)

// This file is the checker's own reading of the points rule of docs/design.md. It
// shares no code with fsm, the package that applies the rule in the
// pipeline: a wrong rule there must not be copied into the verdict.

// The contract's words, as the tables store them.
const (
	statusCancelled = "CANCELLED"

	outcomeApplied = "applied"
	outcomeStale   = "stale"

	// KindPurchase and KindRefund are the kinds of points_ledger rows.
	KindPurchase = "purchase"
	KindRefund   = "refund"
)

// statusOrder and outcomeOrder order the report's summary.
var (
	statusOrder  = []string{"CREATED", "PAID", "SHIPPED", "DELIVERED", "COMPLETED", "CANCELLED"}
	outcomeOrder = []string{"applied", "stale", "duplicate", "conflict", "illegal"}
)

// PurchasePoints is the purchase rule: one point per whole 100 cents of the
// order total (integer division).
func PurchasePoints(amountCents int64) int64 { return amountCents / 100 }

// earnsPurchase reports whether an order applied at status has been paid
// for: the first time an order is applied at PAID, SHIPPED, DELIVERED or
// COMPLETED, its user earns the purchase points.
func earnsPurchase(status string) bool {
	switch status {
	case "PAID", "SHIPPED", "DELIVERED", "COMPLETED":
		return true
	}
	return false
}

// LedgerRow is a points_ledger row as the rule predicts it.
type LedgerRow struct {
	Kind   string `json:"kind"`
	UserID int64  `json:"user_id"`
	// Points is signed: positive for a purchase, negative for a refund.
	Points int64 `json:"points"`
}

// Due is the points rule applied to one order of a scenario.
type Due struct {
	OrderID string `json:"order_id"`
	// Rows are the ledger rows the order holds: the purchase, then the
	// refund.
	Rows []LedgerRow `json:"rows,omitempty"`
	// Optional is true when the ledger holds either all of Rows or none:
	// an order cancelled after a paid event was published ends with a
	// purchase and its refund if a paid event was applied before the
	// cancellation, and with nothing if the cancellation came first (the
	// paid events are then stale).
	Optional bool `json:"optional,omitempty"`
	// Problem says why the scenario does not determine the order's points
	// (its paid events disagree on the user or the amount); empty when it
	// does.
	Problem string `json:"problem,omitempty"`
}

// Net is the order's net points: the sum of its rows (0 for an order
// cancelled after payment, whichever way it ended).
func (d Due) Net() int64 {
	var n int64
	for _, r := range d.Rows {
		n += r.Points
	}
	return n
}

// PointsDue applies the points rule to every order of exp, from the events
// that may be applied: the published keys of the phases exp says were
// published, except those whose expected outcome is stale or illegal, and
// the copies of first-phase conflicts (either copy may be recorded).
//
//   - Purchase: the first event applied at a paid status earns its user
//     amount_cents / 100 points. The scenario gives every paid event of an
//     order the same user and amount, so the first one is as good as any;
//     when they disagree, Due.Problem says so.
//   - Refund: an order cancelled after earning its purchase gives the same
//     points back, from the purchaser, whatever user or amount the
//     cancelling event carries.
func PointsDue(exp *scenario.Expected) map[string]Due {
	type paidEvent struct {
		user, amount int64
		key          scenario.Key
	}
	paid := map[string][]paidEvent{}
	consider := func(k scenario.Key, c scenario.Content) {
		if earnsPurchase(string(c.Status)) {
			paid[k.OrderID] = append(paid[k.OrderID], paidEvent{c.UserID, c.AmountCents, k})
		}
	}
	for _, k := range exp.Keys {
		if !exp.Published(k.Phase) || (k.Outcome != "" && k.Outcome != outcomeApplied) {
			continue
		}
		consider(k.Key(), k.Content)
	}
	for _, c := range exp.Conflicts {
		if max(c.Phase, 1) == 1 {
			consider(c.Key(), c.Copy)
		}
	}

	due := make(map[string]Due, len(exp.Orders))
	for _, o := range exp.Orders {
		d := Due{OrderID: o.OrderID}
		evs := paid[o.OrderID]
		if len(evs) == 0 {
			due[o.OrderID] = d
			continue
		}
		sort.Slice(evs, func(a, b int) bool { return evs[a].key.Version < evs[b].key.Version })
		first := evs[0]
		for _, e := range evs[1:] {
			if e.user != first.user || e.amount != first.amount {
				d.Problem = fmt.Sprintf("paid events %s (user %d, %d¢) and %s (user %d, %d¢) disagree, so the purchase depends on delivery order",
					first.key, first.user, first.amount, e.key, e.user, e.amount)
				break
			}
		}
		purchase := LedgerRow{Kind: KindPurchase, UserID: first.user, Points: PurchasePoints(first.amount)}
		switch {
		case earnsPurchase(string(o.Status)):
			d.Rows = []LedgerRow{purchase}
		case string(o.Status) == statusCancelled:
			d.Rows = []LedgerRow{purchase, {Kind: KindRefund, UserID: first.user, Points: -purchase.Points}}
			d.Optional = true
		default:
			if d.Problem == "" {
				d.Problem = fmt.Sprintf("paid event %s published, but the order is expected to end %s", first.key, o.Status)
			}
		}
		due[o.OrderID] = d
	}
	return due
}

// Balances sums the rows due per user: the net points each user of the
// scenario must hold (an optional purchase and its refund net 0 for the
// purchaser either way).
func Balances(due map[string]Due) map[int64]int64 {
	b := map[int64]int64{}
	for _, d := range due {
		for _, r := range d.Rows {
			b[r.UserID] += r.Points
		}
	}
	return b
}
