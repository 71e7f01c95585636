package producer

import (
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/mq"
)

// Skip spends the producer's next sequence number without sending
// anything, and returns it: the sequence gets a hole there. It simulates a
// message that the broker lost after confirming it, for tests and
// demonstrations (orderflow publish does it for a scenario's lost events),
// so that the loss detection downstream has a real hole to find; a
// producer has no other use for it, since consumers report a hole that
// stays open as a suspected loss (docs/design.md §2.8). SendSkipped can
// send a message with the number later, as a late arrival that closes the
// hole.
//
// The number is taken, and committed, like Send's, under the producer's
// row lock. An error means no number was spent, except when the commit
// failed without saying whether it took effect.
func (p *Producer) Skip(ctx context.Context) (int64, error) {
	var seq int64
	err := p.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var err error
		seq, err = allocate(tx, p.cfg.ProducerID)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("producer: skip a sequence number: %w", err)
	}
	return seq, nil
}

// SendSkipped sends e numbered seq, a number Skip returned, synchronously
// as Send does (e's ProducerID and Seq are overwritten), and returns it as
// sent. The message arrives after higher numbers of the producer, like a
// late delivery, and closes the hole Skip made. It refuses a seq the
// producer has not handed out yet; it cannot tell whether a message already
// carries seq, in which case the message repeats the number with other
// content, which consumers do not count as a hole. Nothing is committed:
// the sequence's counter does not change.
func (p *Producer) SendSkipped(ctx context.Context, e fsm.Event, seq int64) (Sent, error) {
	e, m, err := number(p.cfg.Topic, p.cfg.ProducerID, seq, e)
	if err != nil {
		return Sent{}, fmt.Errorf("producer: send %s: %w", e.Key(), err)
	}
	next, err := NextSeq(ctx, p.db, p.cfg.ProducerID)
	if err != nil {
		return Sent{}, err
	}
	if seq < 1 || seq >= next {
		return Sent{}, fmt.Errorf("producer: send %s as seq %d: %w (the next number of %s is %d)",
			e.Key(), seq, errNotSkipped, p.cfg.ProducerID, next)
	}
	r, err := retry(ctx, p.cfg, "send", func(actx context.Context) (mq.Receipt, error) {
		return p.mq.Publish(actx, m)
	})
	if err != nil {
		return Sent{}, fmt.Errorf("producer: send %s as seq %d: %w", e.Key(), seq, err)
	}
	return Sent{Event: e, Body: m.Body, MessageID: r.MessageID, QueueID: r.QueueID, QueueOffset: r.QueueOffset}, nil
}

// errNotSkipped: SendSkipped was given a number not handed out yet.
var errNotSkipped = errors.New("not a number the producer handed out")
