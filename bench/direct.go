package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	gormlogger "gorm.io/gorm/logger"

	"github.com/orderflow/orderflow/activities"
	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/message"
)

// direct is the baseline without Temporal, the approach of the seed
// articles: a RocketMQ push consumer that applies each event in-process with
// the same ApplyEvent transaction (business key, version guard, state
// machine) and inserts the points row, acking only after both committed.
type direct struct {
	consumer *mq.Consumer
	db       *gorm.DB
}

// startDirect starts the direct consumer on topic with its own group.
func startDirect(dsn, namesrv, topic, group string, goroutines, batch int) (*direct, error) {
	db, err := gorm.Open(postgres.Open(dsn), &gorm.Config{Logger: gormlogger.Discard})
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, err
	}
	sqlDB.SetMaxOpenConns(20)
	sqlDB.SetMaxIdleConns(20)
	acts := &activities.Activities{DB: db, Topic: topic}
	c, err := mq.NewConsumer(mq.ConsumerConfig{NameServer: namesrv, Topic: topic, Group: group,
		Goroutines: goroutines, BatchSize: batch}, func(ctx context.Context, m *primitive.MessageExt) error {
		return handleDirect(ctx, acts, m)
	})
	if err != nil {
		_ = sqlDB.Close()
		return nil, err
	}
	if err := c.Start(); err != nil {
		_ = sqlDB.Close()
		return nil, err
	}
	return &direct{consumer: c, db: db}, nil
}

// Stop stops consuming, waiting for the messages in flight.
func (d *direct) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = d.consumer.Stop(ctx)
	if sqlDB, err := d.db.DB(); err == nil {
		_ = sqlDB.Close()
	}
}

// handleDirect applies one message: park it when invalid, otherwise apply
// the event and award the points its decision moves. An error hands the
// message back to the broker; every step is idempotent, so redelivery is
// safe.
func handleDirect(ctx context.Context, acts *activities.Activities, m *primitive.MessageExt) error {
	e, err := message.Decode(m.Body)
	if err != nil {
		var rej *message.Rejection
		if !errors.As(err, &rej) {
			return err
		}
		body := m.Body
		if body == nil {
			body = []byte{}
		}
		_, err := acts.ParkDeadLetter(ctx, activities.DeadLetter{
			Topic: m.Topic, MessageID: message.Sanitize(m.MsgId, 1024), Keys: message.Sanitize(m.GetKeys(), 1024),
			Tags: message.Sanitize(m.GetTags(), 1024), Body: body, Reason: rej.Reason,
		})
		return err
	}
	res, err := acts.ApplyEvent(ctx, activities.ApplyEventInput{Event: e})
	if err != nil {
		return err
	}
	d := res.Decision
	if d.Points == fsm.PointsNone {
		return nil
	}
	_, err = acts.AwardPoints(ctx, activities.AwardPointsInput{OrderID: e.OrderID, UserID: d.Next.UserID,
		Kind: d.Points, Points: d.PointsDelta, Version: e.Version})
	return err
}
