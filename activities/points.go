package activities

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"

	"gorm.io/gorm"

	"github.com/orderflow/orderflow/fsm"
)

// validatePoints checks an AwardPointsInput: a valid order ID, user and
// version, a known kind, and the sign of the kind (purchase >= 0,
// refund <= 0; zero is a real row: a purchase of 0 points is still awarded).
func validatePoints(in AwardPointsInput) error {
	switch {
	case !fsm.ValidOrderID(in.OrderID):
		return fmt.Errorf("order_id %q must be 1-64 characters of [A-Za-z0-9_.:-]", in.OrderID)
	case in.UserID <= 0:
		return fmt.Errorf("user_id %d must be > 0", in.UserID)
	case in.Version < 1:
		return fmt.Errorf("version %d must be >= 1", in.Version)
	case in.Kind == fsm.Purchase && in.Points < 0:
		return fmt.Errorf("purchase points %d must be >= 0", in.Points)
	case in.Kind == fsm.Refund && in.Points > 0:
		return fmt.Errorf("refund points %d must be <= 0", in.Points)
	case in.Kind != fsm.Purchase && in.Kind != fsm.Refund:
		return fmt.Errorf("points kind %q must be %q or %q", in.Kind, fsm.Purchase, fsm.Refund)
	}
	return nil
}

// AwardPoints inserts one points ledger row: the purchase (+N) or the refund
// (-N) of an order. The unique key (order_id, kind) makes it retry-safe:
// INSERT ... ON CONFLICT DO NOTHING never writes a second row, and Inserted
// says whether this call wrote it.
//
// Bad input (invalid order ID, user or version, unknown kind, wrong sign) is
// a non-retryable ErrTypeInvalidInput error; points for an order that has no
// row are a non-retryable ErrTypeUnknownOrder error. Both write nothing.
// Database errors are retryable.
func (a *Activities) AwardPoints(ctx context.Context, in AwardPointsInput) (AwardPointsResult, error) {
	if err := validatePoints(in); err != nil {
		return AwardPointsResult{}, invalid(ErrTypeInvalidInput, err)
	}
	db := a.DB.WithContext(ctx)
	var r *gorm.DB
	if in.Kind == fsm.Refund {
		// A refund takes the points back from the user who earned them:
		// the purchase row's user, whichever user the caller names.
		r = db.Exec(`INSERT INTO points_ledger (order_id, user_id, kind, points, version)
			SELECT order_id, user_id, 'refund', ?, ? FROM points_ledger WHERE order_id = ? AND kind = 'purchase'
			ON CONFLICT (order_id, kind) DO NOTHING`,
			in.Points, in.Version, in.OrderID)
	} else {
		r = db.Exec(`INSERT INTO points_ledger (order_id, user_id, kind, points, version)
			VALUES (?, ?, ?, ?, ?) ON CONFLICT (order_id, kind) DO NOTHING`,
			in.OrderID, in.UserID, string(in.Kind), in.Points, in.Version)
	}
	if r.Error != nil {
		if pgCode(r.Error) == "23503" { // foreign_key_violation
			return AwardPointsResult{}, invalid(ErrTypeUnknownOrder,
				fmt.Errorf("order %s has no row: %s points cannot be awarded", in.OrderID, in.Kind))
		}
		return AwardPointsResult{}, fmt.Errorf("award %s points for %s: %w", in.Kind, in.OrderID, r.Error)
	}
	if r.RowsAffected == 1 {
		a.observePoints(in.Kind, in.Points)
		return AwardPointsResult{Inserted: true}, nil
	}
	// Already awarded (a retry or a redelivery), or, for a refund, no
	// purchase row to take back yet. The row must say the same; if it does
	// not, keep the first one and say so.
	var points, version int64
	err := db.Raw(`SELECT points, version FROM points_ledger WHERE order_id = ? AND kind = ?`,
		in.OrderID, string(in.Kind)).Row().Scan(&points, &version)
	if errors.Is(err, sql.ErrNoRows) && in.Kind == fsm.Refund {
		// Retryable: the workflow awards the purchase before the refund.
		return AwardPointsResult{}, fmt.Errorf("refund of %s: the order has no purchase row to take back", in.OrderID)
	}
	if err != nil {
		return AwardPointsResult{}, fmt.Errorf("read %s points of %s: %w", in.Kind, in.OrderID, err)
	}
	if points != in.Points {
		slog.WarnContext(ctx, "points already awarded with a different amount; keeping the first row",
			"order_id", in.OrderID, "kind", in.Kind, "stored_points", points, "stored_version", version,
			"points", in.Points, "version", in.Version)
	}
	return AwardPointsResult{}, nil
}
