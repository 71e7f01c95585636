package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"gorm.io/gorm"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/wire"
)

// Loaded is an order as stored, for a workflow run that rehydrates its
// state.
type Loaded struct {
	// Found is false when the order has no row yet.
	Found bool      `json:"found"`
	Order fsm.Order `json:"order"`
	// Versions maps every business key version recorded in order_events
	// to its content hash, so the workflow recognises duplicates.
	Versions map[int64]string `json:"versions"`
	// Awarded lists the kinds of the order's points_ledger rows.
	Awarded []fsm.PointsKind `json:"awarded,omitempty"`
}

// LoadOrder returns the stored order (Found false when it has no row yet),
// the content hash of every business key recorded for it in order_events
// and the kinds of its points_ledger rows: one statement, and so one
// snapshot and one round trip.
func (s *Store) LoadOrder(ctx context.Context, orderID string) (Loaded, error) {
	if err := fsm.CheckOrderID(orderID); err != nil {
		return Loaded{}, invalid(err)
	}
	var (
		o               nullableOrder
		versions, kinds []byte
	)
	err := s.db.WithContext(ctx).Raw(`SELECT `+orderColumnsSQL+`,
			(SELECT json_object_agg(version, content_hash) FROM order_events WHERE order_id = k.order_id),
			(SELECT json_agg(kind ORDER BY kind DESC) FROM points_ledger WHERE order_id = k.order_id)
		FROM (SELECT ?::text AS order_id) AS k
		LEFT JOIN orders AS o ON o.order_id = k.order_id`, orderID).Row().
		Scan(append(o.dest(), &versions, &kinds)...)
	if err != nil {
		return Loaded{}, fmt.Errorf("load order %s: %w", orderID, err)
	}
	res := Loaded{Versions: map[int64]string{}}
	res.Order, res.Found = o.order(orderID)
	if versions != nil {
		if err := json.Unmarshal(versions, &res.Versions); err != nil {
			return Loaded{}, fmt.Errorf("load order %s: order_events: %w", orderID, err)
		}
	}
	if kinds != nil {
		if err := json.Unmarshal(kinds, &res.Awarded); err != nil {
			return Loaded{}, fmt.Errorf("load order %s: points_ledger: %w", orderID, err)
		}
	}
	return res, nil
}

// orderColumnsSQL selects the columns of orders AS o that nullableOrder
// scans, in its order.
const orderColumnsSQL = `o.user_id, o.status, o.version, o.amount_cents, o.content_hash,
	o.purchased, o.purchase_points, o.purchase_user_id, o.refunded`

// nullableOrder scans the orders columns of a LEFT JOIN, which are all
// NULL when the order has no row: user_id, status, version, amount_cents,
// content_hash, purchased, purchase_points, purchase_user_id, refunded.
type nullableOrder struct {
	userID, version, amount, points *int64
	purchaser                       sql.NullInt64
	status, hash                    *string
	purchased, refunded             *bool
}

// dest is the scan destinations of the nine columns, in their order.
func (n *nullableOrder) dest() []any {
	return []any{&n.userID, &n.status, &n.version, &n.amount, &n.hash, &n.purchased, &n.points, &n.purchaser, &n.refunded}
}

// order is the scanned order of orderID; found is false when it had no row.
func (n *nullableOrder) order(orderID string) (o fsm.Order, found bool) {
	if n.version == nil {
		return fsm.Order{}, false
	}
	return fsm.Order{
		OrderID: orderID, UserID: *n.userID, Status: fsm.Status(*n.status), Version: *n.version,
		AmountCents: *n.amount, ContentHash: *n.hash,
		Purchased: *n.purchased, PurchasePoints: *n.points, PurchaseUserID: n.purchaser.Int64, Refunded: *n.refunded,
	}, true
}

// Recorded is the ledger's record of one business key: the content hash of
// the event recorded under it and the first decision taken on it.
type Recorded struct {
	ContentHash string      `json:"content_hash"`
	Outcome     fsm.Outcome `json:"outcome"`
}

