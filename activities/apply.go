package activities

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"gorm.io/gorm"

	"github.com/orderflow/orderflow/fsm"
)

// LoadOrder returns the stored order (Found false when it has no row yet)
// and the content hash of every business key recorded for it in
// order_events, for a workflow run that rehydrates its state.
func (a *Activities) LoadOrder(ctx context.Context, orderID string) (LoadOrderResult, error) {
	if !fsm.ValidOrderID(orderID) {
		return LoadOrderResult{}, invalid(ErrTypeInvalidInput,
			fmt.Errorf("order_id %q must be 1-64 characters of [A-Za-z0-9_.:-]", orderID))
	}
	res := LoadOrderResult{Versions: map[int64]string{}}
	err := a.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		o, found, err := loadOrder(tx, orderID)
		if err != nil {
			return err
		}
		res.Found, res.Order = found, o
		rows, err := tx.Raw(`SELECT version, content_hash FROM order_events WHERE order_id = ?`, orderID).Rows()
		if err != nil {
			return fmt.Errorf("load order_events of %s: %w", orderID, err)
		}
		defer rows.Close()
		for rows.Next() {
			var v int64
			var h string
			if err := rows.Scan(&v, &h); err != nil {
				return fmt.Errorf("scan order_events of %s: %w", orderID, err)
			}
			res.Versions[v] = h
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read order_events of %s: %w", orderID, err)
		}
		return nil
	}, readOnly)
	if err != nil {
		return LoadOrderResult{}, fmt.Errorf("load order %s: %w", orderID, err)
	}
	return res, nil
}

// readOnly reads the order and its events from one snapshot.
var readOnly = &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true}

func loadOrder(tx *gorm.DB, orderID string) (fsm.Order, bool, error) {
	o := fsm.Order{OrderID: orderID}
	var status string
	err := tx.Raw(`SELECT user_id, status, version, amount_cents, content_hash, purchased, purchase_points, refunded
		FROM orders WHERE order_id = ?`, orderID).Row().
		Scan(&o.UserID, &status, &o.Version, &o.AmountCents, &o.ContentHash, &o.Purchased, &o.PurchasePoints, &o.Refunded)
	if errors.Is(err, sql.ErrNoRows) {
		return fsm.Order{}, false, nil
	}
	if err != nil {
		return fsm.Order{}, false, fmt.Errorf("load orders row %s: %w", orderID, err)
	}
	o.Status = fsm.Status(status)
	return o, true, nil
}

// ApplyEvent applies one event to the database, exactly once per business
// key (order_id, version), and returns the authoritative decision.
//
// An invalid event is a non-retryable application error of type
// ErrTypeInvalidEvent and writes nothing. Otherwise, in one transaction:
//
//  1. orderflow_lock_and_read (migration 00002), in one round trip, takes
//     pg_advisory_xact_lock(hashtextextended(order_id, 0)), which serializes
//     every ApplyEvent of the order, including the first events of an order
//     that has no row yet (two of them must not both "create" it); then,
//     with a snapshot taken after the lock was granted, it reads the order
//     and the order_events row of the business key. The rest of the
//     transaction runs under that lock.
//  2. Row present, same content hash: a repeat (redelivery, or a retry after
//     a commit whose completion was lost). times_seen and last_seen_at are
//     incremented and the stored decision is returned with Repeat true, its
//     Next being the current order. Nothing else changes.
//  3. Row present, different content: a conflict. The row's conflicts
//     counter is incremented (it counts conflicting deliveries, retries of
//     the same one included), the event is parked in dead_letters (reason
//     "conflict: ...", fingerprint-deduplicated, so a retry adds no row) and
//     the outcome is Conflict. The order is unchanged.
//  4. Row absent: fsm.Decide judges the event against the stored order. An
//     applied event upserts the order with the version guard evaluated
//     inside the write (ON CONFLICT ... DO UPDATE ... WHERE orders.version <
//     EXCLUDED.version) and inserts the order_events row in the same
//     statement, which must affect exactly one row; the points due
//     (purchased, purchase_points, refunded) change in the same write. Any
//     other outcome inserts the order_events row alone, so the table is a
//     complete audit. The points themselves are AwardPoints' job: the
//     decision says which row is due.
//
// Database errors are returned wrapped and are retryable.
func (a *Activities) ApplyEvent(ctx context.Context, in ApplyEventInput) (ApplyEventResult, error) {
	e := in.Event
	if err := e.Validate(); err != nil {
		return ApplyEventResult{}, invalid(ErrTypeInvalidEvent, err)
	}
	hash := e.ContentHash()
	var res ApplyEventResult
	err := a.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var err error
		res, err = a.applyTx(tx, e, hash)
		return err
	})
	if err != nil {
		return ApplyEventResult{}, fmt.Errorf("apply event %s: %w", e.Key(), err)
	}
	switch {
	case res.Repeat:
		a.observeOutcome(fsm.Duplicate)
	default:
		a.observeOutcome(res.Decision.Outcome)
	}
	return res, nil
}

// storedRow is the order and the order_events row of one business key, as
// orderflow_lock_and_read returns them (NULL when absent).
type storedRow struct {
	order   fsm.Order
	found   bool
	evHash  *string
	outcome *string
	gap     *bool
	kind    *string
	delta   *int64
	reason  *string
}

