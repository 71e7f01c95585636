package mq

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	rmqerrors "github.com/apache/rocketmq-client-go/v2/errors"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// ErrConsumersOnline is wrapped when Rewinder.Apply refuses to move a
// consumer group's offsets because clients of the group are connected: each
// keeps the offsets of the queues it holds in memory and commits them every
// few seconds, over the rewound ones.
var ErrConsumersOnline = errors.New("consumers of the group are online")

// QueueRewind is the plan for one message queue.
type QueueRewind struct {
	Topic string
	// Broker is the broker name; BrokerAddr the master that answered.
	Broker, BrokerAddr string
	QueueID            int
	// Min is the offset of the first message still stored; Max the offset
	// the next message will get.
	Min, Max int64
	// Committed is the group's committed offset when the plan was made;
	// -1 when the group had committed none for the queue.
	Committed int64
	// Target is the offset the group will consume from after Apply: the
	// first message stored at or after the plan's time, within [Min, Max]
	// (Max when every stored message is older), and never beyond
	// Committed: a rewind moves a group back, never past messages it has
	// not consumed.
	Target int64
	// Clamped is how many messages the group has not consumed yet that
	// the plan's time would have skipped (it is later than the group's
	// progress): Target was clamped to Committed. 0 otherwise.
	Clamped int64 `json:",omitempty"`
	// EarliestStoreTime is the store time of the oldest message the queue
	// still holds; the zero time when it holds none.
	EarliestStoreTime time.Time
}

// Redelivered is how many messages the group has consumed from the queue
// that Apply hands it again: Committed-Target when the target is before the
// committed offset, else 0.
func (q QueueRewind) Redelivered() int64 {
	if q.Committed > q.Target {
		return q.Committed - q.Target
	}
	return 0
}

// ClampToCommitted keeps the target at or before the committed offset (when the
// group has one), counting in Clamped the messages it would have skipped.
func (q *QueueRewind) ClampToCommitted() {
	if q.Committed < 0 {
		return
	}
	if from := max(q.Committed, q.Min); q.Target > from {
		q.Clamped = q.Target - from
		q.Target = from
	}
}

// RewindPlan says what rewinding a consumer group on a topic to a point in
// time does, queue by queue, as Rewinder.Plan read it from the brokers.
type RewindPlan struct {
	Group, Topic string
	// To is the time asked for.
	To time.Time
	// Queues are the topic's readable queues, ordered by broker and queue.
	Queues []QueueRewind
	// Redeliver is the number of messages the group will consume again,
	// the sum of the queues' Redelivered.
	Redeliver int64
	// Clamped is the number of messages not consumed yet that the time
	// would have skipped, the sum of the queues' Clamped: the plan leaves
	// those queues at their committed offsets instead.
	Clamped int64
	// Earliest is the store time of the oldest message the topic still
	// holds, the earliest of the queues' EarliestStoreTime; the zero time
	// when the topic holds none. Messages stored before it are gone: a
	// rewind to an earlier time starts at the oldest message held.
	Earliest time.Time
	// ConsumersOnline is the number of clients of the group connected to
	// the topic's brokers when the plan was made; Apply refuses unless it
	// is 0 at the time of Apply.
	ConsumersOnline int
}

// rewindAdmin is the part of the client's admin that Rewinder uses.
type rewindAdmin interface {
	ConsumeOffsets(ctx context.Context, group, topic string) ([]admin.QueueOffsets, error)
	SearchOffsets(ctx context.Context, topic string, ts time.Time) ([]admin.QueueTimeOffset, error)
	ConsumerOnline(ctx context.Context, group, topic string) (int, error)
	UpdateConsumerOffset(ctx context.Context, group string, q primitive.MessageQueue, offset int64) error
	Close() error
}

