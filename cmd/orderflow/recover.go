package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"

	"github.com/orderflow/orderflow/api"
	"github.com/orderflow/orderflow/config"
	"github.com/orderflow/orderflow/dedup"
	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/internal/recovery"
	"github.com/orderflow/orderflow/store"
	"github.com/orderflow/orderflow/workflows"
)

// DefaultRecoverMargin is how far before the backup's time (-since)
// recover rewinds a queue the restored database records no recovery point
// for: messages stored a little before the backup may have been applied
// only after it. Queues with a point need no time.
const DefaultRecoverMargin = 5 * time.Minute

// recoverTimeout bounds each of recover's and rewind's steps.
const recoverTimeout = 2 * time.Minute

// recoverReport is what recover did, or in a dry run would do.
type recoverReport struct {
	DryRun bool `json:"dry_run"`
	// Since is the backup's time, when given; Fallback the time a queue
	// with no recovery point is rewound to (Since minus the margin).
	Since    time.Time `json:"since,omitzero"`
	Fallback time.Time `json:"fallback,omitzero"`
	// Rewind is the consumer group's plan on the topic and its retry
	// topic: each queue to its recovery point.
	Rewind recovery.Plan `json:"rewind"`
	// ConsumersOnline is the number of clients of the group connected.
	ConsumersOnline int `json:"consumers_online"`
	// RedisKeys is the number of the duplicate filter's Redis keys deleted
	// (counted in a dry run); -1 when Redis is not configured.
	RedisKeys int64 `json:"redis_keys"`
	// OpenRuns counts the running order workflows of the task queue; Ended
	// lists those ended (to end, in a dry run) because their code skips
	// events on its memory's word.
	OpenRuns int      `json:"open_runs"`
	Ended    []string `json:"ended"`
	// DeadLetters is the number of parked messages a dead-letter replay
	// would deliver now; Replay the command that does it (those replayed
	// after the backup lost their effect with the restore).
	DeadLetters int    `json:"dead_letters_to_replay"`
	Replay      string `json:"replay_command,omitempty"`
}

// runRecover is `orderflow recover [-since T] [-yes]`: after orderflow's
// database was restored from a backup, it makes every event whose effect
// the restored database lacks take effect again, exactly once. It reads,
// from the restored database, each broker queue's recovery point (the
// first message whose effect it may lack), deletes the duplicate filter's
// Redis keys (they would confirm as duplicates the messages the database
// lost), ends the running order workflows whose code skips an event on its
// memory's word (those older than ChangeLocalActivities version 5; newer
// runs ask the database and reload), counts the dead letters a replay
// would deliver (one replayed after the backup lost its effect) and
// rewinds the bridges' consumer group, queue by queue, to the points —
// never past its committed offset. The database itself is not touched: it
// judges each redelivered event. A queue the database has no point for is
// rewound to -since minus -margin, and refused without -since. Without
// -yes it is a dry run that says what it would do.
func runRecover(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		cfg               config.Config
		since             string
		margin            time.Duration
		yes, dryRun, asJS bool
	)
	s := config.NewSet("recover", "Usage: orderflow recover [-since TIME] [-yes] [flags]   (after restoring the database "+
		"from a backup: replay every event whose effect it lacks; without -yes a dry run)", stderr)
	cfg.RegisterDatabase(s)
	cfg.RegisterRocketMQ(s)
	cfg.RegisterConsumerGroup(s)
	cfg.RegisterRedis(s)
	cfg.RegisterTemporal(s)
	r := func(flag, usage string) config.Setting { return config.Own("ORDERFLOW_RECOVER_", flag, usage) }
	s.String(&since, "", r("since", "the time of the backup the database was restored from, an RFC 3339 time or a duration back from now: "+
		"needed only for queues the database records no recovery point for"))
	s.Duration(&margin, DefaultRecoverMargin, r("margin", "rewind a queue with no recovery point this much before -since"))
	s.Bool(&yes, false, consentFlag("yes", "act: without it recover is a dry run that says what it would do"))
	s.Bool(&dryRun, false, r("dry-run", "only say what would be done (the default; refused with -yes)"))
	s.Bool(&asJS, false, r("json", "print JSON for scripts"))
	if err := parse(s, args); err != nil {
		return err
	}
	cfg.NormalizeRedis()
	if yes && dryRun {
		return fmt.Errorf("%w: -yes and -dry-run contradict each other", errUsage)
	}
	if margin < 0 {
		return fmt.Errorf("%w: -margin %s must not be negative", errUsage, margin)
	}
	rep := recoverReport{DryRun: !yes, RedisKeys: -1}
	if since != "" {
		t, err := parseSince(since, time.Now())
		if err != nil {
			return err
		}
		rep.Since, rep.Fallback = t, t.Add(-margin)
	}
	err := recoverAll(ctx, cfg, &rep)
	if asJS {
		if werr := writeJSON(stdout, rep); err == nil {
			err = werr
		}
	} else {
		printRecover(stdout, rep)
	}
	return err
}

