package store

import (
	"context"
	"database/sql"
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

// LoadOrder returns the stored order (Found false when it has no row yet)
// and the content hash of every business key recorded for it in
// order_events, read from one snapshot.
func (s *Store) LoadOrder(ctx context.Context, orderID string) (Loaded, error) {
	if err := fsm.CheckOrderID(orderID); err != nil {
		return Loaded{}, invalid(err)
	}
	res := Loaded{Versions: map[int64]string{}}
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
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
		var kinds []string
		if err := tx.Raw(`SELECT kind FROM points_ledger WHERE order_id = ? ORDER BY kind DESC`, orderID).
			Scan(&kinds).Error; err != nil {
			return fmt.Errorf("read points_ledger of %s: %w", orderID, err)
		}
		for _, k := range kinds {
			res.Awarded = append(res.Awarded, fsm.PointsKind(k))
		}
		return nil
	}, readOnly)
	if err != nil {
		return Loaded{}, fmt.Errorf("load order %s: %w", orderID, err)
	}
	return res, nil
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

// readOnly reads the order and its events from one snapshot.
var readOnly = &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true}

func loadOrder(tx *gorm.DB, orderID string) (fsm.Order, bool, error) {
	o := fsm.Order{OrderID: orderID}
	var status string
	var purchaser sql.NullInt64
	err := tx.Raw(`SELECT user_id, status, version, amount_cents, content_hash, purchased, purchase_points,
			purchase_user_id, refunded
		FROM orders WHERE order_id = ?`, orderID).Row().
		Scan(&o.UserID, &status, &o.Version, &o.AmountCents, &o.ContentHash, &o.Purchased, &o.PurchasePoints,
			&purchaser, &o.Refunded)
	if errors.Is(err, sql.ErrNoRows) {
		return fsm.Order{}, false, nil
	}
	if err != nil {
		return fsm.Order{}, false, fmt.Errorf("load orders row %s: %w", orderID, err)
	}
	o.Status = fsm.Status(status)
	o.PurchaseUserID = purchaser.Int64
	return o, true, nil
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
//  4. Row absent: fsm.Decide judges the event against the order as read.
//     An applied event is written by one statement that upserts the order
//     and inserts the order_events row. The version guard is evaluated
//     inside the write: ON CONFLICT (order_id) DO UPDATE ... WHERE
//     orders.version < EXCLUDED.version AND orders.version = <version read>;
//     the second half makes the decision a compare-and-set, so an order
//     created or moved by a concurrent writer since the read (two first
//     events of a new order, say) makes the statement affect no row. Any
//     other outcome inserts the order_events row alone, so the table is a
//     complete audit (a stale or illegal verdict cannot be undone by a
//     concurrent change: versions only grow, and whatever the order reaches
//     from its status, an unreachable status stays unreachable).
//  5. When the compare-and-set affects no row, or the business key was
//     recorded concurrently (unique violation on order_events, which rolls
//     the whole statement back), go back to 1.
//
// The points due (purchased, purchase_points, refunded) change in the same
// write as the state; the points ledger row is AwardPoints' job. Database
// errors are returned wrapped and are retryable.
func (s *Store) ApplyEvent(ctx context.Context, e fsm.Event, src wire.Envelope) (Applied, error) {
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
		res, again, err := applyOnce(db, e, hash, src)
		if err != nil {
			return Applied{}, fmt.Errorf("apply event %s: %w", e.Key(), err)
		}
		if !again {
			return res, nil
		}
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
		r                               storedRow
		userID, version, amount, points *int64
		purchaser                       sql.NullInt64
		status, orderHash               *string
		purchased, refunded             *bool
	)
	err := db.Raw(`SELECT o.user_id, o.status, o.version, o.amount_cents, o.content_hash,
			o.purchased, o.purchase_points, o.purchase_user_id, o.refunded,
			ev.content_hash, ev.outcome, ev.gap, ev.points_kind, ev.points_delta, ev.reason
		FROM (SELECT ?::text AS order_id, ?::bigint AS version) AS k
		LEFT JOIN orders AS o ON o.order_id = k.order_id
		LEFT JOIN order_events AS ev ON ev.order_id = k.order_id AND ev.version = k.version`,
		k.OrderID, k.Version).Row().
		Scan(&userID, &status, &version, &amount, &orderHash, &purchased, &points, &purchaser, &refunded,
			&r.evHash, &r.outcome, &r.gap, &r.kind, &r.delta, &r.reason)
	if err != nil {
		return storedRow{}, fmt.Errorf("read order and event: %w", err)
	}
	if version != nil {
		r.found = true
		r.order = fsm.Order{
			OrderID: k.OrderID, UserID: *userID, Status: fsm.Status(*status), Version: *version,
			AmountCents: *amount, ContentHash: *orderHash,
			Purchased: *purchased, PurchasePoints: *points, PurchaseUserID: purchaser.Int64, Refunded: *refunded,
		}
	}
	return r, nil
}