// Rewinder moves a consumer group's committed offsets on a topic back (or
// forward) to a point in time, so that the group consumes again every
// message stored since (the client's admin API, patched:
// third_party/rocketmq-client-go/ORDERFLOW.md, changes 3 and 5). It is safe
// for concurrent use; calls are serialized.
type Rewinder struct {
	namesrv string
	mu      sync.Mutex
	admin   rewindAdmin
}

// NewRewinder returns a rewinder that resolves routes from the
// comma-separated name servers, with ACL credentials when the keys are set,
// over TLS with tlsConf when it is not nil.
// It connects only when used. Close it when done.
func NewRewinder(namesrv, accessKey, secretKey string, tlsConf *tls.Config) (*Rewinder, error) {
	a, err := newAdmin(namesrv, accessKey, secretKey, tlsConf)
	if err != nil {
		return nil, err
	}
	return &Rewinder{namesrv: namesrv, admin: a}, nil
}

// Plan reads, for every readable queue of topic, group's committed offset,
// the offset of the first message stored at or after to (the target) and the
// store time of the oldest message still held, and whether clients of the
// group are online. It changes nothing. A topic the name servers do not
// know wraps ErrNoTopic.
func (r *Rewinder) Plan(ctx context.Context, group, topic string, to time.Time) (RewindPlan, error) {
	if group == "" || topic == "" {
		return RewindPlan{}, fmt.Errorf("mq: rewind plan needs a group and a topic (group %q, topic %q)", group, topic)
	}
	if to.IsZero() {
		return RewindPlan{}, fmt.Errorf("mq: rewind plan for group %s on topic %s: no time given", group, topic)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.admin == nil {
		return RewindPlan{}, errors.New("mq: rewinder is closed")
	}
	found, err := r.admin.SearchOffsets(ctx, topic, to)
	if err != nil {
		return RewindPlan{}, r.wrap(fmt.Sprintf("offsets of topic %s at %s", topic, to.Format(time.RFC3339Nano)), topic, err)
	}
	committed, err := r.admin.ConsumeOffsets(ctx, group, topic)
	if err != nil {
		return RewindPlan{}, r.wrap(fmt.Sprintf("offsets of group %s on topic %s", group, topic), topic, err)
	}
	online, err := r.admin.ConsumerOnline(ctx, group, topic)
	if err != nil {
		return RewindPlan{}, r.wrap(fmt.Sprintf("clients of group %s on topic %s", group, topic), topic, err)
	}
	type queueKey struct {
		broker string
		id     int
	}
	byQueue := make(map[queueKey]admin.QueueOffsets, len(committed))
	for _, q := range committed {
		byQueue[queueKey{q.Queue.BrokerName, q.Queue.QueueId}] = q
	}
	if len(committed) != len(found) {
		return RewindPlan{}, fmt.Errorf("mq: rewind plan for group %s on topic %s: the route changed while reading (%d queues, then %d)",
			group, topic, len(found), len(committed))
	}
	plan := RewindPlan{Group: group, Topic: topic, To: to, ConsumersOnline: online, Queues: make([]QueueRewind, 0, len(found))}
	for _, f := range found {
		c, ok := byQueue[queueKey{f.Queue.BrokerName, f.Queue.QueueId}]
		if !ok {
			return RewindPlan{}, fmt.Errorf("mq: rewind plan for group %s on topic %s: the route changed while reading (queue %d on broker %s)",
				group, topic, f.Queue.QueueId, f.Queue.BrokerName)
		}
		q := QueueRewind{Topic: topic, Broker: f.Queue.BrokerName, BrokerAddr: f.BrokerAddr, QueueID: f.Queue.QueueId,
			Min: f.Min, Max: f.Max, Committed: c.Committed, Target: min(max(f.Offset, f.Min), f.Max),
			EarliestStoreTime: f.EarliestStoreTime}
		q.ClampToCommitted()
		plan.Queues = append(plan.Queues, q)
		plan.Redeliver += q.Redelivered()
		plan.Clamped += q.Clamped
		if !q.EarliestStoreTime.IsZero() && (plan.Earliest.IsZero() || q.EarliestStoreTime.Before(plan.Earliest)) {
			plan.Earliest = q.EarliestStoreTime
		}
	}
	return plan, nil
}

// Apply sets the group's committed offset of every queue of plan whose
// target differs from the committed offset the plan read to the target,
// then reads the offsets back and checks them. It refuses, with an error
// wrapping ErrConsumersOnline, when clients of the group are online at the
// time of Apply: stop the bridges (every consumer of the group) first, or
// they overwrite the rewound offsets with their own. A client that starts
// during Apply can still do so; the read-back then fails. An error after
// some updates names how many were made; Apply may be called again with the
// same plan.
func (r *Rewinder) Apply(ctx context.Context, plan RewindPlan) error {
	if plan.Group == "" || plan.Topic == "" {
		return fmt.Errorf("mq: rewind needs a plan with a group and a topic (group %q, topic %q)", plan.Group, plan.Topic)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.admin == nil {
		return errors.New("mq: rewinder is closed")
	}
	what := fmt.Sprintf("rewind group %s on topic %s", plan.Group, plan.Topic)
	online, err := r.admin.ConsumerOnline(ctx, plan.Group, plan.Topic)
	if err != nil {
		return r.wrap(what+": clients of the group", plan.Topic, err)
	}
	if online > 0 {
		return fmt.Errorf("mq: %s: %d clients of the group are connected: %w; stop the bridges (every consumer of group %s) and try again: a running consumer commits the offsets it holds over the rewound ones",
			what, online, ErrConsumersOnline, plan.Group)
	}
	updated := 0
	for _, q := range plan.Queues {
		if q.Target == q.Committed {
			continue
		}
		queue := primitive.MessageQueue{Topic: plan.Topic, BrokerName: q.Broker, QueueId: q.QueueID}
		if err := r.admin.UpdateConsumerOffset(ctx, plan.Group, queue, q.Target); err != nil {
			return r.wrap(fmt.Sprintf("%s: queue %d on broker %s to offset %d (%d queues updated before)", what, q.QueueID, q.Broker, q.Target, updated),
				plan.Topic, err)
		}
		updated++
	}
	now, err := r.admin.ConsumeOffsets(ctx, plan.Group, plan.Topic)
	if err != nil {
		return r.wrap(fmt.Sprintf("%s: read the offsets back (%d queues updated)", what, updated), plan.Topic, err)
	}
	committed := make(map[string]int64, len(now))
	for _, q := range now {
		committed[fmt.Sprintf("%s/%d", q.Queue.BrokerName, q.Queue.QueueId)] = q.Committed
	}
	for _, q := range plan.Queues {
		got, ok := committed[fmt.Sprintf("%s/%d", q.Broker, q.QueueID)]
		if !ok {
			return fmt.Errorf("mq: %s: queue %d on broker %s is no longer in the route", what, q.QueueID, q.Broker)
		}
		if got != q.Target {
			return fmt.Errorf("mq: %s: queue %d on broker %s: committed offset %d after the update, want %d (did a consumer of the group start?)",
				what, q.QueueID, q.Broker, got, q.Target)
		}
	}
	return nil
}

// wrap names the name server in err, and wraps ErrNoTopic when the name
// servers do not know topic.
func (r *Rewinder) wrap(what, topic string, err error) error {
	if errors.Is(err, rmqerrors.ErrTopicNotExist) {
		return fmt.Errorf("mq: %s: topic %s: %w (name server %s)", what, topic, ErrNoTopic, r.namesrv)
	}
	return fmt.Errorf("mq: %s (name server %s): %w", what, r.namesrv, err)
}

// Close releases the client.
func (r *Rewinder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.admin == nil {
		return nil
	}
	err := r.admin.Close()
	r.admin = nil
	return err
}