// recoverAll plans every step, then, unless rep is a dry run, carries them
// out: the Redis keys, the old runs, the rewind last (it starts the
// redelivery). It refuses before changing anything when the bridges are
// running, when a queue has no recovery point and no -since was given, or
// when the broker no longer holds the messages to replay.
func recoverAll(ctx context.Context, cfg config.Config, rep *recoverReport) error {
	db, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	pctx, cancel := context.WithTimeout(ctx, recoverTimeout)
	defer cancel()
	points, err := db.RecoveryPoints(pctx)
	if err != nil {
		return err
	}
	rw, err := openRewinder(cfg)
	if err != nil {
		return err
	}
	defer rw.Close()
	if rep.Rewind, err = recovery.PlanRewind(pctx, rw, points, cfg.ConsumerGroup, cfg.Topic, rep.Fallback); err != nil {
		return fmt.Errorf("cannot read the consumer group's offsets from RocketMQ: %w", err)
	}
	for _, p := range rep.Rewind.Rewinds {
		rep.ConsumersOnline = max(rep.ConsumersOnline, p.ConsumersOnline)
	}
	if err := checkPoints(rep.Rewind, rep.Fallback); err != nil {
		return err
	}
	if !rep.DryRun && rep.ConsumersOnline > 0 {
		return consumersOnline(cfg.ConsumerGroup, rep.ConsumersOnline)
	}
	if rep.DeadLetters, err = replayableDeadLetters(ctx, db); err != nil {
		return err
	}
	if rep.DeadLetters > 0 {
		rep.Replay = "orderflow dlq replay"
		if rep.DeadLetters > replayLimitDefault {
			rep.Replay += fmt.Sprintf(" -limit %d", rep.DeadLetters)
		}
	}
	tc, err := dialTemporal(ctx, cfg, 30*time.Second)
	if err != nil {
		return err
	}
	defer tc.Close()
	if cfg.RedisURL != "" {
		if rep.RedisKeys, err = forgetRedis(ctx, cfg.RedisURL, tc.namespace, rep.DryRun); err != nil {
			return err
		}
	}
	if rep.OpenRuns, rep.Ended, err = endMemoryRuns(ctx, tc, cfg.TaskQueue, rep.DryRun); err != nil {
		return err
	}
	if rep.DryRun {
		return nil
	}
	for _, p := range rep.Rewind.Rewinds {
		if err := applyRewind(ctx, rw, p); err != nil {
			return err
		}
	}
	return nil
}

// checkPoints refuses a plan that would lose events: a queue with no
// recovery point and no -since to rewind it by, or a queue whose point (or
// the fallback time, for a queue without one) the broker's retention has
// passed.
func checkPoints(p recovery.Plan, fallback time.Time) error {
	if p.NoFallback {
		var names []string
		for _, q := range p.Queues {
			if q.Source == recovery.NoPoint {
				names = append(names, fmt.Sprintf("%s queue %d of broker %s", q.Topic, q.QueueID, q.Broker))
			}
		}
		return fmt.Errorf("%w: the restored database records no recovery point for %d queues (%s): it predates them or the release "+
			"that records them; give -since, the time of the backup, to rewind those to it minus -margin", errUsage, p.Unproved, strings.Join(names, ", "))
	}
	for _, q := range p.Missing() {
		return fmt.Errorf("the broker no longer holds the messages from offset %d of %s queue %d of broker %s, where the restored database's "+
			"recovery point is (the queue starts at offset %d; its retention, fileReservedTime, is shorter): the events of those messages "+
			"cannot be replayed from it (docs/operating.md, restoring the database)", q.Point, q.Topic, q.QueueID, q.Broker, q.Min)
	}
	timed := mq.RewindPlan{To: fallback}
	for _, q := range p.Queues {
		if q.Source == recovery.FromTime {
			timed.Queues = append(timed.Queues, q.QueueRewind)
		}
	}
	return checkRetention(timed)
}

