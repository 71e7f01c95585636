package scenario

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/orderflow/orderflow/internal/mq"
)

// Publisher sends one message to the broker as it is; *mq.Producer is one.
type Publisher interface {
	Publish(ctx context.Context, m mq.Message) (mq.Receipt, error)
}

// EventSender sends valid events the way upstream services do, numbered
// in its producer's sequence (its own producer_id and seq in place of the
// generated ones), and loses events as a broker that lost a message would:
// their numbers spent, nothing sent. orderflow publish wraps package
// producer in one.
type EventSender interface {
	// SendEvent sends the event of a generated JSON body with the
	// producer's next number and returns the body as sent.
	SendEvent(ctx context.Context, body []byte) ([]byte, error)
	// SkipSeq spends the producer's next number without sending anything
	// and returns the producer ID and the number: a hole in the sequence.
	SkipSeq(ctx context.Context) (producerID string, seq int64, err error)
	// SendSkipped sends the event of a generated JSON body numbered seq,
	// a number SkipSeq returned (closing that hole), and returns the body
	// as sent.
	SendSkipped(ctx context.Context, body []byte, seq int64) ([]byte, error)
}

// PublishOptions configures Publish.
type PublishOptions struct {
	// Topic is the topic every message goes to.
	Topic string
	// Rate limits publishing to this many messages per second; 0 means no
	// limit.
	Rate float64
	// Attempts is how many times a failed send is tried before Publish
	// gives up (default 20). A send that failed may still have been
	// stored, so a retry can add a duplicate; consumers deduplicate.
	Attempts int
	// Progress, when set, is called after each message with the number
	// sent so far.
	Progress func(sent int)
	// Events, when set, sends the valid events (KindEvent, KindConflict and
	// KindIllegal messages) through it. A duplicate of a message this call
	// sent through it repeats, raw, the bytes sent, as a producer retry
	// does; a duplicate of a message sent earlier (by another call) goes
	// through it too. Bad messages always go raw through the Publisher.
	//
	// Through it, the events a message lists as LostAfter spend their
	// sequence numbers, after the message is sent; without it, the
	// generated numbers of lost events are the holes.
	Events EventSender
	// Holes are the numbers an earlier call spent on lost events
	// (Expected.Holes): a lost event this call publishes (a KindEvent
	// message with a hole's business key) goes out through Events with
	// its hole's number, as a late arrival.
	Holes []Hole
	// OnHole, when set, is called with each number spent on a lost event,
	// in publish order; the publish command records them in the expected
	// state.
	OnHole func(Hole)
}

// Publish sends msgs in order, one at a time, so that the events of one
// order reach their queue in publish order. After a message, it loses the
// events the message lists as LostAfter (see PublishOptions.Events).
func Publish(ctx context.Context, p Publisher, msgs []Message, o PublishOptions) error {
	if o.Topic == "" {
		return errors.New("scenario: publish: topic is empty")
	}
	if o.Rate < 0 {
		return fmt.Errorf("scenario: publish: rate must be >= 0, got %g", o.Rate)
	}
	attempts := o.Attempts
	if attempts <= 0 {
		attempts = 20
	}
	var interval time.Duration
	if o.Rate > 0 {
		interval = time.Duration(float64(time.Second) / o.Rate)
	}
	start := time.Now()
	sent := map[string][]byte{} // generated body -> body as sent through Events
	holes := map[Key]int64{}
	for _, h := range o.Holes {
		holes[h.Key()] = h.Seq
	}
	try := func(i int, keys string, what func() error) error {
		var err error
		for a := 1; a <= attempts; a++ {
			if err = what(); err == nil {
				return nil
			}
			slog.Warn("publish failed, retrying", "message", i, "keys", keys, "attempt", a, "err", err)
			if serr := sleep(ctx, time.Duration(a)*250*time.Millisecond); serr != nil {
				break
			}
		}
		return fmt.Errorf("scenario: publish message %d of %d (keys %s): %w", i+1, len(msgs), keys, err)
	}
	for i, m := range msgs {
		if interval > 0 {
			if err := sleep(ctx, time.Until(start.Add(time.Duration(i)*interval))); err != nil {
				return fmt.Errorf("scenario: publish: stopped after %d of %d messages: %w", i, len(msgs), err)
			}
		}
		msg := m.Msg
		msg.Topic = o.Topic
		send := func() error {
			_, err := p.Publish(ctx, msg)
			return err
		}
		if o.Events != nil {
			b, repeat := sent[string(m.Msg.Body)]
			seq, late := holes[m.Event.Key()]
			switch {
			case m.Kind == KindDuplicate && repeat:
				msg.Body = b
			case m.Kind == KindEvent && late:
				send = func() error {
					b, err := o.Events.SendSkipped(ctx, m.Msg.Body, seq)
					if err == nil {
						sent[string(m.Msg.Body)] = b
					}
					return err
				}
			case m.Kind != KindBad:
				send = func() error {
					b, err := o.Events.SendEvent(ctx, m.Msg.Body)
					if err == nil {
						sent[string(m.Msg.Body)] = b
					}
					return err
				}
			}
		}
		if err := try(i, msg.Keys, send); err != nil {
			return err
		}
		for _, e := range m.LostAfter {
			h := Hole{ProducerID: e.ProducerID, Seq: e.Seq, OrderID: e.OrderID, Version: e.Version}
			if o.Events != nil {
				err := try(i, msg.Keys, func() error {
					var err error
					if h.ProducerID, h.Seq, err = o.Events.SkipSeq(ctx); err != nil {
						return fmt.Errorf("lose %s after it: %w", e.Key(), err)
					}
					return nil
				})
				if err != nil {
					return err
				}
			}
			if o.OnHole != nil {
				o.OnHole(h)
			}
		}
		if o.Progress != nil {
			o.Progress(i + 1)
		}
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
