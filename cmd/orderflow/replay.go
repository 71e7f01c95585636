package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/orderflow/orderflow/config"
	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/message"
	"github.com/orderflow/orderflow/store"
	"github.com/orderflow/orderflow/wire"
	"github.com/orderflow/orderflow/workflows"
)

// Actions of a replay on one dead letter.
const (
	// actionKept: not delivered, the dead letter stays as it is (still
	// invalid, or a conflict).
	actionKept = "kept"
	// actionWouldDeliver: a dry run's answer for a valid, non-conflicting
	// event.
	actionWouldDeliver = "would deliver"
	// actionDelivered: re-delivered to the order's workflow and marked.
	actionDelivered = "delivered"
	// actionAlready: marked replayed by an earlier replay; not delivered
	// again.
	actionAlready = "already replayed"
)

// nowInvalid is the judgement of a body that still breaks the contract.
const nowInvalid = "invalid"

// replayItem is what a replay did, or would do, with one dead letter.
type replayItem struct {
	ID int64 `json:"id"`
	// Kind is the parked reason's kind.
	Kind string `json:"kind"`
	// Key is the event's business key, empty when the body is invalid.
	Key string `json:"key,omitempty"`
	// Now is the judgement against the current rows: "invalid", or the
	// decision ApplyEvent would take (applied, duplicate, stale, illegal,
	// conflict).
	Now    string `json:"now"`
	Action string `json:"action"`
	// Outcome is the replay's recorded outcome: the decision the workflow
	// took, or "delivered" while it is not recorded yet.
	Outcome string `json:"outcome,omitempty"`
	// Reason explains the judgement: the rejection, or the decision's
	// reason.
	Reason string `json:"reason,omitempty"`
	// Compression is the compression the dead letter's body is stored in,
	// which the replay decodes before judging it: stored with the row, or
	// named by the body's magic number for a row an earlier release parked
	// as malformed_json (then only when the body decodes, or inflates past
	// the bound).
	Compression string `json:"compression,omitempty"`

	event fsm.Event
	env   wire.Envelope
	// recorded is true when the key was already recorded with this content
	// before the delivery (a duplicate needs no wait).
	recorded bool
}

// replaySummary counts a replay's items.
type replaySummary struct {
	DryRun   bool           `json:"dry_run"`
	Selected int            `json:"selected"`
	Actions  map[string]int `json:"actions"`
	Outcomes map[string]int `json:"outcomes"`
}