// replayLimitDefault is dlq replay's -limit default.
const replayLimitDefault = 1000

// replayableDeadLetters counts the dead letters `orderflow dlq replay`
// would deliver now: parked, never replayed (as the restored database
// says), valid events and no conflict.
func replayableDeadLetters(ctx context.Context, db *store.Store) (int, error) {
	items, err := judgeDeadLetters(ctx, db, store.DeadLetterFilter{Limit: 1 << 20})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, it := range items {
		if it.Action == actionWouldDeliver {
			n++
		}
	}
	return n, nil
}

// runRewind is `orderflow rewind -to TIME [-yes]`: the bridge's consumer
// group consumes again every message stored since TIME (to replay a window
// after an incident). The bridges must be stopped. Without -yes it is a
// dry run.
func runRewind(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		cfg               config.Config
		to                string
		yes, dryRun, asJS bool
	)
	s := config.NewSet("rewind", "Usage: orderflow rewind -to TIME [-yes] [flags]   (the bridges' consumer group consumes again "+
		"every message stored since TIME; without -yes a dry run)", stderr)
	cfg.RegisterRocketMQ(s)
	cfg.RegisterConsumerGroup(s)
	w := func(flag, usage string) config.Setting { return config.Own("ORDERFLOW_REWIND_", flag, usage) }
	s.String(&to, "", w("to", "an RFC 3339 time, or a duration back from now (required)"))
	s.Bool(&yes, false, consentFlag("yes", "rewind: without it rewind is a dry run that says what it would do"))
	s.Bool(&dryRun, false, w("dry-run", "only say what would be done (the default; refused with -yes)"))
	s.Bool(&asJS, false, w("json", "print JSON for scripts"))
	if err := parse(s, args); err != nil {
		return err
	}
	if to == "" {
		return fmt.Errorf("%w: -to is required", errUsage)
	}
	if yes && dryRun {
		return fmt.Errorf("%w: -yes and -dry-run contradict each other", errUsage)
	}
	t, err := parseSince(to, time.Now())
	if err != nil {
		return err
	}
	rw, err := openRewinder(cfg)
	if err != nil {
		return err
	}
	defer rw.Close()
	plan, err := planRewind(ctx, rw, cfg, t)
	if err == nil && yes {
		err = applyRewind(ctx, rw, plan)
	}
	if asJS {
		if werr := writeJSON(stdout, plan); err == nil {
			err = werr
		}
	} else if plan.Group != "" {
		printRewind(stdout, plan, !yes)
	}
	return err
}

// consentFlag is a consent: a flag only, since a variable set once would
// give it to every later run.
func consentFlag(flag, usage string) config.Setting {
	return config.Setting{Flag: flag, Usage: usage + " (a flag only, no variable sets it)"}
}

// openRewinder checks the broker settings and returns a Rewinder.
func openRewinder(cfg config.Config) (*mq.Rewinder, error) {
	for name, v := range map[string]string{"rocketmq-namesrv": cfg.RocketMQNamesrv, "topic": cfg.Topic, "consumer-group": cfg.ConsumerGroup} {
		if strings.TrimSpace(v) == "" {
			return nil, fmt.Errorf("%w: -%s must not be empty", errUsage, name)
		}
	}
	tlsConf, err := cfg.RocketMQTLSConfig()
	if err != nil {
		return nil, err
	}
	// The error says what failed; the client's own log lines would repeat it.
	mq.UseSlog(slog.New(slog.NewTextHandler(io.Discard, nil)), slog.LevelError)
	return mq.NewRewinder(cfg.RocketMQNamesrv, cfg.RocketMQAccessKey, cfg.RocketMQSecretKey, tlsConf)
}

// planRewind reads the group's plan on the topic for a rewind to t.
func planRewind(ctx context.Context, rw *mq.Rewinder, cfg config.Config, t time.Time) (mq.RewindPlan, error) {
	pctx, cancel := context.WithTimeout(ctx, recoverTimeout)
	defer cancel()
	p, err := rw.Plan(pctx, cfg.ConsumerGroup, cfg.Topic, t)
	if err != nil {
		return p, fmt.Errorf("cannot read the consumer group's offsets from RocketMQ: %w", err)
	}
	return p, nil
}