// insertEventSQL records a business key with its decision.
const insertEventSQL = `INSERT INTO order_events (order_id, version, event_id, user_id, status,
	amount_cents, content_hash, outcome, gap, points_kind, points_delta, reason, occurred_at, message_ids)`

// applySQL writes an applied event in one statement: the order upsert with
// the version guard and the compare-and-set on the version read, and the
// order_events row, inserted only if the upsert went through. It affects
// one row, or none when the guard refused.
var applySQL = `WITH up AS (
	INSERT INTO orders (order_id, user_id, status, version, amount_cents, content_hash,
		purchased, purchase_points, purchase_user_id, refunded)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (order_id) DO UPDATE SET
		user_id = EXCLUDED.user_id, status = EXCLUDED.status, version = EXCLUDED.version,
		amount_cents = EXCLUDED.amount_cents, content_hash = EXCLUDED.content_hash,
		purchased = EXCLUDED.purchased, purchase_points = EXCLUDED.purchase_points,
		purchase_user_id = EXCLUDED.purchase_user_id, refunded = EXCLUDED.refunded, updated_at = now()
	WHERE orders.version < EXCLUDED.version AND orders.version = ?
	RETURNING 1),
` + receiptSQL(" FROM up") + `
` + insertEventSQL + `
SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ` + messageIDsSQL + ` FROM up`

// applyOnce is one read-decide-write round of ApplyEvent. again is true when
// a concurrent writer won and the round must be repeated.
func applyOnce(db *gorm.DB, e fsm.Event, hash string, src wire.Envelope) (res Applied, again bool, err error) {
	st, err := readStored(db, e.Key())
	if err != nil {
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
	switch d.Outcome {
	case fsm.Conflict:
		// The order holds this version but order_events does not: the row
		// was written outside ApplyEvent. Park the event; do not record
		// its content as the business key's.
		res, err := conflict(db, e, st.order, src, d.Reason, false)
		return res, false, err
	case fsm.Applied:
		n := d.Next
		args := append([]any{n.OrderID, n.UserID, string(n.Status), n.Version, n.AmountCents, n.ContentHash,
			n.Purchased, n.PurchasePoints, nullID(n.PurchaseUserID), n.Refunded, st.order.Version}, receiptArgs(src)...)
		w = db.Exec(applySQL, append(args, eventArgs...)...)
	default:
		w = db.Exec(`WITH `+receiptSQL("")+` `+insertEventSQL+` VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, `+messageIDsSQL+`)`,
			append(receiptArgs(src), eventArgs...)...)
	}
	switch {
	case pgCode(w.Error) == "23505": // unique_violation: the key was recorded concurrently
		return Applied{}, true, nil
	case w.Error != nil:
		return Applied{}, false, fmt.Errorf("record %s event: %w", d.Outcome, w.Error)
	case w.RowsAffected == 0: // the order moved since the read
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
