package scenario

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/orderflow/orderflow/config"
	"github.com/orderflow/orderflow/internal/mq"
)

// Publisher sends one message to the broker; *mq.Producer is one.
type Publisher interface {
	Publish(ctx context.Context, m mq.Message) (mq.Receipt, error)
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
}

// Publish sends msgs in order, one at a time, so that the events of one
// order reach their queue in publish order.
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
	for i, m := range msgs {
		if interval > 0 {
			if err := sleep(ctx, time.Until(start.Add(time.Duration(i)*interval))); err != nil {
				return fmt.Errorf("scenario: publish: stopped after %d of %d messages: %w", i, len(msgs), err)
			}
		}
		msg := m.Msg
		msg.Topic = o.Topic
		var err error
		for a := 1; a <= attempts; a++ {
			if _, err = p.Publish(ctx, msg); err == nil {
				break
			}
			slog.Warn("publish failed, retrying", "message", i, "keys", msg.Keys, "attempt", a, "err", err)
			if serr := sleep(ctx, time.Duration(a)*250*time.Millisecond); serr != nil {
				break
			}
		}
		if err != nil {
			return fmt.Errorf("scenario: publish message %d of %d (keys %s): %w", i+1, len(msgs), msg.Keys, err)
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

// NewRunPrefix returns a fresh run prefix: "run-<UTC time>-<random hex>".
func NewRunPrefix() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return "run-" + time.Now().UTC().Format("20060102T150405") + "-" + hex.EncodeToString(b[:])
}

// RunPublish is the "publish" command: it generates a scenario from its
// flags, publishes it to RocketMQ and writes the expected final state to the
// -out file.
func RunPublish(ctx context.Context, args []string, stdout io.Writer) error {
	cfg := config.FromEnv()
	fs := flag.NewFlagSet("publish", flag.ContinueOnError)
	fs.SetOutput(stdout)
	var o Options
	fs.IntVar(&o.Orders, "orders", 200, "number of orders")
	fs.Int64Var(&o.Seed, "seed", 0, "random seed (0 picks one; it is printed and recorded)")
	fs.StringVar(&o.Prefix, "prefix", "", "order ID prefix, unique per run (default run-<time>-<random>)")
	fs.Float64Var(&o.DupRate, "dup-rate", 0.1, "share of messages sent twice (producer retry)")
	fs.Float64Var(&o.Reorder, "reorder", 0.3, "share of orders whose events are shuffled")
	fs.Float64Var(&o.CancelRate, "cancel-rate", 0.2, "share of orders cancelled (half before, half after payment)")
	fs.Float64Var(&o.OpenRate, "open-rate", 0.1, "share of orders left at a non-terminal status")
	fs.Float64Var(&o.UpdateRate, "update-rate", 0.2, "chance of a data update at each non-terminal status")
	fs.Float64Var(&o.GapRate, "gap-rate", 0.05, "share of orders that lose a middle version")
	fs.IntVar(&o.Conflicts, "conflicts", 5, "number of conflicting copies (same business key, different content)")
	fs.IntVar(&o.Bad, "bad", 6, "number of bad messages (malformed, missing fields, invalid status or order ID, oversize)")
	out := fs.String("out", "expected.json", "file to write the expected final state to")
	topic := fs.String("topic", cfg.Topic, "RocketMQ topic (env ORDERFLOW_TOPIC)")
	namesrv := fs.String("namesrv", cfg.RocketMQNamesrv, "RocketMQ name server host:port (env ROCKETMQ_NAMESRV)")
	rate := fs.Float64("rate", 0, "publish at most this many messages per second (0 = unlimited)")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("publish: unexpected arguments %q", fs.Args())
	}
	if o.Prefix == "" {
		o.Prefix = NewRunPrefix()
	}
	if o.Seed == 0 {
		o.Seed = time.Now().UnixNano()
	}
	o.Start = time.Now().UTC().Truncate(time.Second)
	s, err := Generate(o)
	if err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	s.Expected.Topic = *topic

	p, err := mq.NewProducer(*namesrv, mq.WithProducerGroup("orderflow-publish-"+o.Prefix))
	if err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	defer p.Close()

	c := s.Expected.Counts
	fmt.Fprintf(stdout, "publishing run %s (seed %d) to topic %s: %d orders, %d messages (%d events, %d duplicates, %d conflicts, %d bad; %d reordered orders, %d lost events)\n",
		o.Prefix, o.Seed, *topic, c.Orders, c.Messages, c.Events, c.Duplicates, c.Conflicts, c.Bad, c.Reordered, c.Lost)
	began := time.Now()
	if err := Publish(ctx, p, s.Messages, PublishOptions{Topic: *topic, Rate: *rate}); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	if err := s.Expected.WriteFile(*out); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	fmt.Fprintf(stdout, "published %d messages in %s; expected state written to %s\n",
		c.Messages, time.Since(began).Round(time.Millisecond), *out)
	return nil
}