// lockAndRead takes the order's transaction-scoped advisory lock, then reads
// the order and the event row of the key with a snapshot taken after the
// lock was granted (see migration 00002).
func lockAndRead(tx *gorm.DB, k fsm.Key) (storedRow, error) {
	var (
		r                               storedRow
		userID, version, amount, points *int64
		status, orderHash               *string
		purchased, refunded             *bool
	)
	err := tx.Raw(`SELECT * FROM orderflow_lock_and_read(?, ?)`, k.OrderID, k.Version).Row().
		Scan(&userID, &status, &version, &amount, &orderHash, &purchased, &points, &refunded,
			&r.evHash, &r.outcome, &r.gap, &r.kind, &r.delta, &r.reason)
	if err != nil {
		return storedRow{}, fmt.Errorf("lock and read order: %w", err)
	}
	if version != nil {
		r.found = true
		r.order = fsm.Order{
			OrderID: k.OrderID, UserID: *userID, Status: fsm.Status(*status), Version: *version,
			AmountCents: *amount, ContentHash: *orderHash,
			Purchased: *purchased, PurchasePoints: *points, Refunded: *refunded,
		}
	}
	return r, nil
}

// insertEventSQL records a business key with its decision.
const insertEventSQL = `INSERT INTO order_events (order_id, version, event_id, user_id, status,
	amount_cents, content_hash, outcome, gap, points_kind, points_delta, reason, occurred_at)`

// applySQL writes an applied event in one statement: the order upsert with
// the version guard inside the write, and the order_events row, which is
// inserted only if the guard let the upsert through (so the statement
// affects one row, or none when the guard refused).
const applySQL = `WITH up AS (
	INSERT INTO orders (order_id, user_id, status, version, amount_cents, content_hash,
		purchased, purchase_points, refunded)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (order_id) DO UPDATE SET
		user_id = EXCLUDED.user_id, status = EXCLUDED.status, version = EXCLUDED.version,
		amount_cents = EXCLUDED.amount_cents, content_hash = EXCLUDED.content_hash,
		purchased = EXCLUDED.purchased, purchase_points = EXCLUDED.purchase_points,
		refunded = EXCLUDED.refunded, updated_at = now()
	WHERE orders.version < EXCLUDED.version
	RETURNING 1)
` + insertEventSQL + `
SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? FROM up`

func (a *Activities) applyTx(tx *gorm.DB, e fsm.Event, hash string) (ApplyEventResult, error) {
	st, err := lockAndRead(tx, e.Key())
	if err != nil {
		return ApplyEventResult{}, err
	}

	if st.evHash != nil && *st.evHash == hash {
		if err := tx.Exec(`UPDATE order_events SET times_seen = times_seen + 1, last_seen_at = now()
			WHERE order_id = ? AND version = ?`, e.OrderID, e.Version).Error; err != nil {
			return ApplyEventResult{}, fmt.Errorf("count repeat: %w", err)
		}
		return ApplyEventResult{Repeat: true, Decision: fsm.Decision{
			Outcome:     fsm.Outcome(*st.outcome),
			Gap:         *st.gap,
			Points:      fsm.PointsKind(*st.kind),
			PointsDelta: *st.delta,
			Reason:      *st.reason,
			Next:        st.order,
		}}, nil
	}
	if st.evHash != nil {
		if err := tx.Exec(`UPDATE order_events SET conflicts = conflicts + 1
			WHERE order_id = ? AND version = ?`, e.OrderID, e.Version).Error; err != nil {
			return ApplyEventResult{}, fmt.Errorf("count conflict: %w", err)
		}
		reason := fmt.Sprintf("conflict: %s was recorded with content %s; this delivery has content %s",
			e.Key(), short(*st.evHash), short(hash))
		return a.conflict(tx, e, st.order, reason)
	}

	var stored *fsm.Order
	if st.found {
		stored = &st.order
	}
	d := fsm.Decide(stored, e)
	eventArgs := []any{e.OrderID, e.Version, cleanText(e.EventID, 0), e.UserID, string(e.Status), e.AmountCents,
		hash, string(d.Outcome), d.Gap, string(d.Points), d.PointsDelta, d.Reason, e.OccurredAt}
	switch d.Outcome {
	case fsm.Conflict:
		// The order holds this version but order_events does not: the row
		// was written outside ApplyEvent. Park the event; do not record
		// its content as the business key's.
		return a.conflict(tx, e, st.order, d.Reason)
	case fsm.Applied:
		n := d.Next
		args := append([]any{n.OrderID, n.UserID, string(n.Status), n.Version, n.AmountCents, n.ContentHash,
			n.Purchased, n.PurchasePoints, n.Refunded}, eventArgs...)
		w := tx.Exec(applySQL, args...)
		if w.Error != nil {
			return ApplyEventResult{}, fmt.Errorf("write order and event: %w", w.Error)
		}
		if w.RowsAffected != 1 {
			return ApplyEventResult{}, fmt.Errorf("write order: version guard refused version %d (%d rows affected)",
				n.Version, w.RowsAffected)
		}
	default:
		if err := tx.Exec(insertEventSQL+` VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, eventArgs...).Error; err != nil {
			return ApplyEventResult{}, fmt.Errorf("record event: %w", err)
		}
	}
	return ApplyEventResult{Decision: d}, nil
}

// conflict parks e in dead_letters inside tx and returns the Conflict
// decision, leaving the order unchanged.
func (a *Activities) conflict(tx *gorm.DB, e fsm.Event, cur fsm.Order, reason string) (ApplyEventResult, error) {
	body, err := json.Marshal(e)
	if err != nil {
		return ApplyEventResult{}, fmt.Errorf("encode conflicting event: %w", err)
	}
	if _, err := parkDeadLetter(tx, DeadLetter{
		Topic: a.Topic, Keys: e.OrderID, Tags: string(e.Status), Body: body, Reason: reason,
	}); err != nil {
		return ApplyEventResult{}, err
	}
	return ApplyEventResult{Decision: fsm.Decision{Outcome: fsm.Conflict, Reason: reason, Next: cur}}, nil
}

func short(hash string) string {
	if len(hash) > 12 {
		return hash[:12]
	}
	return hash
}
