package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/orderflow/orderflow/config"
	"github.com/orderflow/orderflow/store"
)

// errNotFound marks a lookup that found nothing (exit status 1).
var errNotFound = errors.New("not found")

// runDLQ is `orderflow dlq list|show|replay`: the parked messages.
func runDLQ(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: dlq needs a subcommand: list, show or replay", errUsage)
	}
	switch args[0] {
	case "list":
		return runDLQList(ctx, args[1:], stdout, stderr)
	case "show":
		return runDLQShow(ctx, args[1:], stdout, stderr)
	case "replay":
		return runDLQReplay(ctx, args[1:], stdout, stderr)
	}
	return fmt.Errorf("%w: unknown dlq subcommand %q (list, show, replay)", errUsage, args[0])
}

// parseSince reads -since: an RFC 3339 time, or a duration back from now.
func parseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: -since %q is neither an RFC 3339 time nor a duration such as 24h", errUsage, s)
	}
	return t, nil
}

func runDLQList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		cfg           config.Config
		f             store.DeadLetterFilter
		since         string
		summary, asJS bool
	)
	s := config.NewSet("dlq list", "Usage: orderflow dlq list [flags]   (parked messages, oldest first)", stderr)
	cfg.RegisterDatabase(s)
	d := func(flag, usage string) config.Setting { return config.Own("ORDERFLOW_DLQ_", flag, usage) }
	s.String(&f.Kind, "", d("reason", "only this rejection kind (conflict, oversize, undecodable, malformed_json, missing_field, invalid_field, not_object, undeliverable)"))
	s.String(&f.OrderID, "", d("order", "only the dead letters whose keys name this order"))
	s.String(&since, "", d("since", "only those last seen since this RFC 3339 time or this long ago (24h)"))
	s.Int(&f.Limit, 100, d("limit", "list at most this many (at least 1)"))
	s.Bool(&summary, false, d("summary", "count by rejection kind instead of listing"))
	s.Bool(&asJS, false, d("json", "print JSON for scripts"))
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
	if summary {
		counts, err := db.DeadLetterSummary(ctx, f)
		if err != nil {
			return err
		}
		if asJS {
			return writeJSON(stdout, counts)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "REASON\tDEAD LETTERS\tDELIVERIES\tLAST SEEN")
		var n int64
		for _, c := range counts {
			n += c.Count
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", safe(c.Kind), c.Count, c.TimesSeen, c.LastSeenAt.UTC().Format(time.RFC3339))
		}
		fmt.Fprintf(tw, "total\t%d\t\t\n", n)
		return tw.Flush()
	}
	rows, err := db.DeadLetters(ctx, f)
	if err != nil {
		return err
	}
	if asJS {
		if rows == nil {
			rows = []store.DeadLetterRow{}
		}
		return writeJSON(stdout, rows)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tREASON\tKEYS\tTAG\tSEEN\tLAST SEEN\tMESSAGE ID\tREPLAYED")
	for _, r := range rows {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", r.ID, cut(safe(r.Reason), 60), cut(safe(r.Keys), 40), safe(r.Tags), r.TimesSeen,
			r.LastSeenAt.UTC().Format(time.RFC3339), safe(r.MessageID), replayed(r))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(rows) == f.Limit {
		fmt.Fprintf(stdout, "(the first %d; raise -limit or narrow with -reason, -order, -since)\n", f.Limit)
	}
	return nil
}

func runDLQShow(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		cfg  config.Config
		asJS bool
	)
	s := config.NewSet("dlq show", "Usage: orderflow dlq show [flags] ID   (one parked message, control characters escaped; -json: exact)", stderr)
	cfg.RegisterDatabase(s)
	s.Bool(&asJS, false, config.Own("ORDERFLOW_DLQ_", "json", "print JSON for scripts"))
	if err := s.Parse(args, nil); err != nil {
		if errors.Is(err, errHelp) {
			return err
		}
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if len(s.Args()) != 1 {
		return fmt.Errorf("%w: dlq show takes one dead letter ID", errUsage)
	}
	id, err := strconv.ParseInt(s.Args()[0], 10, 64)
	if err != nil || id < 1 {
		return fmt.Errorf("%w: %q is not a dead letter ID", errUsage, s.Args()[0])
	}
	db, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	d, ok, err := db.DeadLetter(ctx, id)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: dead letter %d", errNotFound, id)
	}
	if asJS {
		return writeJSON(stdout, d)
	}
	fmt.Fprintf(stdout, "dead letter %d\n  reason:     %s\n  kind:       %s\n  topic:      %s\n  message ID: %s\n  keys:       %s\n  tag:        %s\n"+
		"  times seen: %d (first %s, last %s)\n", d.ID, safe(d.Reason), safe(d.Kind()), safe(d.Topic), safe(d.MessageID), safe(d.Keys), safe(d.Tags), d.TimesSeen,
		d.FirstSeenAt.UTC().Format(time.RFC3339), d.LastSeenAt.UTC().Format(time.RFC3339))
	if d.ReplayedAt != nil {
		fmt.Fprintf(stdout, "  replayed:   %s\n", replayed(d))
	}
	if d.BodyCompression != "" {
		fmt.Fprintf(stdout, "  compression: %s (the body as stored)\n", d.BodyCompression)
	}
	if utf8.Valid(d.Body) && !strings.ContainsRune(string(d.Body), 0) {
		fmt.Fprintf(stdout, "  body (%d bytes):\n%s\n", len(d.Body), safeBody(string(d.Body)))
	} else {
		fmt.Fprintf(stdout, "  body (%d bytes, binary, base64):\n%s\n", len(d.Body), base64.StdEncoding.EncodeToString(d.Body))
	}
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// cut shortens s for a table column.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