// runDLQReplay is `orderflow dlq replay`: each selected dead letter is
// decoded again if its body is still compressed (decodeStored), parsed
// again and judged against the current rows; a valid event that is no
// conflict is re-delivered to its order's workflow as the bridge delivers
// (SignalWithStart, the parked message as its source) and the dead letter
// is marked replayed with the outcome. Invalid messages and conflicts stay
// parked as they are. A dead letter marked replayed is never delivered
// again.
func runDLQReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		cfg           config.Config
		f             store.DeadLetterFilter
		params        workflows.Params
		since         string
		dry, asJS     bool
		wait, timeout time.Duration
	)
	s := config.NewSet("dlq replay", "Usage: orderflow dlq replay [flags]   (re-deliver parked messages that are valid events)", stderr)
	cfg.RegisterDatabase(s)
	cfg.RegisterTemporal(s)
	d := func(flag, usage string) config.Setting { return config.Own("ORDERFLOW_DLQ_", flag, usage) }
	s.String(&f.Kind, "", d("reason", "only this rejection kind (conflict, oversize, undecodable, malformed_json, missing_field, invalid_field, not_object, undeliverable)"))
	s.String(&f.OrderID, "", d("order", "only the dead letters whose keys name this order"))
	s.String(&since, "", d("since", "only those last seen since this RFC 3339 time or this long ago (24h)"))
	s.Int(&f.Limit, 1000, d("limit", "look at most at this many dead letters"))
	s.Bool(&dry, false, d("dry-run", "only say what a replay would do; write and deliver nothing"))
	s.Duration(&wait, 30*time.Second, d("wait", "how long to wait for the workflows to record the delivered events' decisions"))
	s.Duration(&timeout, 10*time.Second, d("temporal-timeout", "how long to wait for Temporal to answer"))
	s.Bool(&asJS, false, d("json", "print JSON for scripts"))
	wf := func(flag, env, usage string) config.Setting {
		return config.Setting{Flag: flag, Env: "ORDERFLOW_WORKFLOW_" + env, Usage: usage}
	}
	s.Duration(&params.GracePeriod, workflows.DefaultGracePeriod, wf("workflow-grace-period", "GRACE_PERIOD", "grace period of a workflow the replay starts (as the bridge's)"))
	s.Duration(&params.IdleTimeout, workflows.DefaultIdleTimeout, wf("workflow-idle-timeout", "IDLE_TIMEOUT", "idle timeout of a workflow the replay starts (as the bridge's)"))
	s.Int(&params.MaxEventsPerRun, 0, wf("workflow-max-events", "MAX_EVENTS", "events per run of a workflow the replay starts (as the bridge's)"))
	if err := parse(s, args); err != nil {
		return err
	}
	if f.Limit < 1 {
		return fmt.Errorf("%w: -limit %d must be at least 1", errUsage, f.Limit)
	}
	var err error
	if f.Since, err = parseSince(since, time.Now()); err != nil {
		return err
	}
	db, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()

	items, err := judgeDeadLetters(ctx, db, f)
	if err != nil {
		return err
	}
	var runErr error
	if !dry {
		runErr = deliverDeadLetters(ctx, db, cfg, params, timeout, wait, items)
	}
	sum := replaySummary{DryRun: dry, Selected: len(items), Actions: map[string]int{}, Outcomes: map[string]int{}}
	for _, it := range items {
		sum.Actions[it.Action]++
		if it.Action == actionDelivered || it.Action == actionWouldDeliver {
			o := it.Outcome
			if o == "" {
				o = it.Now
			}
			sum.Outcomes[o]++
		}
	}
	if asJS {
		if items == nil {
			items = []*replayItem{}
		}
		if err := writeJSON(stdout, struct {
			Summary replaySummary `json:"summary"`
			Items   []*replayItem `json:"items"`
		}{sum, items}); err != nil {
			return err
		}
	} else if err := printReplay(stdout, sum, items); err != nil {
		return err
	}
	return runErr
}

// judgeDeadLetters reads the dead letters f selects and judges each
// against the current rows.
func judgeDeadLetters(ctx context.Context, db *store.Store, f store.DeadLetterFilter) ([]*replayItem, error) {
	var items []*replayItem
	limit := f.Limit
	for len(items) < limit {
		f.Limit = min(100, limit-len(items))
		rows, err := db.DeadLetters(ctx, f)
		if err != nil {
			return nil, err
		}
		for _, d := range rows {
			it, err := judge(ctx, db, d)
			if err != nil {
				return nil, err
			}
			items = append(items, it)
		}
		if len(rows) < f.Limit {
			break
		}
		f.AfterID = rows[len(rows)-1].ID
	}
	return items, nil
}

// judge says what a replay would do with dead letter d now.
func judge(ctx context.Context, db *store.Store, d store.DeadLetterRow) (*replayItem, error) {
	it := &replayItem{ID: d.ID, Kind: d.Kind()}
	it.env, it.Compression = decodeStored(d)
	r := message.Parse(it.env)
	if r.Rejection != nil {
		it.Now, it.Reason = nowInvalid, r.Rejection.Reason
	} else {
		it.event, it.Key = r.Event, r.Event.Key().String()
		j, err := db.Judge(ctx, r.Event)
		if err != nil {
			return nil, fmt.Errorf("dead letter %d: %w", d.ID, err)
		}
		it.Now, it.Reason, it.recorded = string(j.Decision.Outcome), j.Decision.Reason, j.Recorded
	}
	switch {
	case d.ReplayedAt != nil:
		it.Action, it.Outcome = actionAlready, d.ReplayOutcome
	case it.Now == nowInvalid || it.Now == string(fsm.Conflict):
		it.Action = actionKept
	default:
		it.Action = actionWouldDeliver
	}
	return it, nil
}