// applyRewind moves the group's offsets as planned.
func applyRewind(ctx context.Context, rw *mq.Rewinder, p mq.RewindPlan) error {
	actx, cancel := context.WithTimeout(ctx, recoverTimeout)
	defer cancel()
	if err := rw.Apply(actx, p); err != nil {
		if errors.Is(err, mq.ErrConsumersOnline) {
			return consumersOnline(p.Group, p.ConsumersOnline)
		}
		return fmt.Errorf("rewind consumer group %s: %w", p.Group, err)
	}
	return nil
}

// consumersOnline is the refusal while clients of the group are connected.
func consumersOnline(group string, n int) error {
	return fmt.Errorf("%d clients of consumer group %s are connected: stop the bridges first (a running consumer "+
		"commits its own offsets over the rewound ones), then run this again; the workers may keep running: %w",
		n, group, mq.ErrConsumersOnline)
}

// checkRetention refuses a rewind to a time before the oldest message the
// broker still holds, when it has deleted older ones (a queue's minimum
// offset is above 0): the events stored between the two cannot be
// replayed from the broker.
func checkRetention(p mq.RewindPlan) error {
	for _, q := range p.Queues {
		if q.Min > 0 && !q.EarliestStoreTime.IsZero() && q.EarliestStoreTime.After(p.To) {
			return fmt.Errorf("the broker no longer holds the messages stored between %s and %s (queue %d of broker %s starts at offset %d; "+
				"its retention, fileReservedTime, is shorter): the events of that window cannot be replayed from it (docs/operating.md, restoring the database)",
				p.To.Format(time.RFC3339), q.EarliestStoreTime.Format(time.RFC3339), q.QueueID, q.Broker, q.Min)
		}
	}
	return nil
}

// forgetRedis deletes (counts, in a dry run) the duplicate filter's keys
// of namespace.
func forgetRedis(ctx context.Context, rawURL, namespace string, dryRun bool) (int64, error) {
	r, err := dedup.OpenRedis(rawURL, dedup.RedisOptions{KeyPrefix: dedup.KeyPrefix(namespace), Timeout: 10 * time.Second})
	if err != nil {
		return 0, err
	}
	defer r.Close()
	fctx, cancel := context.WithTimeout(ctx, recoverTimeout)
	defer cancel()
	n, err := r.Forget(fctx, dryRun)
	if err != nil {
		return n, fmt.Errorf("the duplicate filter's keys on Redis at %s (%d deleted): %w", r.Addr(), n, err)
	}
	return n, nil
}

// endMemoryRuns lists the running order workflows of the task queue and
// terminates (lists only, in a dry run) those whose code skips events on its memory's word
// (workflows.VerifiesMemory). It returns the number of running order
// workflows and the IDs of those ended.
func endMemoryRuns(ctx context.Context, c *temporalConn, taskQueue string, dryRun bool) (int, []string, error) {
	lctx, cancel := context.WithTimeout(ctx, recoverTimeout)
	defer cancel()
	query := fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running' AND TaskQueue = '%s'",
		api.WorkflowType, strings.ReplaceAll(taskQueue, "'", "''"))
	var (
		open  int
		ended []string
		token []byte
	)
	for {
		res, err := c.ListWorkflow(lctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: c.namespace, Query: query, NextPageToken: token, PageSize: 1000})
		if err != nil {
			return open, ended, fmt.Errorf("the Temporal server at %s: list the running order workflows: %w", c.addr, err)
		}
		for _, e := range res.GetExecutions() {
			open++
			var changes []string
			if p := e.GetSearchAttributes().GetIndexedFields()[workflows.ChangeVersionSearchAttribute]; p != nil {
				_ = converter.GetDefaultDataConverter().FromPayload(p, &changes)
			}
			if workflows.VerifiesMemory(changes) {
				continue
			}
			id := e.GetExecution().GetWorkflowId()
			if !dryRun {
				err := c.TerminateWorkflow(lctx, id, e.GetExecution().GetRunId(),
					"orderflow recover: this run's code skips redelivered events on its memory's word; the next event starts a run that loads the order from the database")
				var nf *serviceerror.NotFound // ended meanwhile
				if err != nil && !errors.As(err, &nf) {
					return open, ended, fmt.Errorf("the Temporal server at %s: terminate %s: %w", c.addr, id, err)
				}
			}
			ended = append(ended, id)
		}
		if token = res.GetNextPageToken(); len(token) == 0 {
			return open, ended, nil
		}
	}
}

