package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/orderflow/orderflow/config"
	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/message"
	"github.com/orderflow/orderflow/producer"
	"github.com/orderflow/orderflow/scenario"
)

// runPublish generates a scenario from its flags, publishes its first phase
// to RocketMQ and writes the expected state to the -out file. With -late
// FILE it publishes instead the late phase of the run FILE describes, and
// records that in FILE. The valid events go through package producer, as an
// upstream service sends them: numbered in the run's producer sequence,
// which lives in DATABASE_URL; duplicates and bad messages are published
// raw. A lost event spends the number it would have had without being sent
// (the holes are recorded in the file), and goes out with that number if
// the late phase publishes it. It refuses a name server that is not on this
// machine unless -allow-remote is given (checkLocalNameServer).
func runPublish(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		cfg    config.Config
		o      scenario.Options
		seed   int
		out    string
		late   string
		rate   float64
		remote bool
	)
	s := config.NewSet("publish", "Usage: orderflow publish [flags]   (publish a scenario of order events)", stderr)
	cfg.RegisterRocketMQ(s)
	cfg.RegisterDatabase(s)
	p := func(flag, usage string) config.Setting { return config.Own("ORDERFLOW_PUBLISH_", flag, usage) }
	s.Int(&o.Orders, 200, p("orders", "number of orders"))
	s.Int(&seed, 0, p("seed", "random seed (0 picks one; it is printed and recorded)"))
	s.String(&o.Prefix, "", p("prefix", "order ID prefix, unique per run (empty: run-<time>-<random>)"))
	s.Float(&o.DupRate, 0.1, p("dup-rate", "share of messages sent twice (producer retry)"))
	s.Float(&o.Reorder, 0.3, p("reorder", "share of orders whose events are shuffled"))
	s.Float(&o.CancelRate, 0.2, p("cancel-rate", "share of orders cancelled (half before, half after payment)"))
	s.Float(&o.OpenRate, 0.1, p("open-rate", "share of orders left at a non-terminal status"))
	s.Float(&o.UpdateRate, 0.2, p("update-rate", "chance of a data update at each status"))
	s.Float(&o.GapRate, 0.05, p("gap-rate", "share of orders that lose a middle version"))
	s.Float(&o.UserChangeRate, 0.3, p("user-change-rate", "share of cancelled orders whose cancellation names another user and amount"))
	s.Int(&o.Conflicts, 5, p("conflicts", "number of conflicting copies (same business key, different occurred_at)"))
	s.Int(&o.Bad, 6, p("bad", "number of bad messages (malformed, missing fields, invalid status or order ID, oversize)"))
	s.Int(&o.Illegal, 0, p("illegal", "late phase: orders that get an event their final status cannot reach"))
	s.Int(&o.LateConflicts, 0, p("late-conflicts", "late phase: conflicting copies differing in every content field"))
	s.Float(&o.LateRate, 0, p("late-rate", "late phase: share of orders that get their lost event, or a repeat, late"))
	s.String(&out, "expected.json", p("out", "file to write the expected final state to"))
	s.String(&late, "", p("late", "publish the late phase of the run whose expected-state file this is (written by an earlier publish), "+
		"once its first phase has settled, and record it there; the scenario comes from the file"))
	s.Float(&rate, 0, p("rate", "publish at most this many messages per second (0: unlimited)"))
	s.Bool(&remote, false, config.Setting{Flag: "allow-remote", Usage: "publish to a name server that is not on this machine " +
		"(the scenario's orders earn points wherever they land; by default only a loopback name server, the local stack, is accepted; no variable sets it)"})
	if err := parse(s, args); err != nil {
		return err
	}
	if err := checkLocalNameServer(cfg.RocketMQNamesrv); err != nil && !remote {
		return fmt.Errorf("%w: %w: orderflow publish sends synthetic orders that earn points, so it publishes only to the local stack; "+
			"pass -allow-remote to publish there", errUsage, err)
	}
	if late != "" {
		return publishLate(ctx, cfg, late, rate, stdout)
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
	// The file records what has been published: the first phase.
	exp := sc.Expected.FirstPhase()
	exp.Topic = cfg.Topic

	pr, err := newPublisher(cfg, o.Prefix)
	if err != nil {
		return err
	}
	defer pr.Close()
	events, err := newEventSender(ctx, cfg, exp.Options.ProducerID, o.Prefix)
	if err != nil {
		return err
	}
	defer events.Close()

	c := sc.Expected.Counts
	fmt.Fprintf(stdout, "publishing run %s (seed %d) to topic %s: %d orders, %d messages (%d events, %d duplicates, %d conflicts, %d bad; %d reordered orders, %d lost events, %d user changes)\n",
		o.Prefix, o.Seed, cfg.Topic, c.Orders, len(sc.Messages), c.Events, c.Duplicates, c.Conflicts, c.Bad, c.Reordered, c.Lost, c.UserChanges)
	began := time.Now()
	err = scenario.Publish(ctx, pr, sc.Messages, scenario.PublishOptions{Topic: cfg.Topic, Rate: rate, Events: events,
		OnHole: func(h scenario.Hole) { exp.Holes = append(exp.Holes, h) }})
	if err != nil {
		return err
	}
	if err := exp.WriteFile(out); err != nil {
		return err
	}
	numbered, err := events.numbered(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "published %d messages in %s (%s); expected state written to %s\n",
		len(sc.Messages), time.Since(began).Round(time.Millisecond), numbered, out)
	if len(exp.Holes) > 0 {
		fmt.Fprintf(stdout, "lost %d events: their numbers spent, never sent (seq %s)\n", len(exp.Holes), holeSeqs(exp.Holes))
	}
	if len(sc.Late) > 0 {
		fmt.Fprintf(stdout, "late phase: %d messages (%d illegal events); once the run has settled (orderflow check -expected %s), publish them with: orderflow publish -late %s\n",
			len(sc.Late), c.Illegal, out, out)
	}
	return nil
}

