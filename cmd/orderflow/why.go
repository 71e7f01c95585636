package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/orderflow/orderflow/config"
	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/store"
	"github.com/orderflow/orderflow/workflows"
)

// whyReport is the JSON answer of `orderflow why`.
type whyReport struct {
	store.OrderHistory
	// Version explains one business key when the command named one.
	Version *versionReport `json:"version,omitempty"`
	// Workflow is Temporal's view; nil when Temporal was not asked.
	Workflow *workflowReport `json:"workflow,omitempty"`
}

// versionReport explains one business key of the order.
type versionReport struct {
	Version int64 `json:"version"`
	// Seen is false when the key has no order_events row.
	Seen  bool            `json:"seen"`
	Event *store.EventRow `json:"event,omitempty"`
	// InGapOf is the version of the event applied over this missing one
	// (0: not in a gap).
	InGapOf int64 `json:"in_gap_of,omitempty"`
	// DeadLetters are the order's dead letters whose body names this
	// version.
	DeadLetters []int64 `json:"dead_letters"`
	// Explanation says in one sentence what became of the key.
	Explanation string `json:"explanation"`
}

// runWhy is `orderflow why ORDER_ID [VERSION]`: everything the database and
// Temporal know about one order, and why each event was decided as it was.
func runWhy(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		cfg        config.Config
		asJS, noWF bool
		timeout    time.Duration
	)
	s := config.NewSet("why", "Usage: orderflow why [flags] ORDER_ID [VERSION]   (explain every decision on one order)", stderr)
	cfg.RegisterDatabase(s)
	cfg.RegisterTemporal(s)
	cfg.RegisterTemporalUI(s)
	w := func(flag, usage string) config.Setting { return config.Own("ORDERFLOW_WHY_", flag, usage) }
	s.Duration(&timeout, 10*time.Second, w("temporal-timeout", "how long to wait for Temporal (connection, state query)"))
	s.Bool(&noWF, false, w("no-temporal", "do not ask Temporal; only the database"))
	s.Bool(&asJS, false, w("json", "print JSON for scripts"))
	if err := s.Parse(args, nil); err != nil {
		if errors.Is(err, errHelp) {
			return err
		}
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	rest := s.Args()
	if len(rest) < 1 || len(rest) > 2 {
		return fmt.Errorf("%w: why takes an order ID and, optionally, a version", errUsage)
	}
	orderID := rest[0]
	if err := fsm.CheckOrderID(orderID); err != nil {
		return fmt.Errorf("%w: %q is not an order ID: %w", errUsage, orderID, err)
	}
	var version int64
	if len(rest) == 2 {
		v, err := strconv.ParseInt(strings.TrimPrefix(rest[1], "v"), 10, 64)
		if err != nil || v < 1 {
			return fmt.Errorf("%w: %q is not a version (an integer >= 1)", errUsage, rest[1])
		}
		version = v
	}

	db, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	h, err := db.OrderHistory(ctx, orderID)
	if err != nil {
		return err
	}
	rep := whyReport{OrderHistory: h}
	var wfErr error
	if !noWF {
		c, err := dialTemporal(ctx, cfg, timeout)
		if err != nil {
			wfErr = err
		} else {
			defer c.Close()
			wr, err := describeWorkflow(ctx, c, cfg, orderID, timeout)
			if err != nil {
				wfErr = err
			} else {
				rep.Workflow = &wr
			}
		}
	}
	if h.Empty() && (rep.Workflow == nil || !rep.Workflow.Found) {
		if wfErr != nil {
			return fmt.Errorf("order %s has no row, no business key and no dead letter in PostgreSQL, and %w", orderID, wfErr)
		}
		where := "no row, no business key and no dead letter in PostgreSQL"
		if rep.Workflow != nil {
			where += ", and no workflow in Temporal"
		}
		return fmt.Errorf("%w: order %s is unknown: %s", errNotFound, orderID, where)
	}
	if version > 0 {
		rep.Version = explainVersion(h, version)
	}

	if asJS {
		if err := writeJSON(stdout, rep); err != nil {
			return err
		}
	} else if err := printWhy(stdout, rep); err != nil {
		return err
	}
	switch {
	case wfErr != nil:
		return wfErr
	case rep.Version != nil && !rep.Version.Seen:
		return fmt.Errorf("%w: %s", errNotFound, rep.Version.Explanation)
	}
	return nil
}

