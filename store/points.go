package store

import (
	"context"
	"fmt"
	"log/slog"

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

// AwardPoints inserts one points ledger row of the order, and reports
// whether this call inserted it. The row is the one the order is due, as
// its orders row says (ApplyEvent decided it in the same write as the state
// change): the purchase (+purchase_points) once purchased, the refund
// (-purchase_points) once refunded, both on the user who earned the points
// (purchase_user_id), whichever user r names and in whichever order the two
// are written. The unique key (order_id, kind) makes it safe to repeat:
// INSERT ... ON CONFLICT DO NOTHING never writes a second row.
//
// An invalid row is refused with an error wrapping ErrInvalid, and so is a
// kind the order is not due; points for an order that has no row with one
// wrapping ErrUnknownOrder. They write nothing. Database errors are plain
// errors: repeat the call.
func (s *Store) AwardPoints(ctx context.Context, r PointsRow) (inserted bool, err error) {
	if err := r.Validate(); err != nil {
		return false, invalid(err)
	}
	db := s.db.WithContext(ctx)
	w := db.Exec(`INSERT INTO points_ledger (order_id, user_id, kind, points, version)
		SELECT order_id, COALESCE(purchase_user_id, user_id), ?::text,
			CASE WHEN ?::text = 'purchase' THEN purchase_points ELSE -purchase_points END, ?
		FROM orders
		WHERE order_id = ? AND CASE WHEN ?::text = 'purchase' THEN purchased ELSE refunded END
		ON CONFLICT (order_id, kind) DO NOTHING`,
		string(r.Kind), string(r.Kind), r.Version, r.OrderID, string(r.Kind))
	if w.Error != nil {
		return false, fmt.Errorf("award %s points for %s: %w", r.Kind, r.OrderID, w.Error)
	}
	if w.RowsAffected == 1 {
		return true, nil
	}
	// No row written: already there (a retry, a redelivery), or not due.
	var row struct {
		Found   bool
		Due     bool
		Points  *int64
		Version *int64
	}
	if err := db.Raw(`SELECT o.order_id IS NOT NULL AS found,
			COALESCE(CASE WHEN ?::text = 'purchase' THEN o.purchased ELSE o.refunded END, false) AS due,
			l.points, l.version
		FROM (SELECT ?::text AS order_id) AS k
		LEFT JOIN orders AS o ON o.order_id = k.order_id
		LEFT JOIN points_ledger AS l ON l.order_id = k.order_id AND l.kind = ?`,
		string(r.Kind), r.OrderID, string(r.Kind)).Scan(&row).Error; err != nil {
		return false, fmt.Errorf("read %s points of %s: %w", r.Kind, r.OrderID, err)
	}
	switch {
	case !row.Found:
		return false, fmt.Errorf("%w: %w: order %s has no row: %s points cannot be awarded", ErrInvalid, ErrUnknownOrder, r.OrderID, r.Kind)
	case row.Points == nil && !row.Due:
		return false, invalid(fmt.Errorf("order %s is not due %s points", r.OrderID, r.Kind))
	case row.Points == nil:
		return false, fmt.Errorf("award %s points for %s: no row written", r.Kind, r.OrderID)
	}
	if *row.Points != r.Points {
		slog.WarnContext(ctx, "points row holds what the order is due, not what the caller said",
			"order_id", r.OrderID, "kind", r.Kind, "stored_points", *row.Points, "stored_version", *row.Version,
			"points", r.Points, "version", r.Version)
	}
	return false, nil
}