// RecordedEvent returns the order_events record of the business key k, one
// primary-key lookup; found is false when the key was never recorded (or
// its row was pruned). The bridge's duplicate filter asks it whether a
// message's event is already in the ledger with the same content.
func (s *Store) RecordedEvent(ctx context.Context, k fsm.Key) (r Recorded, found bool, err error) {
	if err := fsm.CheckOrderID(k.OrderID); err != nil {
		return Recorded{}, false, invalid(err)
	}
	var outcome string
	err = s.db.WithContext(ctx).Raw(`SELECT content_hash, outcome FROM order_events WHERE order_id = ? AND version = ?`,
		k.OrderID, k.Version).Row().Scan(&r.ContentHash, &outcome)
	if errors.Is(err, sql.ErrNoRows) {
		return Recorded{}, false, nil
	}
	if err != nil {
		return Recorded{}, false, fmt.Errorf("read order_events %s: %w", k, err)
	}
	r.Outcome = fsm.Outcome(outcome)
	return r, true, nil
}

// readOnly reads from one snapshot.
var readOnly = &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true}

func loadOrder(tx *gorm.DB, orderID string) (fsm.Order, bool, error) {
	var o nullableOrder
	err := tx.Raw(`SELECT `+orderColumnsSQL+` FROM orders AS o WHERE o.order_id = ?`, orderID).Row().Scan(o.dest()...)
	if errors.Is(err, sql.ErrNoRows) {
		return fsm.Order{}, false, nil
	}
	if err != nil {
		return fsm.Order{}, false, fmt.Errorf("load orders row %s: %w", orderID, err)
	}
	order, found := o.order(orderID)
	return order, found, nil
}

// maxApplyAttempts bounds how often ApplyEvent re-reads and re-decides when
// concurrent writers to the same order keep beating it; past that it returns
// a retryable error. OrderWorkflow serializes an order's events, so in
// practice the first attempt wins.
const maxApplyAttempts = 50

// Applied is the authoritative decision on one event, taken inside the
// database write. A repeat of the same business key returns the first
// outcome.
type Applied struct {
	Decision fsm.Decision `json:"decision"`
	// Repeat is true when the business key was already recorded
	// (the order_events row existed; its times-seen count was increased).
	Repeat bool `json:"repeat"`
}

// Known is what a caller knows of an order's row, to spare ApplyKnown
// the read: Found is false when it knows the order has no row yet, and
// Order is the row as it knows it.
type Known struct {
	Found bool      `json:"found"`
	Order fsm.Order `json:"order"`
}

// ApplyEvent applies one event to the database, exactly once per business
// key (order_id, version), and returns the authoritative decision. src is
// the message that carried the event, as received; a conflicting event is
// parked with it (an empty src parks the event re-encoded).
//
// When src names the message's queue (src.Queue), the statement that
// writes the event's effect (the decision, the repeat's count, the parked
// conflict) also records the message's receipt, so that the two commit
// together: the database then proves that the message need not be
// delivered again after a restore (RecoveryPoints). An invalid event is
// refused with an error wrapping ErrInvalid and fsm.ErrInvalidEvent, and
// writes nothing but that receipt. Otherwise ApplyEvent reads, decides
// and writes with optimistic concurrency, each write being a single
// statement and so its own transaction, so the business-key record always
// commits together with the business write:
//
//  1. Read the order and the order_events row of the business key.
//  2. Row present, same content hash: a repeat (redelivery, or a retry after
//     a commit whose completion was lost). times_seen and last_seen_at are
//     incremented and the stored decision is returned with Repeat true, its
//     Next being the order as read. Nothing else changes.
//  3. Row present, different content: a conflict. In one transaction, the
//     row's conflicts counter is incremented (it counts conflicting
//     deliveries, retries of the same one included) and the event is parked
//     in dead_letters (reason "conflict: ...", fingerprint-deduplicated, so
//     a retry adds no row). The outcome is Conflict; the order is unchanged.
//  4. Row absent: fsm.Decide judges the event against the order as read,
//     and one statement writes the decision as a compare-and-set on that
//     order: every column the decision depends on must still hold what
//     was read (for an order read as absent: no row), or the statement
//     affects no row. An applied event updates the order (or inserts it)
//     and inserts the order_events row; any other outcome inserts the
//     order_events row alone, so the table is a complete audit.
//  5. When the compare-and-set affects no row (a concurrent writer created
//     or moved the order since the read: two first events of a new order,
//     say), or the business key was recorded concurrently (unique
//     violation on order_events, which rolls the whole statement back),
//     go back to 1.
//
// The points due (purchased, purchase_points, refunded) change in the same
// write as the state; the points ledger row is AwardPoints' job. Database
// errors are returned wrapped and are retryable.
func (s *Store) ApplyEvent(ctx context.Context, e fsm.Event, src wire.Envelope) (Applied, error) {
	return s.apply(ctx, e, src, nil)
}