// decodeStored is dead letter d's envelope with its body decoded as the
// bridge's client decodes a body it receives, bounded by
// wire.MaxBodySize, and the compression of the stored body ("" when it
// is not compressed). The compression is the one stored with the row or, for
// a row an earlier release parked as malformed_json from an LZ4 or zstd
// body it could not decode, the one the body's magic number names. A body
// that would inflate past the bound stays as stored, refused (oversize);
// one that cannot be decoded stays as stored with the error (undecodable),
// except a body recognised only by its magic number, which is judged as
// stored, as it was parked.
func decodeStored(d store.DeadLetterRow) (wire.Envelope, string) {
	env := d.Envelope()
	compression, byMagic := env.Compression, false
	if compression == "" {
		compression, byMagic = d.LegacyCompression(), true
	}
	if compression == "" {
		return env, ""
	}
	body, err := mq.Decompress(compression, env.Body, wire.MaxBodySize)
	switch {
	case err == nil:
		env.Body, env.Compression, env.InflateRefused, env.DecodeError = body, "", false, ""
	case errors.Is(err, mq.ErrInflateLimit):
		env.Compression, env.InflateRefused = compression, true
	case !byMagic:
		env.InflateRefused, env.DecodeError = false, err.Error()
	default:
		return env, ""
	}
	return env, compression
}

// deliverDeadLetters re-delivers the items a replay delivers, records the
// sequence number an event carries (a parked message recorded none), marks
// each dead letter replayed as soon as Temporal accepted its signal, then
// waits
// for the workflows to record the decisions and records them as the
// outcomes.
func deliverDeadLetters(ctx context.Context, db *store.Store, cfg config.Config, params workflows.Params,
	timeout, wait time.Duration, items []*replayItem) error {
	var c *temporalConn
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	var pending []*replayItem
	for _, it := range items {
		if it.Action != actionWouldDeliver {
			continue
		}
		if c == nil {
			var err error
			if c, err = dialTemporal(ctx, cfg, timeout); err != nil {
				return err
			}
		}
		dctx, cancel := context.WithTimeout(ctx, timeout)
		src := it.env
		err := workflows.Deliver(dctx, c, cfg.TaskQueue, params, it.event, &src)
		cancel()
		if err != nil {
			return fmt.Errorf("the Temporal server at %s: dead letter %d: %w", c.addr, it.ID, err)
		}
		// The event reached its workflow: its sequence number is recorded as
		// the bridge records a delivered event's, before the dead letter is
		// marked, so that a replay stopped in between records it next time.
		if it.event.ProducerID != "" && it.event.Seq > 0 {
			if err := db.RecordSeq(ctx, it.event.ProducerID, it.event.Seq); err != nil {
				return fmt.Errorf("dead letter %d: %w", it.ID, err)
			}
		}
		it.Action, it.Outcome = actionDelivered, store.ReplayDelivered
		if it.recorded && it.Now == string(fsm.Duplicate) {
			it.Outcome = string(fsm.Duplicate)
		} else {
			pending = append(pending, it)
		}
		if _, err := db.MarkReplayed(ctx, it.ID, it.Outcome); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(wait)
	for len(pending) > 0 {
		var left []*replayItem
		for _, it := range pending {
			rec, err := db.RecordedKeyOf(ctx, it.event.Key())
			if err != nil {
				return err
			}
			switch {
			case !rec.Found:
				left = append(left, it)
				continue
			case rec.ContentHash == it.event.ContentHash():
				it.Outcome = string(rec.Outcome)
			default:
				it.Outcome = string(fsm.Conflict)
			}
			if _, err := db.MarkReplayed(ctx, it.ID, it.Outcome); err != nil {
				return err
			}
		}
		pending = left
		if len(pending) == 0 || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}

func printReplay(w io.Writer, sum replaySummary, items []*replayItem) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tKEY\tNOW\tACTION\tREASON")
	for _, it := range items {
		action := it.Action
		if it.Outcome != "" {
			action += " → " + it.Outcome
		}
		key := it.Key
		if key == "" {
			key = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", it.ID, safe(it.Kind), safe(key), safe(it.Now), safe(action), cut(safe(it.Reason), 80))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	verb := "replay"
	if sum.DryRun {
		verb = "dry run"
	}
	fmt.Fprintf(w, "%s: %d dead letters: %s", verb, sum.Selected, counts(sum.Actions))
	if len(sum.Outcomes) > 0 {
		fmt.Fprintf(w, "; decisions: %s", counts(sum.Outcomes))
	}
	fmt.Fprintln(w)
	return nil
}

// counts renders a count map as "2 kept, 1 delivered", largest first.
func counts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d %s", m[k], safe(k))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
