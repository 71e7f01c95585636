package store

import (
	"context"
	"fmt"
	"time"
)

// Violation is one finding of Audit: an order whose rows break an invariant.
type Violation struct {
	OrderID string `json:"order_id"`
	// Check names the rule broken: duplicate_ledger_row, net_points,
	// purchase_rule, refund_user, order_row, unknown_outcome.
	Check  string `json:"check"`
	Detail string `json:"detail"`
}

// AuditFilter selects the orders Audit checks; zero fields select all.
type AuditFilter struct {
	// OrderID checks one order.
	OrderID string
	// Since checks the orders updated at or after it.
	Since time.Time
	// Settle skips orders updated less than this long ago: their ledger
	// rows may still be on their way (the workflow writes them right after
	// the state change).
	Settle time.Duration
	// Batch is how many orders one round reads (default 1000).
	Batch int
}

// AuditStats says how much Audit read.
type AuditStats struct {
	Orders  int64 `json:"orders"`
	Batches int64 `json:"batches"`
}

// orderRowDue is the net points an orders row o says the order is due: its
// purchase once purchased, less the refund once refunded. The audit checks
// the ledger against it for an order whose decisions were pruned.
const orderRowDue = `(CASE WHEN o.purchased THEN o.purchase_points ELSE 0 END - CASE WHEN o.refunded THEN o.purchase_points ELSE 0 END)`

// auditChecks are the per-batch queries: each returns (order_id, detail)
// for the orders of the batch (the ? list) that break its rule.
var auditChecks = []struct {
	name, sql string
	batchArgs int // how many times the batch list is passed
}{
	{"duplicate_ledger_row", `SELECT order_id, kind || ': ' || count(*) || ' rows' FROM points_ledger
		WHERE order_id IN ? GROUP BY order_id, kind HAVING count(*) > 1`, 1},
	{"net_points", `WITH due AS (
			SELECT order_id, sum(points_delta) AS due FROM order_events
			WHERE order_id IN ? AND outcome = 'applied' AND points_kind <> '' GROUP BY order_id),
		led AS (SELECT order_id, sum(points) AS net FROM points_ledger WHERE order_id IN ? GROUP BY order_id)
		SELECT o.order_id, 'ledger nets ' || coalesce(led.net, 0) || ' points, ' ||
			CASE WHEN o.events_pruned_at IS NULL THEN 'the recorded decisions ' ELSE 'the order row (events pruned) ' END ||
			CASE WHEN o.events_pruned_at IS NULL THEN coalesce(due.due, 0) ELSE ` + orderRowDue + ` END
		FROM orders o LEFT JOIN due USING (order_id) LEFT JOIN led USING (order_id)
		WHERE o.order_id IN ? AND coalesce(led.net, 0) <>
			CASE WHEN o.events_pruned_at IS NULL THEN coalesce(due.due, 0) ELSE ` + orderRowDue + ` END`, 3},
	{"purchase_rule", `SELECT e.order_id, 'v' || e.version || ' ' || e.points_kind || ' of ' || e.points_delta ||
			' points for ' || e.amount_cents || ' cents'
		FROM order_events e WHERE e.order_id IN ? AND e.outcome = 'applied' AND (
			(e.points_kind = 'purchase' AND e.points_delta <> e.amount_cents / 100) OR
			(e.points_kind = 'refund' AND e.points_delta <> -(SELECT p.points_delta FROM order_events p
				WHERE p.order_id = e.order_id AND p.points_kind = 'purchase' AND p.outcome = 'applied' LIMIT 1)))`, 1},
	{"refund_user", `SELECT r.order_id, 'refund on user ' || r.user_id || ', purchase on user ' || p.user_id
		FROM points_ledger r JOIN points_ledger p ON p.order_id = r.order_id AND p.kind = 'purchase'
		WHERE r.order_id IN ? AND r.kind = 'refund' AND r.user_id <> p.user_id`, 1},
	{"order_row", `SELECT o.order_id, 'order is ' || o.status || ' v' || o.version || ' user ' || o.user_id || ' ' ||
			o.amount_cents || '¢; its highest applied event ' ||
			coalesce(h.status || ' v' || h.version || ' user ' || h.user_id || ' ' || h.amount_cents || '¢', 'is missing')
		FROM orders o LEFT JOIN (
			SELECT DISTINCT ON (order_id) order_id, version, status, user_id, amount_cents FROM order_events
			WHERE order_id IN ? AND outcome = 'applied' ORDER BY order_id, version DESC) h USING (order_id)
		WHERE o.order_id IN ? AND ((h.order_id IS NULL AND o.events_pruned_at IS NULL) OR o.version <> h.version OR
			o.status <> h.status OR o.user_id <> h.user_id OR o.amount_cents <> h.amount_cents)`, 2},
	{"unknown_outcome", `SELECT order_id, 'v' || version || ' has outcome ' || quote_literal(outcome) FROM order_events
		WHERE order_id IN ? AND outcome NOT IN ('applied', 'stale', 'duplicate', 'conflict', 'illegal')`, 1},
}

// Audit checks the invariants on the live tables, order by order, in
// batches (bounded memory whatever the tables' size), and calls report for
// every violation: at most one ledger row per (order_id, kind); each order's
// ledger nets what its recorded decisions moved; each recorded purchase is
// amount_cents/100 and each refund takes back the purchase; the refund row
// is on the purchaser; the order row equals its highest applied event;
// every order_events row has a known outcome. For an order whose
// order_events rows were pruned, the ledger is checked against the orders
// row's points due instead, and a missing highest applied event is no
// violation.
func (s *Store) Audit(ctx context.Context, f AuditFilter, report func(Violation)) (AuditStats, error) {
	batch := f.Batch
	if batch <= 0 {
		batch = 1000
	}
	var st AuditStats
	db := s.db.WithContext(ctx)
	after := ""
	for {
		var ids []string
		q := db.Table("orders").Select("order_id").Where("order_id > ?", after).Order("order_id").Limit(batch)
		if f.OrderID != "" {
			q = q.Where("order_id = ?", f.OrderID)
		}
		if !f.Since.IsZero() {
			q = q.Where("updated_at >= ?", f.Since)
		}
		if f.Settle > 0 {
			q = q.Where("updated_at < now() - ?::interval", fmt.Sprintf("%d milliseconds", f.Settle.Milliseconds()))
		}
		if err := q.Pluck("order_id", &ids).Error; err != nil {
			return st, fmt.Errorf("audit: list orders: %w", err)
		}
		if len(ids) == 0 {
			return st, nil
		}
		st.Batches++
		st.Orders += int64(len(ids))
		for _, c := range auditChecks {
			args := make([]any, c.batchArgs)
			for i := range args {
				args[i] = ids
			}
			var found []struct {
				OrderID string
				Detail  string
			}
			rows, err := db.Raw(c.sql, args...).Rows()
			if err != nil {
				return st, fmt.Errorf("audit %s: %w", c.name, err)
			}
			for rows.Next() {
				var v struct {
					OrderID string
					Detail  string
				}
				if err := rows.Scan(&v.OrderID, &v.Detail); err != nil {
					rows.Close()
					return st, fmt.Errorf("audit %s: %w", c.name, err)
				}
				found = append(found, v)
			}
			err = rows.Err()
			rows.Close()
			if err != nil {
				return st, fmt.Errorf("audit %s: %w", c.name, err)
			}
			for _, v := range found {
				report(Violation{OrderID: v.OrderID, Check: c.name, Detail: v.Detail})
			}
		}
		after = ids[len(ids)-1]
		if err := ctx.Err(); err != nil {
			return st, err
		}
	}
}