// explainVersion says what became of business key version v.
func explainVersion(h store.OrderHistory, v int64) *versionReport {
	r := &versionReport{Version: v, DeadLetters: []int64{}}
	for _, d := range h.DeadLetters {
		if bodyVersion(d.Body) == v {
			r.DeadLetters = append(r.DeadLetters, d.ID)
		}
	}
	key := fmt.Sprintf("%s@%d", h.OrderID, v)
	if e, ok := h.Event(v); ok {
		r.Seen, r.Event = true, &e
		r.Explanation = fmt.Sprintf("%s (%s) was %s", key, e.Status, describeOutcome(e))
		return r
	}
	r.InGapOf = h.InGap(v)
	switch {
	case h.Order != nil && h.Order.EventsPrunedAt != nil && v <= h.Order.Version:
		r.Explanation = fmt.Sprintf("%s has no row: the order's events were pruned on %s", key, stamp(*h.Order.EventsPrunedAt))
	case r.InGapOf > 0:
		r.Explanation = fmt.Sprintf("%s was never seen: it lies in the gap that v%d was applied over", key, r.InGapOf)
	case h.Order != nil && v > h.Order.Version:
		r.Explanation = fmt.Sprintf("%s was never seen: it is newer than the order's version %d (not arrived yet, or never produced)", key, h.Order.Version)
	default:
		r.Explanation = fmt.Sprintf("%s was never seen, and lies in no gap", key)
	}
	if len(r.DeadLetters) > 0 {
		r.Explanation += fmt.Sprintf("; %d dead letter(s) carry it", len(r.DeadLetters))
	}
	return r
}

// describeOutcome is a recorded decision in words.
func describeOutcome(e store.EventRow) string {
	var b strings.Builder
	b.WriteString(string(e.Outcome))
	switch e.Outcome {
	case fsm.Applied:
		if e.Gap {
			b.WriteString(" over a gap (missing versions before it)")
		}
		if e.PointsKind != fsm.PointsNone {
			fmt.Fprintf(&b, ", %+d points (%s)", e.PointsDelta, e.PointsKind)
		}
	case fsm.Duplicate:
		b.WriteString(": the order already held this version with this content")
	}
	if e.Reason != "" {
		b.WriteString(": " + e.Reason)
	}
	fmt.Fprintf(&b, "; seen %s", times(e.TimesSeen))
	switch {
	case e.Conflicts == 1:
		b.WriteString("; 1 delivery with other content was parked as a conflict")
	case e.Conflicts > 1:
		fmt.Fprintf(&b, "; %d deliveries with other content were parked as conflicts", e.Conflicts)
	}
	return b.String()
}

// bodyVersion reads the version a parked body names, or 0.
func bodyVersion(body []byte) int64 {
	var v struct {
		Version json.Number `json:"version"`
	}
	if json.Unmarshal(body, &v) != nil {
		return 0
	}
	n, _ := v.Version.Int64()
	return n
}

