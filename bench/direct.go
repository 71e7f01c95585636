package main

import (
	"context"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/message"
	"github.com/orderflow/orderflow/store"
	"github.com/orderflow/orderflow/wire"
)

// direct is the baseline without Temporal: a RocketMQ push consumer that
// applies each event in-process with the same ApplyEvent transaction and
// points row as orderflow, acking only after both committed.
type direct struct {
	consumer *mq.Consumer
	db       *store.Store
}

// startDirect starts the direct consumer on topic with its own group.
func startDirect(ctx context.Context, dsn, namesrv, topic, group string, goroutines, batch int) (*direct, error) {
	db, err := store.Open(ctx, dsn, 20)
	if err != nil {
		return nil, err
	}
	c, err := mq.NewConsumer(mq.ConsumerConfig{NameServer: namesrv, Topic: topic, Group: group,
		Goroutines: goroutines, BatchSize: batch, MaxInflatedBody: wire.MaxBodySize},
		func(ctx context.Context, m *primitive.MessageExt) error { return handleDirect(ctx, db, m) })
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	if err := c.Start(); err != nil {
		_ = db.Close()
		return nil, err
	}
	return &direct{consumer: c, db: db}, nil
}

// Stop stops consuming, waiting for the messages in flight.
func (d *direct) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = d.consumer.Stop(ctx)
	_ = d.db.Close()
}

// handleDirect parks an invalid message, or applies its event and awards
// the points its decision moves. An error hands the message back to the
// broker; every step is idempotent.
func handleDirect(ctx context.Context, db *store.Store, m *primitive.MessageExt) error {
	env := wire.NewEnvelope(m.Topic, m.MsgId, m.GetKeys(), m.GetTags(), m.Body, time.Time{}, mq.InflateRefused(m))
	r := message.Parse(env)
	if r.Rejection != nil {
		_, err := db.ParkDeadLetter(ctx, r.DeadLetter)
		return err
	}
	e := r.Event
	res, err := db.ApplyEvent(ctx, e, env)
	if err != nil {
		return err
	}
	d := res.Decision
	if d.Points == fsm.PointsNone {
		return nil
	}
	_, err = db.AwardPoints(ctx, store.PointsRow{OrderID: e.OrderID, UserID: d.Next.PointsUser(),
		Kind: d.Points, Points: d.PointsDelta, Version: e.Version})
	return err
}
