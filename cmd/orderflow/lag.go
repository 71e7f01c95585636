package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/orderflow/orderflow/config"
	"github.com/orderflow/orderflow/internal/backlog"
	"github.com/orderflow/orderflow/internal/mq"
)

// lagTimeout bounds one reading of the brokers' offsets.
const lagTimeout = 30 * time.Second

// runLag prints the consumer group's backlog as the brokers see it: per
// queue of the topic and of the group's retry topic, the messages stored
// and not consumed, from the offsets the group committed. It needs no
// running bridge.
func runLag(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		cfg  config.Config
		asJS bool
	)
	s := config.NewSet("lag", "Usage: orderflow lag [flags]   (the consumer group's backlog on the broker, per queue)", stderr)
	cfg.RegisterRocketMQ(s)
	cfg.RegisterConsumerGroup(s)
	g := func(flag, usage string) config.Setting { return config.Own("ORDERFLOW_LAG_", flag, usage) }
	s.Bool(&asJS, false, g("json", "print JSON for scripts"))
	if err := parse(s, args); err != nil {
		return err
	}
	for name, v := range map[string]string{"rocketmq-namesrv": cfg.RocketMQNamesrv, "topic": cfg.Topic, "consumer-group": cfg.ConsumerGroup} {
		if strings.TrimSpace(v) == "" {
			return fmt.Errorf("%w: -%s must not be empty", errUsage, name)
		}
	}
	tlsConf, err := cfg.RocketMQTLSConfig()
	if err != nil {
		return err
	}
	// The error says what failed; the client's own log lines would repeat it.
	mq.UseSlog(slog.New(slog.NewTextHandler(io.Discard, nil)), slog.LevelError)
	r, err := backlog.NewReader(backlog.Config{NameServer: cfg.RocketMQNamesrv, AccessKey: cfg.RocketMQAccessKey,
		SecretKey: cfg.RocketMQSecretKey, TLS: tlsConf, Topic: cfg.Topic, Group: cfg.ConsumerGroup})
	if err != nil {
		return err
	}
	defer r.Close()
	rctx, cancel := context.WithTimeout(ctx, lagTimeout)
	defer cancel()
	rep, err := r.Read(rctx)
	if err != nil {
		return fmt.Errorf("cannot read the backlog from RocketMQ (the local stack: `make up`): %w", err)
	}
	if asJS {
		return writeJSON(stdout, rep)
	}
	return writeLag(stdout, rep)
}

// writeLag prints a report as a table of queues, then the total.
func writeLag(w io.Writer, rep backlog.Report) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tBROKER\tQUEUE\tMIN\tMAX\tCOMMITTED\tLAG")
	byTopic := map[string]int64{}
	var topics []string
	for _, q := range rep.Queues {
		committed := "-"
		if q.Committed != nil {
			committed = fmt.Sprint(*q.Committed)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%d\n", q.Topic, q.Broker, q.Queue, q.Min, q.Max, committed, q.Lag)
		if _, ok := byTopic[q.Topic]; !ok {
			topics = append(topics, q.Topic)
		}
		byTopic[q.Topic] += q.Lag
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, t := range rep.Missing {
		fmt.Fprintf(w, "%s: no such topic yet (the broker creates it when the group's first consumer starts): 0\n", t)
	}
	parts := make([]string, len(topics))
	for i, t := range topics {
		parts[i] = fmt.Sprintf("%s %d", t, byTopic[t])
	}
	_, err := fmt.Fprintf(w, "total: %d messages not consumed by group %s (%s) as of %s\n",
		rep.Total, rep.Group, strings.Join(parts, ", "), rep.At.UTC().Format(time.RFC3339))
	return err
}
