package producer

import (
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/mq"
)

// Producer sends order events synchronously: each Send returns once the
// broker confirmed the message as stored (SEND_OK), or with an error after
// at most Config.MaxAttempts attempts. It is safe for concurrent use; sends
// are serialized by the producer's sequence (see the package
// documentation).
type Producer struct {
	cfg Config
	db  *gorm.DB
	mq  *mq.Producer
}

// New starts a synchronous producer whose sequence lives in db, the
// producer's database (with Schema applied).
func New(db *gorm.DB, cfg Config) (*Producer, error) {
	if db == nil {
		return nil, errors.New("producer: no database")
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if cfg.Group == "" {
		cfg.Group = "orderflow-producer"
	}
	p, err := mq.NewProducer(cfg.NameServer, append(cfg.mqOptions(), mq.WithProducerGroup(cfg.Group))...)
	if err != nil {
		return nil, fmt.Errorf("producer: %w", err)
	}
	return &Producer{cfg: cfg, db: db, mq: p}, nil
}

// Send numbers e with the producer's next sequence number (its ProducerID
// and Seq are overwritten), sends it and returns it as sent. e must be a
// valid event (fsm.Event.Validate).
//
// The number is allocated in a database transaction that stays open while
// the message is sent and commits only after the broker stored it: a
// failed send returns an error and leaves no hole, the next message taking
// the same number. Should the process die, or the commit fail, after the
// broker stored the message, the next message reuses its number (a repeat,
// never a hole); Send then still reports success, and logs a warning.
//
// The send is a span, "send <topic>", a child of the span in ctx, and the
// message carries its W3C trace context (see the package documentation).
func (p *Producer) Send(ctx context.Context, e fsm.Event) (sent Sent, err error) {
	if _, _, err := number(p.cfg.Topic, p.cfg.ProducerID, 1, e); err != nil {
		return Sent{}, fmt.Errorf("producer: send %s: %w", e.Key(), err)
	}
	ctx, span := startSend(ctx, p.cfg.Topic, e)
	defer func() { endSend(span, sent, err) }()
	return p.send(ctx, e)
}

func (p *Producer) send(ctx context.Context, e fsm.Event) (Sent, error) {
	var (
		sent   Sent
		stored bool
	)
	err := p.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		seq, err := allocate(tx, p.cfg.ProducerID)
		if err != nil {
			return err
		}
		e, m, err := number(p.cfg.Topic, p.cfg.ProducerID, seq, e)
		if err != nil {
			return err
		}
		m = traced(ctx, m)
		r, err := retry(ctx, p.cfg, "send", func(actx context.Context) (mq.Receipt, error) {
			return p.mq.Publish(actx, m)
		})
		if err != nil {
			return err
		}
		stored = true
		sent = Sent{Event: e, Body: m.Body, MessageID: r.MessageID, QueueID: r.QueueID, QueueOffset: r.QueueOffset}
		return nil
	})
	if err != nil {
		if stored {
			p.cfg.Logger.Warn("message stored, but its sequence number was not committed; the next message may repeat it",
				"producer_id", p.cfg.ProducerID, "seq", sent.Event.Seq, "message_id", sent.MessageID, "err", err)
			return sent, nil
		}
		return Sent{}, fmt.Errorf("producer: send %s: %w", e.Key(), err)
	}
	return sent, nil
}

// Close shuts the producer's client down. It does not close db.
func (p *Producer) Close() error {
	return p.mq.Close()
}