// ApplyKnown is ApplyEvent for a caller that knows the order's row and
// believes the event's business key unrecorded (a workflow that has
// handled the order's earlier events): the first round skips step 1 and
// decides against known, in one round trip. The write's compare-and-set
// is the same, so a known row that differs from the stored one (a restored
// backup, a concurrent writer) makes it affect no row, and ApplyKnown goes
// on as ApplyEvent from step 1: known saves a read, and never decides
// against the database. So does a business key already recorded.
func (s *Store) ApplyKnown(ctx context.Context, e fsm.Event, src wire.Envelope, known Known) (Applied, error) {
	if known.Found {
		known.Order.OrderID = e.OrderID
	}
	return s.apply(ctx, e, src, &known)
}

func (s *Store) apply(ctx context.Context, e fsm.Event, src wire.Envelope, known *Known) (Applied, error) {
	if err := e.Validate(); err != nil {
		// The event can have no effect: its message is settled.
		if rerr := s.receipt(ctx, src); rerr != nil {
			return Applied{}, rerr
		}
		return Applied{}, invalid(err)
	}
	hash := e.ContentHash()
	db := s.db.WithContext(ctx)
	for attempt := 1; ; attempt++ {
		res, again, err := applyOnce(db, e, hash, src, known)
		if err != nil {
			return Applied{}, fmt.Errorf("apply event %s: %w", e.Key(), err)
		}
		if !again {
			return res, nil
		}
		known = nil // the database differs from what the caller knew: read it
		if attempt == maxApplyAttempts {
			return Applied{}, fmt.Errorf("apply event %s: order changed concurrently %d times in a row", e.Key(), attempt)
		}
		if err := ctx.Err(); err != nil {
			return Applied{}, fmt.Errorf("apply event %s: %w", e.Key(), err)
		}
	}
}

// storedRow is the order and the order_events row of one business key (nil
// columns when absent).
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

func readStored(db *gorm.DB, k fsm.Key) (storedRow, error) {
	var (
		r storedRow
		o nullableOrder
	)
	err := db.Raw(`SELECT `+orderColumnsSQL+`,
			ev.content_hash, ev.outcome, ev.gap, ev.points_kind, ev.points_delta, ev.reason
		FROM (SELECT ?::text AS order_id, ?::bigint AS version) AS k
		LEFT JOIN orders AS o ON o.order_id = k.order_id
		LEFT JOIN order_events AS ev ON ev.order_id = k.order_id AND ev.version = k.version`,
		k.OrderID, k.Version).Row().
		Scan(append(o.dest(), &r.evHash, &r.outcome, &r.gap, &r.kind, &r.delta, &r.reason)...)
	if err != nil {
		return storedRow{}, fmt.Errorf("read order and event: %w", err)
	}
	r.order, r.found = o.order(k.OrderID)
	return r, nil
}

// insertEventSQL records a business key with its decision.
const insertEventSQL = `INSERT INTO order_events (order_id, version, event_id, user_id, status,
	amount_cents, content_hash, outcome, gap, points_kind, points_delta, reason, occurred_at, message_ids)`

// orderGuardSQL holds when the orders row (of the order_id argument)
// still has every column fsm.Decide reads as the decision saw it: the
// compare-and-set of a write (ten arguments, guardArgs).
const orderGuardSQL = `order_id = ? AND user_id = ? AND status = ? AND version = ? AND amount_cents = ?
	AND content_hash = ? AND purchased = ? AND purchase_points = ?
	AND purchase_user_id IS NOT DISTINCT FROM ?::bigint AND refunded = ?`

// guardArgs are orderGuardSQL's arguments for the order o.
func guardArgs(o fsm.Order) []any {
	return []any{o.OrderID, o.UserID, string(o.Status), o.Version, o.AmountCents, o.ContentHash,
		o.Purchased, o.PurchasePoints, nullID(o.PurchaseUserID), o.Refunded}
}

// orderArgs are the nine column values of the order o, in orderGuardSQL's
// order after order_id.
func orderArgs(o fsm.Order) []any { return guardArgs(o)[1:] }