// publishLate publishes the late phase of the run described by the
// expected-state file path and records it there.
func publishLate(ctx context.Context, cfg config.Config, path string, rate float64, stdout io.Writer) error {
	exp, err := scenario.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if exp.Topic != "" && exp.Topic != cfg.Topic {
		return fmt.Errorf("%w: run %s was published to topic %s, not %s (set -topic)", errUsage, exp.Prefix, exp.Topic, cfg.Topic)
	}
	sc, err := scenario.Generate(exp.Options)
	if err != nil {
		return fmt.Errorf("regenerate run %s from %s: %w", exp.Prefix, path, err)
	}
	if sc.Expected.Counts != exp.Counts {
		return fmt.Errorf("run %s: %s does not regenerate the same scenario (counts %+v, file says %+v)", exp.Prefix, path, sc.Expected.Counts, exp.Counts)
	}
	if len(sc.Late) == 0 {
		return fmt.Errorf("%w: run %s has no late phase (publish it with -illegal, -late-conflicts or -late-rate)", errUsage, exp.Prefix)
	}
	pr, err := newPublisher(cfg, exp.Prefix)
	if err != nil {
		return err
	}
	defer pr.Close()
	events, err := newEventSender(ctx, cfg, exp.Options.ProducerID, exp.Prefix)
	if err != nil {
		return err
	}
	defer events.Close()
	fmt.Fprintf(stdout, "publishing the late phase of run %s to topic %s: %d messages (%d illegal events)\n",
		exp.Prefix, cfg.Topic, len(sc.Late), sc.Expected.Counts.Illegal)
	began := time.Now()
	if err := scenario.Publish(ctx, pr, sc.Late, scenario.PublishOptions{Topic: cfg.Topic, Rate: rate, Events: events,
		Holes: exp.Holes}); err != nil {
		return err
	}
	exp.Phases = sc.Expected.Phases
	if err := exp.WriteFile(path); err != nil {
		return err
	}
	numbered, err := events.numbered(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "published %d messages in %s (%s); expected state updated in %s\n",
		len(sc.Late), time.Since(began).Round(time.Millisecond), numbered, path)
	if closed := len(exp.Holes) - len(exp.OpenHoles()); closed > 0 {
		fmt.Fprintf(stdout, "%d lost events arrived late with their numbers; still lost: %d\n", closed, len(exp.OpenHoles()))
	}
	return nil
}

