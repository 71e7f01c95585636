package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/orderflow/orderflow/fsm"
)

// StoredOrder is an orders row as stored.
type StoredOrder struct {
	fsm.Order
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// EventsPrunedAt is when `orderflow prune` last removed the order's
	// order_events rows and dead letters (nil: never).
	EventsPrunedAt *time.Time `json:"events_pruned_at,omitempty"`
}

// EventRow is one business key's order_events row: the event as first
// recorded and the first decision taken on it.
type EventRow struct {
	Version     int64          `json:"version"`
	EventID     string         `json:"event_id"`
	UserID      int64          `json:"user_id"`
	Status      fsm.Status     `json:"status"`
	AmountCents int64          `json:"amount_cents"`
	ContentHash string         `json:"content_hash"`
	Outcome     fsm.Outcome    `json:"outcome"`
	Gap         bool           `json:"gap"`
	PointsKind  fsm.PointsKind `json:"points_kind,omitempty"`
	PointsDelta int64          `json:"points_delta"`
	Reason      string         `json:"reason,omitempty"`
	OccurredAt  time.Time      `json:"occurred_at"`
	// TimesSeen counts the distinct messages that carried the key with
	// this content; MessageIDs are their broker message IDs (up to 64);
	// Conflicts counts deliveries of the key with other content.
	TimesSeen   int64     `json:"times_seen"`
	MessageIDs  []string  `json:"message_ids"`
	Conflicts   int64     `json:"conflicts"`
	FirstSeenAt time.Time `json:"first_seen_at"`
	LastSeenAt  time.Time `json:"last_seen_at"`
}

// LedgerRow is one points_ledger row.
type LedgerRow struct {
	ID        int64          `json:"id"`
	UserID    int64          `json:"user_id"`
	Kind      fsm.PointsKind `json:"kind"`
	Points    int64          `json:"points"`
	Version   int64          `json:"version"`
	CreatedAt time.Time      `json:"created_at"`
}

// OrderHistory is everything the database holds about one order.
type OrderHistory struct {
	OrderID string `json:"order_id"`
	// Found is false when the order has no orders row.
	Found bool         `json:"found"`
	Order *StoredOrder `json:"order,omitempty"`
	// Events are the order's business keys in version order.
	Events []EventRow `json:"events"`
	// Ledger are the order's points rows, purchase first.
	Ledger []LedgerRow `json:"ledger"`
	// DeadLetters are the parked messages whose keys name the order,
	// oldest first, at most MaxHistoryDeadLetters of them.
	DeadLetters []DeadLetterRow `json:"dead_letters"`
}

// MaxHistoryDeadLetters bounds the dead letters OrderHistory returns.
const MaxHistoryDeadLetters = 100

// Empty reports whether the database knows nothing of the order: no
// orders row, no business key, no dead letter.
func (h OrderHistory) Empty() bool {
	return !h.Found && len(h.Events) == 0 && len(h.DeadLetters) == 0
}

// Event returns the order_events row of version v, and false when the key
// was never recorded (or was pruned).
func (h OrderHistory) Event(v int64) (EventRow, bool) {
	for _, e := range h.Events {
		if e.Version == v {
			return e, true
		}
	}
	return EventRow{}, false
}

// InGap reports whether version v, never recorded, lies in a gap: an event
// applied over missing versions (flagged gap) skipped it. It returns the
// version of that event, or 0.
func (h OrderHistory) InGap(v int64) int64 {
	var below int64 // the highest applied version under the candidate
	for _, e := range h.Events {
		if e.Outcome != fsm.Applied {
			continue
		}
		if e.Version > v {
			if e.Gap && below < v {
				return e.Version
			}
			return 0
		}
		below = e.Version
	}
	return 0
}

// OrderHistory returns the order as stored, its business keys in version
// order, its points rows and its dead letters, read from one snapshot.
func (s *Store) OrderHistory(ctx context.Context, orderID string) (OrderHistory, error) {
	if err := fsm.CheckOrderID(orderID); err != nil {
		return OrderHistory{}, invalid(err)
	}
	h := OrderHistory{OrderID: orderID, Events: []EventRow{}, Ledger: []LedgerRow{}, DeadLetters: []DeadLetterRow{}}
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		o, found, err := loadOrder(tx, orderID)
		if err != nil {
			return err
		}
		if found {
			so := StoredOrder{Order: o}
			var pruned sql.NullTime
			if err := tx.Raw(`SELECT created_at, updated_at, events_pruned_at FROM orders WHERE order_id = ?`, orderID).
				Row().Scan(&so.CreatedAt, &so.UpdatedAt, &pruned); err != nil {
				return fmt.Errorf("read orders row: %w", err)
			}
			if pruned.Valid {
				t := pruned.Time
				so.EventsPrunedAt = &t
			}
			h.Found, h.Order = true, &so
		}
		rows, err := tx.Raw(`SELECT version, event_id, user_id, status, amount_cents, content_hash, outcome, gap,
				points_kind, points_delta, reason, occurred_at, times_seen, array_to_string(message_ids, ' '),
				conflicts, first_seen_at, last_seen_at
			FROM order_events WHERE order_id = ? ORDER BY version`, orderID).Rows()
		if err != nil {
			return fmt.Errorf("read order_events: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var e EventRow
			var status, outcome, kind, ids string
			if err := rows.Scan(&e.Version, &e.EventID, &e.UserID, &status, &e.AmountCents, &e.ContentHash, &outcome,
				&e.Gap, &kind, &e.PointsDelta, &e.Reason, &e.OccurredAt, &e.TimesSeen, &ids, &e.Conflicts,
				&e.FirstSeenAt, &e.LastSeenAt); err != nil {
				return fmt.Errorf("scan order_events: %w", err)
			}
			e.Status, e.Outcome, e.PointsKind = fsm.Status(status), fsm.Outcome(outcome), fsm.PointsKind(kind)
			e.MessageIDs = strings.Fields(ids)
			if e.MessageIDs == nil {
				e.MessageIDs = []string{}
			}
			h.Events = append(h.Events, e)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read order_events: %w", err)
		}
		if err := tx.Raw(`SELECT id, user_id, kind, points, version, created_at FROM points_ledger
			WHERE order_id = ? ORDER BY kind DESC, id`, orderID).Scan(&h.Ledger).Error; err != nil {
			return fmt.Errorf("read points_ledger: %w", err)
		}
		where, args := DeadLetterFilter{OrderID: orderID}.where()
		dl, err := tx.Raw(`SELECT `+deadLetterColumns+` FROM dead_letters WHERE `+where+` ORDER BY id LIMIT ?`,
			append(args, MaxHistoryDeadLetters)...).Rows()
		if err != nil {
			return fmt.Errorf("read dead_letters: %w", err)
		}
		defer dl.Close()
		for dl.Next() {
			d, err := scanDeadLetter(dl)
			if err != nil {
				return fmt.Errorf("scan dead_letters: %w", err)
			}
			h.DeadLetters = append(h.DeadLetters, d)
		}
		if err := dl.Err(); err != nil {
			return fmt.Errorf("read dead_letters: %w", err)
		}
		return nil
	}, readOnly)
	if err != nil {
		return OrderHistory{}, fmt.Errorf("read history of order %s: %w", orderID, err)
	}
	return h, nil
}
