package recovery_test

import (
	"context"
	"testing"
	"time"

	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/internal/recovery"
	"github.com/orderflow/orderflow/store"
)

// broker answers Plan from queues built by hand: per topic, the queues'
// min, max and committed offsets, and the offset the time would give.
type broker map[string][]mq.QueueRewind

func (b broker) Plan(_ context.Context, group, topic string, to time.Time) (mq.RewindPlan, error) {
	qs, ok := b[topic]
	if !ok {
		return mq.RewindPlan{}, mq.ErrNoTopic
	}
	p := mq.RewindPlan{Group: group, Topic: topic, To: to}
	for _, q := range qs {
		q.Topic = topic
		q.ClampToCommitted()
		p.Queues = append(p.Queues, q)
	}
	return p, nil
}

func queue(id int, min, max, committed, atTime int64) mq.QueueRewind {
	return mq.QueueRewind{Broker: "b", QueueID: id, Min: min, Max: max, Committed: committed, Target: atTime}
}

func point(topic string, id int, next int64) store.RecoveryPoint {
	return store.RecoveryPoint{Topic: topic, Broker: "b", QueueID: id, Next: next}
}

// Each queue restarts at its point; a point beyond the committed offset
// is clamped to it (nothing not consumed is skipped); a point below the
// first offset stored is reported missing; a retry topic the broker does
// not have is left out.
func TestPlanRewindToThePoints(t *testing.T) {
	b := broker{"T": {queue(0, 0, 100, 90, 50), queue(1, 0, 100, 40, 50), queue(2, 30, 100, 100, 60)}}
	points := []store.RecoveryPoint{point("T", 0, 70), point("T", 1, 60), point("T", 2, 20)}
	p, err := recovery.PlanRewind(context.Background(), b, points, "G", "T", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		target, clamped int64
		src             recovery.Source
	}{{70, 0, recovery.FromPoint}, {40, 20, recovery.FromCommitted}, {30, 0, recovery.FromPoint}}
	if len(p.Queues) != 3 || len(p.Rewinds) != 1 {
		t.Fatalf("plan: %+v", p)
	}
	for i, w := range want {
		q := p.Queues[i]
		if q.Target != w.target || q.Clamped != w.clamped || q.Source != w.src {
			t.Errorf("queue %d: target %d, %d clamped, from %s; want %d, %d, %s", i, q.Target, q.Clamped, q.Source, w.target, w.clamped, w.src)
		}
		if r := p.Rewinds[0].Queues[i]; r.Target != q.Target {
			t.Errorf("queue %d: the rewind's target %d, the plan's %d", i, r.Target, q.Target)
		}
	}
	if p.Redeliver != 20+70 || p.Clamped != 20 || p.NoFallback {
		t.Errorf("redeliver %d, clamped %d, no fallback %v; want 90, 20, false", p.Redeliver, p.Clamped, p.NoFallback)
	}
	if m := p.Missing(); len(m) != 1 || m[0].QueueID != 2 {
		t.Errorf("missing %+v, want queue 2 (point 20, the broker starts at 30)", m)
	}
}

// A queue with no point is refused without a fallback time, and rewound
// to the time's offset (clamped) with one; the retry topic's queues are
// planned like the topic's.
func TestPlanRewindWithoutAPoint(t *testing.T) {
	b := broker{"T": {queue(0, 0, 100, 90, 50)}, "%RETRY%G": {queue(0, 0, 10, 8, 9)}}
	points := []store.RecoveryPoint{point("%RETRY%G", 0, 5)}
	p, err := recovery.PlanRewind(context.Background(), b, points, "G", "T", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if !p.NoFallback || p.Unproved != 1 || p.Queues[0].Source != recovery.NoPoint || p.Queues[0].Target != 90 {
		t.Errorf("no fallback: %+v", p)
	}
	p, err = recovery.PlanRewind(context.Background(), b, points, "G", "T", time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if p.NoFallback || p.Unproved != 1 || p.Queues[0].Source != recovery.FromTime || p.Queues[0].Target != 50 {
		t.Errorf("with a fallback: %+v", p)
	}
	if len(p.Rewinds) != 2 || p.Queues[1].Topic != "%RETRY%G" || p.Queues[1].Target != 5 || p.Redeliver != 40+3 {
		t.Errorf("the retry topic: %+v", p)
	}
}

// The seeds are the committed offsets, the first offset stored where the
// group committed none, and offset 0 of queue 0 on each broker for a retry
// topic the broker has not created.
func TestSeedPoints(t *testing.T) {
	b := broker{"T": {queue(0, 0, 100, 90, 0), queue(1, 12, 100, -1, 0)}}
	qs, err := recovery.SeedPoints(context.Background(), b, "G", "T")
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != 3 || qs[0].Offset != 90 || qs[1].Offset != 12 || qs[2].Topic != "%RETRY%G" || qs[2].Offset != 0 || qs[2].Broker != "b" {
		t.Errorf("seeds: %+v", qs)
	}
}