// checkLocalNameServer returns nil when every name server in the
// comma-separated list namesrv is on this machine: "localhost" (or a name
// under .localhost) or a loopback IP address, with a port. Names are not
// resolved: any other name, an HTTP endpoint or an unspecified address
// (0.0.0.0) counts as remote.
func checkLocalNameServer(namesrv string) error {
	addrs := strings.Split(namesrv, ",")
	for _, a := range addrs {
		a = strings.TrimSpace(a)
		host, _, err := net.SplitHostPort(a)
		if err != nil {
			return fmt.Errorf("name server %q is not a loopback host:port", a)
		}
		h := strings.ToLower(host)
		if h == "localhost" || strings.HasSuffix(h, ".localhost") {
			continue
		}
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			return fmt.Errorf("name server %s is not on this machine (loopback)", a)
		}
	}
	return nil
}

// holeSeqs renders the numbers of holes as "4, 17, 30".
func holeSeqs(hs []scenario.Hole) string {
	seqs := make([]string, len(hs))
	for i, h := range hs {
		seqs[i] = fmt.Sprint(h.Seq)
	}
	return strings.Join(seqs, ", ")
}

func newPublisher(cfg config.Config, prefix string) (*mq.Producer, error) {
	tlsConf, err := cfg.RocketMQTLSConfig()
	if err != nil {
		return nil, err
	}
	return mq.NewProducer(cfg.RocketMQNamesrv, mq.WithProducerGroup("orderflow-publish-"+prefix),
		mq.WithCredentials(cfg.RocketMQAccessKey, cfg.RocketMQSecretKey), mq.WithTLS(tlsConf))
}

// eventSender sends a scenario's valid events through package producer,
// numbered in the sequence of producer ID id, kept in DATABASE_URL.
type eventSender struct {
	id    string
	db    interface{ Close() error }
	p     *producer.Producer
	first int64 // the first number of this run of the command
	seqOf func(context.Context) (int64, error)
}

func newEventSender(ctx context.Context, cfg config.Config, id, prefix string) (*eventSender, error) {
	tlsConf, err := cfg.RocketMQTLSConfig()
	if err != nil {
		return nil, err
	}
	db, err := openStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	p, err := producer.New(db.DB(), producer.Config{NameServer: cfg.RocketMQNamesrv, Topic: cfg.Topic,
		ProducerID: id, Group: "orderflow-publish-" + prefix,
		AccessKey: cfg.RocketMQAccessKey, SecretKey: cfg.RocketMQSecretKey, TLS: tlsConf})
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	s := &eventSender{id: id, db: db, p: p,
		seqOf: func(ctx context.Context) (int64, error) { return producer.NextSeq(ctx, db.DB(), id) }}
	if s.first, err = s.seqOf(ctx); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// SendEvent sends the event of a generated body, numbered, and returns the
// body as sent.
func (s *eventSender) SendEvent(ctx context.Context, body []byte) ([]byte, error) {
	e, err := message.Decode(body)
	if err != nil {
		return nil, fmt.Errorf("generated event does not decode: %w", err)
	}
	sent, err := s.p.Send(ctx, e)
	if err != nil {
		return nil, err
	}
	return sent.Body, nil
}

// SkipSeq spends the producer's next number without sending anything: a
// lost event.
func (s *eventSender) SkipSeq(ctx context.Context) (string, int64, error) {
	seq, err := s.p.Skip(ctx)
	return s.id, seq, err
}

// SendSkipped sends the event of a generated body numbered seq, a number
// SkipSeq spent, and returns the body as sent.
func (s *eventSender) SendSkipped(ctx context.Context, body []byte, seq int64) ([]byte, error) {
	e, err := message.Decode(body)
	if err != nil {
		return nil, fmt.Errorf("generated event does not decode: %w", err)
	}
	sent, err := s.p.SendSkipped(ctx, e, seq)
	if err != nil {
		return nil, err
	}
	return sent.Body, nil
}

// numbered says which numbers this run of the command used.
func (s *eventSender) numbered(ctx context.Context) (string, error) {
	next, err := s.seqOf(ctx)
	if err != nil {
		return "", err
	}
	if next == s.first {
		return fmt.Sprintf("producer %s, no number used", s.id), nil
	}
	return fmt.Sprintf("producer %s, seq %d-%d", s.id, s.first, next-1), nil
}

// Close shuts the producer down and closes the database.
func (s *eventSender) Close() error {
	return errors.Join(s.p.Close(), s.db.Close())
}
