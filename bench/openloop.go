package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/internal/uniq"
)

// warmUpWait bounds the wait for the warm-up event.
const warmUpWait = 2 * time.Minute

// warmUp publishes one CREATED event of an order outside the scenario's
// prefix and waits until its order_events row exists: the consumers have
// joined the topic's queues and the whole pipeline has run once, so an
// open-loop run does not time the consumers' start.
func warmUp(ctx context.Context, p *mq.Producer, db *database, topic string) error {
	id := uniq.Name("warm")
	e := fsm.Event{EventID: id + "-v1", OrderID: id, UserID: 1, Status: fsm.Created, Version: 1,
		AmountCents: 100, OccurredAt: time.Now().UTC().Truncate(time.Microsecond)}
	if _, err := p.PublishEvent(ctx, topic, e); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	deadline := time.Now().Add(warmUpWait)
	for {
		var n int64
		if err := db.DB.WithContext(ctx).Raw(`SELECT count(*) FROM order_events WHERE order_id = ?`, id).
			Row().Scan(&n); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
		if n > 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("warm-up: event %s not applied after %s", e.Key(), warmUpWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// openLoopPlan is the open-loop part of a run: the fractions of the
// measured e2e rate to offer, the one whose p99 is the headline figure, and
// how long the steady rate and the others are offered.
type openLoopPlan struct {
	Fractions []float64
	Steady    float64
	// Duration is how long the steady rate is offered; Others how long
	// each other rate is, at most Duration.
	Duration, Others time.Duration
}

// duration is how long fraction f of the e2e rate is offered.
func (p openLoopPlan) duration(f float64) time.Duration {
	if f == p.Steady || p.Others <= 0 {
		return p.Duration
	}
	return min(p.Others, p.Duration)
}

// fractions returns the plan's fractions, the steady one included, sorted
// and without repeats.
func (p openLoopPlan) fractions() []float64 {
	fs := append(slices.Clone(p.Fractions), p.Steady)
	slices.Sort(fs)
	return slices.Compact(fs)
}

// ordersFor is how many orders a scenario needs so that offering rate
// events/s lasts d, at eventsPerOrder events per order.
func ordersFor(rate float64, d time.Duration, eventsPerOrder float64) int {
	if eventsPerOrder <= 0 {
		eventsPerOrder = 1
	}
	return max(1, int(math.Ceil(rate*d.Seconds()/eventsPerOrder)))
}

// steadyResult picks the open-loop result offered at fraction f of the
// e2e rate.
func steadyResult(rs []cellResult, f float64) (cellResult, error) {
	for _, r := range rs {
		if r.Config.Fraction == f {
			return r, nil
		}
	}
	return cellResult{}, fmt.Errorf("no open-loop result at %g of the e2e rate", f)
}
