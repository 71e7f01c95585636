package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"

	"gorm.io/gorm"

	"github.com/orderflow/orderflow/fsm"
)

// PointsRow is one points ledger row to insert.
type PointsRow struct {
	OrderID string         `json:"order_id"`
	UserID  int64          `json:"user_id"`
	Kind    fsm.PointsKind `json:"kind"`
	// Points is signed: positive for a purchase, negative for a refund.
	Points int64 `json:"points"`
	// Version is the version of the event that earned the points.
	Version int64 `json:"version"`
}

// Validate checks the row: a valid order ID, user and version, a known kind,
// and the sign of the kind (purchase >= 0, refund <= 0; zero is a real row:
// a purchase of 0 points is still awarded).
func (r PointsRow) Validate() error {
	if err := fsm.CheckOrderID(r.OrderID); err != nil {
		return err
	}
	switch {
	case r.UserID <= 0:
		return fmt.Errorf("user_id %d must be > 0", r.UserID)
	case r.Version < 1:
		return fmt.Errorf("version %d must be >= 1", r.Version)
	case r.Kind == fsm.Purchase && r.Points < 0:
		return fmt.Errorf("purchase points %d must be >= 0", r.Points)
	case r.Kind == fsm.Refund && r.Points > 0:
		return fmt.Errorf("refund points %d must be <= 0", r.Points)
	case r.Kind != fsm.Purchase && r.Kind != fsm.Refund:
		return fmt.Errorf("points kind %q must be %q or %q", r.Kind, fsm.Purchase, fsm.Refund)
	}
	return nil
}

// AwardPoints inserts one points ledger row: the purchase (+N) or the refund
// (-N) of an order, and reports whether this call inserted it. The unique
// key (order_id, kind) makes it safe to repeat: INSERT ... ON CONFLICT DO
// NOTHING never writes a second row. A refund takes the points back from
// the user who earned them: it is inserted from the purchase row, whichever
// user r names.
//
// An invalid row is refused with an error wrapping ErrInvalid; points for an
// order that has no row with one wrapping ErrUnknownOrder. Both write
// nothing. A refund before its purchase row exists, and database errors,
// are plain errors: repeat the call.
func (s *Store) AwardPoints(ctx context.Context, r PointsRow) (inserted bool, err error) {
	if err := r.Validate(); err != nil {
		return false, invalid(err)
	}
	db := s.db.WithContext(ctx)
	var w *gorm.DB
	if r.Kind == fsm.Refund {
		w = db.Exec(`INSERT INTO points_ledger (order_id, user_id, kind, points, version)
			SELECT order_id, user_id, 'refund', ?, ? FROM points_ledger WHERE order_id = ? AND kind = 'purchase'
			ON CONFLICT (order_id, kind) DO NOTHING`,
			r.Points, r.Version, r.OrderID)
	} else {
		w = db.Exec(`INSERT INTO points_ledger (order_id, user_id, kind, points, version)
			VALUES (?, ?, ?, ?, ?) ON CONFLICT (order_id, kind) DO NOTHING`,
			r.OrderID, r.UserID, string(r.Kind), r.Points, r.Version)
	}
	if w.Error != nil {
		if pgCode(w.Error) == "23503" { // foreign_key_violation
			return false, fmt.Errorf("%w: %w: order %s has no row: %s points cannot be awarded", ErrInvalid, ErrUnknownOrder, r.OrderID, r.Kind)
		}
		return false, fmt.Errorf("award %s points for %s: %w", r.Kind, r.OrderID, w.Error)
	}
	if w.RowsAffected == 1 {
		return true, nil
	}
	// Already awarded (a retry or a redelivery), or, for a refund, no
	// purchase row to take back yet. The row must say the same; if it does
	// not, keep the first one and say so.
	var points, version int64
	err = db.Raw(`SELECT points, version FROM points_ledger WHERE order_id = ? AND kind = ?`,
		r.OrderID, string(r.Kind)).Row().Scan(&points, &version)
	if errors.Is(err, sql.ErrNoRows) && r.Kind == fsm.Refund {
		// The workflow awards the purchase before the refund.
		return false, fmt.Errorf("refund of %s: the order has no purchase row to take back", r.OrderID)
	}
	if err != nil {
		return false, fmt.Errorf("read %s points of %s: %w", r.Kind, r.OrderID, err)
	}
	if points != r.Points {
		slog.WarnContext(ctx, "points already awarded with a different amount; keeping the first row",
			"order_id", r.OrderID, "kind", r.Kind, "stored_points", points, "stored_version", version,
			"points", r.Points, "version", r.Version)
	}
	return false, nil
}
