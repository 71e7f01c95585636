package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/orderflow/orderflow/config"
	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/scenario"
)

// runPublish generates a scenario from its flags, publishes it to RocketMQ
// and writes the expected final state to the -out file.
func runPublish(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		cfg  config.Config
		o    scenario.Options
		seed int
		out  string
		rate float64
	)
	s := config.NewSet("publish", "Usage: orderflow publish [flags]   (publish a scenario of order events)", stderr)
	cfg.RegisterRocketMQ(s)
	p := func(flag, usage string) config.Setting { return config.Own("ORDERFLOW_PUBLISH_", flag, usage) }
	s.Int(&o.Orders, 200, p("orders", "number of orders"))
	s.Int(&seed, 0, p("seed", "random seed (0 picks one; it is printed and recorded)"))
	s.String(&o.Prefix, "", p("prefix", "order ID prefix, unique per run (empty: run-<time>-<random>)"))
	s.Float(&o.DupRate, 0.1, p("dup-rate", "share of messages sent twice (producer retry)"))
	s.Float(&o.Reorder, 0.3, p("reorder", "share of orders whose events are shuffled"))
	s.Float(&o.CancelRate, 0.2, p("cancel-rate", "share of orders cancelled (half before, half after payment)"))
	s.Float(&o.OpenRate, 0.1, p("open-rate", "share of orders left at a non-terminal status"))
	s.Float(&o.UpdateRate, 0.2, p("update-rate", "chance of a data update at each non-terminal status"))
	s.Float(&o.GapRate, 0.05, p("gap-rate", "share of orders that lose a middle version"))
	s.Int(&o.Conflicts, 5, p("conflicts", "number of conflicting copies (same business key, different content)"))
	s.Int(&o.Bad, 6, p("bad", "number of bad messages (malformed, missing fields, invalid status or order ID, oversize)"))
	s.String(&out, "expected.json", p("out", "file to write the expected final state to"))
	s.Float(&rate, 0, p("rate", "publish at most this many messages per second (0: unlimited)"))
	if err := parse(s, args); err != nil {
		return err
	}
	o.Seed = int64(seed)
	if o.Prefix == "" {
		o.Prefix = uniq.Name("run")
	}
	if o.Seed == 0 {
		o.Seed = time.Now().UnixNano()
	}
	o.Start = time.Now().UTC().Truncate(time.Second)
	sc, err := scenario.Generate(o)
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	sc.Expected.Topic = cfg.Topic

	pr, err := mq.NewProducer(cfg.RocketMQNamesrv, mq.WithProducerGroup("orderflow-publish-"+o.Prefix),
		mq.WithCredentials(cfg.RocketMQAccessKey, cfg.RocketMQSecretKey))
	if err != nil {
		return err
	}
	defer pr.Close()

	c := sc.Expected.Counts
	fmt.Fprintf(stdout, "publishing run %s (seed %d) to topic %s: %d orders, %d messages (%d events, %d duplicates, %d conflicts, %d bad; %d reordered orders, %d lost events)\n",
		o.Prefix, o.Seed, cfg.Topic, c.Orders, c.Messages, c.Events, c.Duplicates, c.Conflicts, c.Bad, c.Reordered, c.Lost)
	began := time.Now()
	if err := scenario.Publish(ctx, pr, sc.Messages, scenario.PublishOptions{Topic: cfg.Topic, Rate: rate}); err != nil {
		return err
	}
	if err := sc.Expected.WriteFile(out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "published %d messages in %s; expected state written to %s\n",
		c.Messages, time.Since(began).Round(time.Millisecond), out)
	return nil
}