// printRecover says what recover did, or would do.
func printRecover(w io.Writer, rep recoverReport) {
	if len(rep.Rewind.Queues) == 0 {
		return
	}
	verb := map[bool]string{true: "would ", false: ""}[rep.DryRun]
	fmt.Fprintln(w, "recover after a database restore")
	switch {
	case rep.RedisKeys < 0:
		fmt.Fprintln(w, "redis: not configured, nothing to clear")
	default:
		fmt.Fprintf(w, "redis: %sdelete %d keys of the duplicate filter\n", verb, rep.RedisKeys)
	}
	fmt.Fprintf(w, "temporal: %d running order workflows; %send %d whose code skips events on its memory's word\n",
		rep.OpenRuns, verb, len(rep.Ended))
	for i, id := range rep.Ended {
		if i == 10 {
			fmt.Fprintf(w, "  … and %d more\n", len(rep.Ended)-i)
			break
		}
		fmt.Fprintf(w, "  %s\n", id)
	}
	p := rep.Rewind
	fmt.Fprintf(w, "rocketmq: %srewind the consumer group to the restored database's recovery points: %d messages delivered again",
		verb, p.Redeliver)
	if p.Clamped > 0 {
		fmt.Fprintf(w, "; %d queues' points are beyond the group's committed offsets, which are kept (%d messages not consumed yet, not skipped)",
			countSource(p, recovery.FromCommitted), p.Clamped)
	}
	fmt.Fprintln(w)
	if p.Unproved > 0 && !rep.Fallback.IsZero() {
		fmt.Fprintf(w, "rocketmq: %d queues have no recovery point: rewound to %s (-since minus -margin)\n",
			p.Unproved, rep.Fallback.Format(time.RFC3339))
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  TOPIC\tBROKER\tQUEUE\tMIN\tMAX\tCOMMITTED\tPOINT\tTARGET\tFROM")
	for _, q := range p.Queues {
		point := "-"
		if q.Point >= 0 {
			point = fmt.Sprint(q.Point)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%d\t%d\t%s\t%d\t%s\n", q.Topic, q.Broker, q.QueueID, q.Min, q.Max, q.Committed, point, q.Target, q.Source)
	}
	_ = tw.Flush()
	if rep.DeadLetters > 0 {
		fmt.Fprintf(w, "dead letters: %d parked messages are valid events a replay would deliver; any replayed after the backup lost its "+
			"effect with the restore: once the bridges run again, run `%s`\n", rep.DeadLetters, rep.Replay)
	}
	if rep.ConsumersOnline > 0 {
		fmt.Fprintf(w, "rocketmq: %d clients of the group are connected: stop the bridges before running this with -yes\n", rep.ConsumersOnline)
	}
	if rep.DryRun {
		fmt.Fprintln(w, "dry run: nothing changed (-yes to act)")
	}
}

// countSource counts the queues of p whose target came from src.
func countSource(p recovery.Plan, src recovery.Source) int {
	n := 0
	for _, q := range p.Queues {
		if q.Source == src {
			n++
		}
	}
	return n
}

// printRewind prints a rewind's plan, queue by queue.
func printRewind(w io.Writer, p mq.RewindPlan, dryRun bool) {
	verb := map[bool]string{true: "would rewind", false: "rewound"}[dryRun]
	fmt.Fprintf(w, "rocketmq: %s consumer group %s on %s to %s: %d messages delivered again",
		verb, p.Group, p.Topic, p.To.Format(time.RFC3339), p.Redeliver)
	if p.Clamped > 0 {
		fmt.Fprintf(w, "; queues whose committed offset is before the time are kept there (%d messages not consumed yet, not skipped)", p.Clamped)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  BROKER\tQUEUE\tMIN\tMAX\tCOMMITTED\tTARGET\tOLDEST STORED")
	for _, q := range p.Queues {
		oldest := "-"
		if !q.EarliestStoreTime.IsZero() {
			oldest = q.EarliestStoreTime.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%d\t%d\t%s\n", q.Broker, q.QueueID, q.Min, q.Max, q.Committed, q.Target, oldest)
	}
	_ = tw.Flush()
	if p.ConsumersOnline > 0 {
		fmt.Fprintf(w, "rocketmq: %d clients of the group are connected: stop the bridges before running this with -yes\n", p.ConsumersOnline)
	}
	if dryRun {
		fmt.Fprintln(w, "dry run: nothing changed (-yes to act)")
	}
}