// guardedSQL is a write of an event's decision whose data-modifying WITH
// item up returns a row only when the decision may be written: the
// message's receipt and the order_events row are inserted only then, in
// the same statement.
func guardedSQL(up string) string {
	return `WITH up AS (` + up + `),
` + receiptSQL(" FROM up") + `
` + insertEventSQL + `
SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ` + messageIDsSQL + ` FROM up`
}

// The statements that write a decision, each a compare-and-set on the
// order as the decision saw it.
var (
	// updateSQL: an applied event to an order that has a row.
	updateSQL = guardedSQL(`UPDATE orders SET user_id = ?, status = ?, version = ?, amount_cents = ?,
		content_hash = ?, purchased = ?, purchase_points = ?, purchase_user_id = ?, refunded = ?, updated_at = now()
	WHERE version < ?::bigint AND ` + orderGuardSQL + `
	RETURNING 1`)
	// insertSQL: an applied event to an order read as absent; a row
	// written since makes the insert a no-op.
	insertSQL = guardedSQL(`INSERT INTO orders (order_id, user_id, status, version, amount_cents, content_hash,
		purchased, purchase_points, purchase_user_id, refunded)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (order_id) DO NOTHING
	RETURNING 1`)
	// recordSQL and recordAbsentSQL: a decision that leaves the order as
	// it is (stale, illegal, ...), while its row is unchanged, or still
	// absent.
	recordSQL       = guardedSQL(`SELECT 1 WHERE EXISTS (SELECT 1 FROM orders WHERE ` + orderGuardSQL + `)`)
	recordAbsentSQL = guardedSQL(`SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM orders WHERE order_id = ?)`)
)

// applyOnce is one read-decide-write round of ApplyEvent; with known, the
// round decides against it instead of reading. again is true when the
// database differed from what the round decided on (a concurrent writer
// won, or known was not the stored row) and the round must be repeated.
func applyOnce(db *gorm.DB, e fsm.Event, hash string, src wire.Envelope, known *Known) (res Applied, again bool, err error) {
	var st storedRow
	if known != nil {
		st = storedRow{order: known.Order, found: known.Found}
	} else if st, err = readStored(db, e.Key()); err != nil {
		return Applied{}, false, err
	}

	if st.evHash != nil && *st.evHash == hash {
		// A new message counts; a retry of the same delivery does not.
		args := append(receiptArgs(src), src.MessageID, maxMessageIDs, src.MessageID, e.OrderID, e.Version, src.MessageID, src.MessageID)
		if err := db.Exec(`WITH `+receiptSQL("")+` UPDATE order_events SET times_seen = times_seen + 1, last_seen_at = now(),
				message_ids = CASE WHEN ?::text = '' OR cardinality(message_ids) >= ? THEN message_ids
					ELSE message_ids || ?::text END
			WHERE order_id = ? AND version = ? AND (?::text = '' OR NOT (?::text = ANY (message_ids)))`, args...).Error; err != nil {
			return Applied{}, false, fmt.Errorf("count repeat: %w", err)
		}
		return Applied{Repeat: true, Decision: fsm.Decision{
			Outcome:     fsm.Outcome(*st.outcome),
			Gap:         *st.gap,
			Points:      fsm.PointsKind(*st.kind),
			PointsDelta: *st.delta,
			Reason:      *st.reason,
			Next:        st.order,
		}}, false, nil
	}
	if st.evHash != nil {
		reason := fmt.Sprintf("conflict: %s was recorded with content %s; this delivery has content %s",
			e.Key(), short(*st.evHash), short(hash))
		res, err := conflict(db, e, st.order, src, reason, true)
		return res, false, err
	}

	var stored *fsm.Order
	if st.found {
		stored = &st.order
	}
	d := fsm.Decide(stored, e)
	eventArgs := []any{e.OrderID, e.Version, e.EventID, e.UserID, string(e.Status), e.AmountCents,
		hash, string(d.Outcome), d.Gap, string(d.Points), d.PointsDelta, d.Reason, e.OccurredAt, src.MessageID, src.MessageID}
	var w *gorm.DB
	switch {
	case d.Outcome == fsm.Conflict && known != nil:
		// Only the database may say that the order holds this version
		// without its order_events row.
		return Applied{}, true, nil
	case d.Outcome == fsm.Conflict:
		// The order holds this version but order_events does not: the row
		// was written outside ApplyEvent. Park the event; do not record
		// its content as the business key's.
		res, err := conflict(db, e, st.order, src, d.Reason, false)
		return res, false, err
	case d.Outcome == fsm.Applied && st.found:
		n := d.Next
		args := append(orderArgs(n), n.Version)
		args = append(append(args, guardArgs(st.order)...), receiptArgs(src)...)
		w = db.Exec(updateSQL, append(args, eventArgs...)...)
	case d.Outcome == fsm.Applied:
		args := append(guardArgs(d.Next), receiptArgs(src)...)
		w = db.Exec(insertSQL, append(args, eventArgs...)...)
	case st.found:
		args := append(guardArgs(st.order), receiptArgs(src)...)
		w = db.Exec(recordSQL, append(args, eventArgs...)...)
	default:
		args := append([]any{e.OrderID}, receiptArgs(src)...)
		w = db.Exec(recordAbsentSQL, append(args, eventArgs...)...)
	}
	switch {
	case pgCode(w.Error) == "23505": // unique_violation: the key was recorded concurrently
		return Applied{}, true, nil
	case w.Error != nil:
		return Applied{}, false, fmt.Errorf("record %s event: %w", d.Outcome, w.Error)
	case w.RowsAffected == 0: // the order is not as the decision saw it
		return Applied{}, true, nil
	}
	return Applied{Decision: d}, false, nil
}