// times is a count of sightings in words: once, twice, 3 times.
func times(n int64) string {
	switch n {
	case 1:
		return "once"
	case 2:
		return "twice"
	}
	return fmt.Sprintf("%d times", n)
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func printWhy(w io.Writer, r whyReport) error {
	h := r.OrderHistory
	fmt.Fprintf(w, "order %s\n", h.OrderID)
	if h.Order == nil {
		fmt.Fprintln(w, "  stored:  no orders row (no event of it was applied)")
	} else {
		o := h.Order
		fmt.Fprintf(w, "  stored:  %s v%d, user %d, %d cents, content %.12s, updated %s\n", safe(string(o.Status)), o.Version, o.UserID,
			o.AmountCents, safe(o.ContentHash), stamp(o.UpdatedAt))
		due := "none"
		if ps := o.PointsDue(); len(ps) > 0 {
			var parts []string
			for _, p := range ps {
				parts = append(parts, fmt.Sprintf("%s %+d", p.Kind, p.Points))
			}
			due = strings.Join(parts, ", ") + fmt.Sprintf(" (user %d)", o.PurchaseUserID)
		}
		fmt.Fprintf(w, "  points:  %s\n", due)
		if o.EventsPrunedAt != nil {
			fmt.Fprintf(w, "  pruned:  %s (the business keys below were seen since)\n", stamp(*o.EventsPrunedAt))
		}
	}

	if v := r.Version; v != nil {
		fmt.Fprintf(w, "\nversion %d: %s\n", v.Version, safe(v.Explanation))
		if e := v.Event; e != nil {
			fmt.Fprintf(w, "  event:   %s, user %d, %d cents, occurred %s, event ID %s, content %.12s\n", safe(string(e.Status)), e.UserID,
				e.AmountCents, stamp(e.OccurredAt), safe(e.EventID), safe(e.ContentHash))
			ids := make([]string, len(e.MessageIDs))
			for i, id := range e.MessageIDs {
				ids[i] = safe(id)
			}
			fmt.Fprintf(w, "  seen:    %d message(s) %s, first %s, last %s\n", e.TimesSeen, strings.Join(ids, " "),
				stamp(e.FirstSeenAt), stamp(e.LastSeenAt))
		}
		if len(v.DeadLetters) > 0 {
			fmt.Fprintf(w, "  parked:  dead letter(s) %s (orderflow dlq show ID)\n", joinIDs(v.DeadLetters))
		}
	}

	fmt.Fprintf(w, "\nbusiness keys (%d):\n", len(h.Events))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if len(h.Events) > 0 {
		fmt.Fprintln(tw, "VERSION\tSTATUS\tOUTCOME\tGAP\tPOINTS\tSEEN\tCONFLICTS\tFIRST SEEN\tLAST SEEN\tREASON")
	}
	for _, e := range h.Events {
		gap, pts := "", ""
		if e.Gap {
			gap = "gap"
		}
		if e.PointsKind != fsm.PointsNone {
			pts = fmt.Sprintf("%+d %s", e.PointsDelta, e.PointsKind)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", e.Version, safe(string(e.Status)), safe(string(e.Outcome)), gap, pts, e.TimesSeen,
			e.Conflicts, stamp(e.FirstSeenAt), stamp(e.LastSeenAt), cut(safe(e.Reason), 70))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintf(w, "\ndead letters (%d):\n", len(h.DeadLetters))
	if len(h.DeadLetters) > 0 {
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tVERSION\tREASON\tSEEN\tLAST SEEN\tREPLAYED")
		for _, d := range h.DeadLetters {
			v := "?"
			if n := bodyVersion(d.Body); n > 0 {
				v = strconv.FormatInt(n, 10)
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\n", d.ID, v, cut(safe(d.Reason), 110), d.TimesSeen, stamp(d.LastSeenAt), replayed(d))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}

	fmt.Fprintf(w, "\npoints ledger (%d):\n", len(h.Ledger))
	if len(h.Ledger) > 0 {
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "KIND\tUSER\tPOINTS\tVERSION\tCREATED")
		for _, l := range h.Ledger {
			fmt.Fprintf(tw, "%s\t%d\t%+d\t%d\t%s\n", l.Kind, l.UserID, l.Points, l.Version, stamp(l.CreatedAt))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}

	if wf := r.Workflow; wf != nil {
		fmt.Fprintf(w, "\nworkflow %s:\n", safe(wf.ID))
		if !wf.Found {
			fmt.Fprintln(w, "  none in Temporal (never started, or closed longer ago than the namespace's retention)")
		} else {
			status := safe(wf.Status)
			if wf.CloseReason != "" {
				status += " (" + safe(wf.CloseReason) + ")"
			}
			runs := "runs uncounted"
			if wf.Runs > 0 {
				runs = fmt.Sprintf("%d run(s)", wf.Runs)
			}
			fmt.Fprintf(w, "  latest run: %s, %s, %d history events, started %s", status, runs, wf.HistoryLength, stamp(wf.StartTime))
			if wf.Build != "" {
				fmt.Fprintf(w, ", build %s", safe(wf.Build))
				if wf.Deployment != "" {
					fmt.Fprintf(w, " of deployment %s", safe(wf.Deployment))
				}
			}
			if !wf.CloseTime.IsZero() {
				fmt.Fprintf(w, ", closed %s", stamp(wf.CloseTime))
			}
			fmt.Fprintln(w)
			if st := wf.State; st != nil {
				fmt.Fprintf(w, "  state:   %s v%d, %+d points, %d event(s) handled in this run, chain of %d run(s)\n", st.Status(), st.Order.Version,
					st.Points, st.Processed, st.Runs)
				if st.Resyncs > 0 {
					fmt.Fprintf(w, "  resyncs: %d: the database was behind what the run had handled (restored?); the run reloaded the order\n", st.Resyncs)
				}
				if wf.Details == "" {
					fmt.Fprintf(w, "  counts:  %s\n", workflows.Counts(*st))
				}
			}
			if wf.Details != "" {
				fmt.Fprintf(w, "  details: %s\n", strings.ReplaceAll(safeBody(strings.ReplaceAll(wf.Details, "**", "")), "\n", "\n           "))
			}
			for _, p := range wf.Problems {
				fmt.Fprintf(w, "  note:    %s\n", safe(p))
			}
		}
		fmt.Fprintf(w, "  UI:      %s\n", safe(wf.URL))
	}
	return nil
}

func replayed(d store.DeadLetterRow) string {
	if d.ReplayedAt == nil {
		return "-"
	}
	return safe(d.ReplayOutcome) + " " + stamp(*d.ReplayedAt)
}

func joinIDs(ids []int64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(s, ", ")
}
