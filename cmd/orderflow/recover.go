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
	"github.com/orderflow/orderflow/workflows"
)

// DefaultRecoverMargin is how far before the backup's time recover rewinds
// the consumer group: messages stored a little before the backup may have
// been applied only after it (the bridge and the worker lag the broker).
const DefaultRecoverMargin = 5 * time.Minute

// recoverTimeout bounds each of recover's and rewind's steps.
const recoverTimeout = 2 * time.Minute

// recoverReport is what recover did, or in a dry run would do.
type recoverReport struct {
	DryRun bool `json:"dry_run"`
	// Since is the backup's time; RewindTo the time the group is rewound
	// to (Since minus the margin).
	Since    time.Time `json:"since,omitzero"`
	RewindTo time.Time `json:"rewind_to"`
	// Rewind is the consumer group's plan on the topic.
	Rewind mq.RewindPlan `json:"rewind"`
	// RedisKeys is the number of the duplicate filter's Redis keys deleted
	// (counted in a dry run); -1 when Redis is not configured.
	RedisKeys int64 `json:"redis_keys"`
	// OpenRuns counts the running order workflows of the task queue; Ended
	// lists those ended
	// (to end, in a dry run) because their code skips events on its
	// memory's word.
	OpenRuns int      `json:"open_runs"`
	Ended    []string `json:"ended"`
}

// runRecover is `orderflow recover -since T [-margin 5m] [-yes]`: after
// orderflow's database was restored from a backup taken at T, it makes
// every event since T take effect again, exactly once. It deletes the
// duplicate filter's Redis keys (they would confirm as duplicates the
// messages the database lost), ends the running order workflows whose code
// skips an event on its memory's word (those older than
// ChangeLocalActivities version 5; newer runs ask the database and reload),
// and rewinds the bridge's consumer group to T minus the margin, so that
// the broker delivers every message since again. The database itself is
// not touched: it decides what each redelivered event does. Without -yes
// it is a dry run that says what it would do.
func runRecover(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		cfg               config.Config
		since             string
		margin            time.Duration
		yes, dryRun, asJS bool
	)
	s := config.NewSet("recover", "Usage: orderflow recover -since TIME [-yes] [flags]   (after restoring the database "+
		"from a backup taken at TIME: replay every event since; without -yes a dry run)", stderr)
	cfg.RegisterRocketMQ(s)
	cfg.RegisterConsumerGroup(s)
	cfg.RegisterRedis(s)
	cfg.RegisterTemporal(s)
	r := func(flag, usage string) config.Setting { return config.Own("ORDERFLOW_RECOVER_", flag, usage) }
	s.String(&since, "", r("since", "the time of the backup the database was restored from: an RFC 3339 time, or a duration back from now (required)"))
	s.Duration(&margin, DefaultRecoverMargin, r("margin", "rewind this much before -since: messages stored just before the backup may have been applied after it"))
	s.Bool(&yes, false, consentFlag("yes", "act: without it recover is a dry run that says what it would do"))
	s.Bool(&dryRun, false, r("dry-run", "only say what would be done (the default; refused with -yes)"))
	s.Bool(&asJS, false, r("json", "print JSON for scripts"))
	if err := parse(s, args); err != nil {
		return err
	}
	cfg.NormalizeRedis()
	if since == "" {
		return fmt.Errorf("%w: -since is required: the time of the backup the database was restored from", errUsage)
	}
	if yes && dryRun {
		return fmt.Errorf("%w: -yes and -dry-run contradict each other", errUsage)
	}
	if margin < 0 {
		return fmt.Errorf("%w: -margin %s must not be negative", errUsage, margin)
	}
	t, err := parseSince(since, time.Now())
	if err != nil {
		return err
	}
	rep := recoverReport{DryRun: !yes, Since: t, RewindTo: t.Add(-margin), RedisKeys: -1}
	err = recoverAll(ctx, cfg, &rep)
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
// running or the broker no longer holds the messages to replay.
func recoverAll(ctx context.Context, cfg config.Config, rep *recoverReport) error {
	rw, err := openRewinder(cfg)
	if err != nil {
		return err
	}
	defer rw.Close()
	if rep.Rewind, err = planRewind(ctx, rw, cfg, rep.RewindTo); err != nil {
		return err
	}
	if err := checkRetention(rep.Rewind); err != nil {
		return err
	}
	if !rep.DryRun && rep.Rewind.ConsumersOnline > 0 {
		return consumersOnline(rep.Rewind)
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
	return applyRewind(ctx, rw, rep.Rewind)
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
	rep := recoverReport{DryRun: !yes, RewindTo: t, RedisKeys: -1}
	rep.Rewind, err = planRewind(ctx, rw, cfg, t)
	if err == nil && yes {
		err = applyRewind(ctx, rw, rep.Rewind)
	}
	if asJS {
		if werr := writeJSON(stdout, rep.Rewind); err == nil {
			err = werr
		}
	} else if rep.Rewind.Group != "" {
		printRewind(stdout, rep)
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
			return consumersOnline(p)
		}
		return fmt.Errorf("rewind consumer group %s: %w", p.Group, err)
	}
	return nil
}

// consumersOnline is the refusal while clients of the group are connected.
func consumersOnline(p mq.RewindPlan) error {
	return fmt.Errorf("%d clients of consumer group %s are connected: stop the bridges first (a running consumer "+
		"commits its own offsets over the rewound ones), then run this again; the workers may keep running: %w",
		p.ConsumersOnline, p.Group, mq.ErrConsumersOnline)
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
	if rep.Rewind.Group == "" {
		return
	}
	verb := map[bool]string{true: "would ", false: ""}[rep.DryRun]
	fmt.Fprintf(w, "recover from a database restored to %s\n", rep.Since.Format(time.RFC3339))
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
	printRewind(w, rep)
}

// printRewind prints the rewind's plan, queue by queue.
func printRewind(w io.Writer, rep recoverReport) {
	p := rep.Rewind
	verb := map[bool]string{true: "would rewind", false: "rewound"}[rep.DryRun]
	fmt.Fprintf(w, "rocketmq: %s consumer group %s on %s to %s: %d messages delivered again",
		verb, p.Group, p.Topic, rep.RewindTo.Format(time.RFC3339), p.Redeliver)
	if p.Skip > 0 {
		fmt.Fprintf(w, ", %d not yet consumed skipped", p.Skip)
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
	if rep.DryRun {
		fmt.Fprintln(w, "dry run: nothing changed (-yes to act)")
	}
}
