package check

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/orderflow/orderflow/scenario"
)

// ErrInvariantViolated is returned by Run and WaitSettled when an invariant
// does not hold.
var ErrInvariantViolated = errors.New("check: invariant violated")

// WaitOptions configures WaitSettled.
type WaitOptions struct {
	// Wait is how long to wait for the run to settle (every invariant
	// holding) before giving the verdict anyway.
	Wait time.Duration
	// Interval is the pause between two looks at the database.
	Interval time.Duration
	// Settle is how long the invariants must keep holding before the
	// verdict is given, so that a late redelivery cannot change it.
	Settle time.Duration
	// Progress, when set, is called with each intermediate report.
	Progress func(*Report)
}

// WaitSettled verifies the run until every invariant holds, twice Settle
// apart, or until Wait has passed, and returns the last report. Its error is
// ErrInvariantViolated (wrapped) when the run did not settle, or a database
// error.
func WaitSettled(ctx context.Context, db *gorm.DB, exp *scenario.Expected, o WaitOptions) (*Report, error) {
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	deadline := time.Now().Add(o.Wait)
	var okSince time.Time
	for {
		r, err := Verify(ctx, db, exp)
		if err != nil {
			return nil, err
		}
		now := time.Now()
		if r.OK() {
			if okSince.IsZero() {
				okSince = now
			}
			if now.Sub(okSince) >= o.Settle {
				return r, nil
			}
		} else {
			okSince = time.Time{}
		}
		if o.Progress != nil {
			o.Progress(r)
		}
		if now.After(deadline) {
			if r.OK() {
				return r, nil
			}
			return r, fmt.Errorf("%w: %d of 5 invariants failed after waiting %s", ErrInvariantViolated, len(r.Failed()), o.Wait)
		}
		t := time.NewTimer(o.Interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return r, ctx.Err()
		case <-t.C:
		}
	}
}

// ExampleOrder picks an order of the run worth inspecting in the Temporal UI
// and says why: one that received a conflicting event, else one that
// received an illegal event, else one cancelled after payment, else the
// first.
func ExampleOrder(exp *scenario.Expected) (id, why string) {
	for _, c := range exp.Conflicts {
		if exp.Published(c.Phase) {
			return c.OrderID, fmt.Sprintf("version %d arrived twice with different content", c.Version)
		}
	}
	for _, k := range exp.Keys {
		if exp.Published(k.Phase) && k.Outcome == scenario.OutcomeIllegal {
			return k.OrderID, fmt.Sprintf("version %d (%s) came after the order settled and is illegal", k.Version, k.Status)
		}
	}
	due := PointsDue(exp)
	for _, o := range exp.Orders {
		if due[o.OrderID].Optional {
			return o.OrderID, "cancelled after payment"
		}
	}
	if len(exp.Orders) > 0 {
		return exp.Orders[0].OrderID, "the first order of the run"
	}
	return "", ""
}