// conflict parks the message src that carried e in dead_letters and returns
// the Conflict decision, leaving the order unchanged. When counted, the
// conflicts counter of the business key's order_events row is incremented
// in the same transaction.
func conflict(db *gorm.DB, e fsm.Event, cur fsm.Order, src wire.Envelope, reason string, counted bool) (Applied, error) {
	if src.Body == nil {
		// e came without its message: park it as a producer sends it
		// (ApplyEvent validated the rest).
		body, err := e.Body()
		if err != nil {
			return Applied{}, fmt.Errorf("encode conflicting event: %w", err)
		}
		src.Body, src.Keys, src.Tags = body, e.OrderID, string(e.Status)
	}
	err := db.Transaction(func(tx *gorm.DB) error {
		if src.Queue != nil && src.Queue.Valid() {
			if err := insertReceipts(tx, []wire.QueueOffset{*src.Queue}); err != nil {
				return err
			}
		}
		if counted {
			if err := tx.Exec(`UPDATE order_events SET conflicts = conflicts + 1
				WHERE order_id = ? AND version = ?`, e.OrderID, e.Version).Error; err != nil {
				return fmt.Errorf("count conflict: %w", err)
			}
		}
		_, err := parkDeadLetter(tx, wire.DeadLetter{Envelope: src, Reason: reason})
		return err
	})
	if err != nil {
		return Applied{}, err
	}
	return Applied{Decision: fsm.Decision{Outcome: fsm.Conflict, Reason: reason, Next: cur}}, nil
}

// maxMessageIDs is how many message IDs order_events keeps per business key
// to tell a new message from a retry (migration 00003).
const maxMessageIDs = 64

// messageIDsSQL is the message_ids value of a business key first recorded
// from a message: its ID, or none (two arguments, the ID twice).
const messageIDsSQL = `CASE WHEN ?::text = '' THEN '{}'::text[] ELSE ARRAY[?::text] END`

// receiptSQL is a data-modifying WITH item that records the receipt of
// the message that carried an event in the statement that writes the
// event's effect, so that the two commit together (recovery points,
// recovery.go): five arguments, receiptArgs. from is "" or " FROM up",
// to record it only when the CTE up wrote a row.
func receiptSQL(from string) string {
	return `receipt AS (INSERT INTO message_receipts (topic, broker, queue_id, queue_offset)
	SELECT ?::text, ?::text, ?::int, ?::bigint` + from + ` WHERE ?::bool ON CONFLICT DO NOTHING)`
}

// receiptArgs are receiptSQL's arguments for src: its queue and offset,
// and whether it names them (no receipt otherwise).
func receiptArgs(src wire.Envelope) []any {
	if src.Queue == nil || !src.Queue.Valid() {
		return []any{"", "", 0, int64(0), false}
	}
	q := src.Queue
	return []any{q.Topic, q.Broker, q.QueueID, q.Offset, true}
}

// nullID is a user ID column's value: NULL for 0 (none).
func nullID(id int64) sql.NullInt64 { return sql.NullInt64{Int64: id, Valid: id > 0} }

func short(hash string) string {
	if len(hash) > 12 {
		return hash[:12]
	}
	return hash
}
