// Package recovery keeps and reads the recovery points: for each broker
// queue the bridges consume (the topic's and the consumer group's retry
// topic's), the first offset whose message's effect the database may lack
// (docs/design.md, recovery points). The bridge seeds a queue's point from
// the group's committed offset before it consumes and moves the points
// over the receipts the worker and the bridge record; `orderflow recover`
// rewinds each queue to the point the restored database proves, and never
// past the group's committed offset.
package recovery

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/orderflow/orderflow/internal/backlog"
	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/store"
	"github.com/orderflow/orderflow/wire"
)

// Broker is what recovery reads of the broker: a consumer group's plan on
// a topic (mq.Rewinder.Plan).
type Broker interface {
	Plan(ctx context.Context, group, topic string, to time.Time) (mq.RewindPlan, error)
}

// Topics are the topics whose queues a consumer group of topic consumes:
// topic itself and the group's retry topic, where the broker keeps the
// messages handed back for a later delivery.
func Topics(group, topic string) []string { return []string{topic, backlog.RetryTopic(group)} }

// SeedPoints lists, for every queue of the group's topics, the offset its
// recovery point starts at when the database has none: the group's
// committed offset, or, for a queue the group has committed nothing in
// (it consumes from the first offset), the first offset still stored. A
// retry topic the broker has not created yet (nothing was ever handed
// back) starts at offset 0 on queue 0 of each of the topic's brokers,
// where the broker will create it.
func SeedPoints(ctx context.Context, b Broker, group, topic string) ([]wire.QueueOffset, error) {
	var (
		out     []wire.QueueOffset
		brokers []string
	)
	for i, t := range Topics(group, topic) {
		p, err := b.Plan(ctx, group, t, time.Now())
		if i > 0 && errors.Is(err, mq.ErrNoTopic) {
			for _, name := range brokers {
				out = append(out, wire.QueueOffset{Topic: t, Broker: name, QueueID: 0, Offset: 0})
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("recovery points: the group's offsets on %s: %w", t, err)
		}
		seen := map[string]bool{}
		for _, q := range p.Queues {
			off := q.Committed
			if off < 0 {
				off = q.Min
			}
			out = append(out, wire.QueueOffset{Topic: t, Broker: q.Broker, QueueID: q.QueueID, Offset: max(off, 0)})
			if !seen[q.Broker] {
				seen[q.Broker] = true
				brokers = append(brokers, q.Broker)
			}
		}
	}
	return out, nil
}

// Source says where a queue's rewind target came from.
type Source string

const (
	// FromPoint: the database's recovery point for the queue.
	FromPoint Source = "point"
	// FromCommitted: the group's committed offset, which the point is
	// beyond (the group had not consumed that far: rewinding to the point
	// would skip messages it never consumed).
	FromCommitted Source = "committed"
	// FromTime: no point is recorded for the queue; the first message
	// stored at or after the fallback time (-since minus the margin).
	FromTime Source = "time"
	// NoPoint: no point is recorded for the queue and no fallback time
	// was given: the plan cannot be carried out.
	NoPoint Source = "none"
)

// Queue is one queue's rewind target and why.
type Queue struct {
	mq.QueueRewind
	Source Source `json:"source"`
	// Point is the database's recovery point (-1 when it has none).
	Point int64 `json:"point"`
}

// Plan is the rewind of one consumer group on its topics.
type Plan struct {
	// Rewinds are the plans Apply carries out, one per topic the broker
	// has; Queues the same queues with where their targets came from.
	Rewinds []mq.RewindPlan `json:"rewinds"`
	Queues  []Queue         `json:"queues"`
	// Unproved are the queues with no recovery point, rewound to the
	// fallback time; NoFallback is true when there were such queues but
	// no fallback time was given.
	Unproved   int  `json:"unproved"`
	NoFallback bool `json:"no_fallback,omitempty"`
	// Redeliver and Clamped are the sums over the queues.
	Redeliver int64 `json:"redeliver"`
	Clamped   int64 `json:"clamped"`
}

// PlanRewind plans the rewind of group on its topics to the points: each
// queue restarts at its recovery point, never beyond the group's committed
// offset (a point beyond it is clamped to it: nothing the group has not
// consumed is skipped) and never below the first offset stored. A queue
// with no point restarts at the first message stored at or after
// fallback; when fallback is the zero time, the plan is returned with
// NoFallback set and such queues left at their committed offsets.
func PlanRewind(ctx context.Context, b Broker, points []store.RecoveryPoint, group, topic string, fallback time.Time) (Plan, error) {
	byKey := make(map[string]store.RecoveryPoint, len(points))
	for _, p := range points {
		byKey[p.Key()] = p
	}
	at := fallback
	if at.IsZero() {
		at = time.Now()
	}
	var out Plan
	for i, t := range Topics(group, topic) {
		rp, err := b.Plan(ctx, group, t, at)
		if i > 0 && errors.Is(err, mq.ErrNoTopic) {
			continue // nothing was ever handed back
		}
		if err != nil {
			return out, fmt.Errorf("the group's offsets on %s: %w", t, err)
		}
		rp.Redeliver, rp.Clamped = 0, 0
		for j := range rp.Queues {
			q := &rp.Queues[j]
			pq := Queue{Point: -1}
			p, ok := byKey[store.QueueKey(t, q.Broker, q.QueueID)]
			switch {
			case ok:
				pq.Point, pq.Source = p.Next, FromPoint
				q.Target, q.Clamped = min(max(p.Next, q.Min), q.Max), 0
				q.ClampToCommitted()
				if q.Clamped > 0 {
					pq.Source = FromCommitted
				}
			case fallback.IsZero():
				out.Unproved++
				out.NoFallback = true
				pq.Source = NoPoint
				q.Target = q.Committed
				if q.Target < 0 {
					q.Target = q.Min
				}
			default:
				out.Unproved++
				pq.Source = FromTime // mq's plan: the time's target, clamped
			}
			rp.Redeliver += q.Redelivered()
			rp.Clamped += q.Clamped
			out.Redeliver += q.Redelivered()
			out.Clamped += q.Clamped
			pq.QueueRewind = *q
			out.Queues = append(out.Queues, pq)
		}
		out.Rewinds = append(out.Rewinds, rp)
	}
	return out, nil
}

// Missing lists the queues of the plan whose point the broker can no
// longer serve: the point is below the first offset the queue still
// stores, so the messages between are gone from the broker.
func (p Plan) Missing() []Queue {
	var out []Queue
	for _, q := range p.Queues {
		if q.Source == FromPoint && q.Point < q.Min {
			out = append(out, q)
		}
	}
	return out
}
