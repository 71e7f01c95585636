package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/orderflow/orderflow/config"
	"github.com/orderflow/orderflow/scenario"
	"github.com/orderflow/orderflow/store"
)

// gapsReport is what `orderflow gaps -json` prints.
type gapsReport struct {
	Window    string              `json:"window"`
	Producers []store.SeqProducer `json:"producers"`
	// Suspected are the messages missing from holes open longer than the
	// window, per producer.
	Suspected map[string]int64 `json:"suspected"`

	window time.Duration
}

// runGaps lists the producers whose sequence numbers the bridges recorded,
// with the holes in their sequences and since when, and fails when one has
// been open for the window or longer (a suspected loss). With -expected
// FILE it lists the producer of a published scenario run and fails unless
// its suspected losses are exactly the numbers the run lost.
func runGaps(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		cfg      config.Config
		producer string
		asJS     bool
		expected string
		wait     time.Duration
	)
	s := config.NewSet("gaps", "Usage: orderflow gaps [flags]   (holes in the producers' sequences: suspected lost messages)", stderr)
	cfg.RegisterDatabase(s)
	cfg.RegisterGapWindow(s)
	g := func(flag, usage string) config.Setting { return config.Own("ORDERFLOW_GAPS_", flag, usage) }
	s.String(&producer, "", g("producer", "only this producer ID"))
	s.Bool(&asJS, false, g("json", "print JSON for scripts"))
	s.String(&expected, "", g("expected", "the expected-state file of a scenario run (orderflow publish -out): list its producer only, "+
		"and exit 0 only if its suspected losses are exactly the numbers the run spent on events it never published"))
	s.Duration(&wait, 0, g("wait", "with -expected: how long to wait for the suspected losses to match"))
	if err := parse(s, args); err != nil {
		return err
	}
	if cfg.GapWindow < 0 {
		return fmt.Errorf("%w: -gap-window %s is negative", errUsage, cfg.GapWindow)
	}
	var exp *scenario.Expected
	if expected != "" {
		var err error
		if exp, err = scenario.ReadFile(expected); err != nil {
			return fmt.Errorf("%w: %w", errUsage, err)
		}
		if producer != "" && producer != exp.Options.ProducerID {
			return fmt.Errorf("%w: -producer %s is not the producer of run %s (%s)", errUsage, producer, exp.Prefix, exp.Options.ProducerID)
		}
		producer = exp.Options.ProducerID
	} else if wait != 0 {
		return fmt.Errorf("%w: -wait needs -expected", errUsage)
	}
	db, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	var (
		ps       []store.SeqProducer
		mismatch error
	)
	for deadline := time.Now().Add(wait); ; {
		if ps, err = db.SequenceGaps(ctx, producer); err != nil {
			return err
		}
		if exp == nil {
			break
		}
		if mismatch = compareLost(exp, ps, cfg.GapWindow); mismatch == nil || !time.Now().Before(deadline) {
			break
		}
		if err := sleepCtx(ctx, time.Second); err != nil {
			return err
		}
	}
	if producer != "" && len(ps) == 0 {
		return fmt.Errorf("%w: no sequence number of producer %q was recorded", errNotFound, producer)
	}
	r := gapsReport{Window: cfg.GapWindow.String(), Producers: ps, Suspected: map[string]int64{}, window: cfg.GapWindow}
	var lost, gaps int64
	for _, p := range ps {
		for _, h := range p.Suspected(cfg.GapWindow) {
			r.Suspected[p.ProducerID] += h.Missing()
			lost += h.Missing()
			gaps++
		}
	}
	if asJS {
		if r.Producers == nil {
			r.Producers = []store.SeqProducer{}
		}
		if err := writeJSON(stdout, r); err != nil {
			return err
		}
	} else if err := writeGaps(stdout, r); err != nil {
		return err
	}
	if exp != nil {
		if mismatch != nil {
			return fmt.Errorf("%w: run %s: %w", errFinding, exp.Prefix, mismatch)
		}
		if !asJS {
			fmt.Fprintf(stdout, "run %s: the suspected losses are the %d event(s) it lost\n", exp.Prefix, len(exp.OpenHoles()))
		}
		return nil
	}
	if lost > 0 {
		return fmt.Errorf("%w: %d suspected lost messages in %d gaps", errFinding, lost, gaps)
	}
	return nil
}

// writeGaps prints the report as tables, then one line per producer with
// suspected losses.
func writeGaps(w io.Writer, r gapsReport) error {
	now := time.Now()
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PRODUCER\tRECEIVED\tHIGHEST\tGAPS\tMISSING\tSUSPECTED\tLAST SEEN")
	for _, p := range r.Producers {
		var missing int64
		for _, g := range p.Gaps {
			missing += g.Missing()
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\n", safe(p.ProducerID), p.Received, p.Highest, len(p.Gaps), missing,
			r.Suspected[p.ProducerID], p.LastSeenAt.UTC().Format(time.RFC3339))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	header := false
	for _, p := range r.Producers {
		for _, g := range p.Gaps {
			if !header {
				fmt.Fprintln(w)
				tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "PRODUCER\tMISSING SEQ\tMESSAGES\tSINCE\tOPEN FOR\tSTATE")
				header = true
			}
			state := "open"
			if g.OpenFor >= r.window {
				state = "suspected lost"
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", safe(p.ProducerID), seqRange(g), g.Missing(),
				g.Since.UTC().Format(time.RFC3339), g.OpenFor.Round(time.Second), state)
		}
	}
	if header {
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(w)
	n := 0
	for _, p := range r.Producers {
		if r.Suspected[p.ProducerID] == 0 {
			continue
		}
		var seqs []string
		for _, g := range p.Suspected(r.window) {
			seqs = append(seqs, seqRange(g))
		}
		fmt.Fprintf(w, "suspected lost: %d messages from producer %s (seq %s)\n", r.Suspected[p.ProducerID], safe(p.ProducerID), strings.Join(seqs, ", "))
		n++
	}
	if n == 0 {
		fmt.Fprintf(w, "no suspected loss: %d producer(s), no hole open for %s or longer (as of %s)\n",
			len(r.Producers), r.Window, now.UTC().Format(time.RFC3339))
	}
	return nil
}

// compareLost returns nil when the suspected losses of ps, the producer of
// run exp, are exactly the numbers exp spent on events not published in
// its phases so far (Expected.OpenHoles), else what differs.
func compareLost(exp *scenario.Expected, ps []store.SeqProducer, window time.Duration) error {
	pid := exp.Options.ProducerID
	holes := exp.OpenHoles()
	lost := map[scenario.Key]bool{}
	want := map[int64]bool{}
	for _, h := range holes {
		if h.ProducerID != pid {
			return fmt.Errorf("the file records a hole of producer %s, not %s", h.ProducerID, pid)
		}
		lost[h.Key()] = true
		want[h.Seq] = true
	}
	for _, k := range exp.Lost {
		if !lost[k.Key()] {
			return fmt.Errorf("the file records no sequence number for lost event %s (was it published by orderflow publish?)", k.Key())
		}
	}
	if len(ps) != 1 || ps[0].ProducerID != pid {
		return fmt.Errorf("no sequence number of producer %s was recorded", pid)
	}
	p := ps[0]
	var n int64
	for _, g := range p.Suspected(window) {
		n += g.Missing()
	}
	if n != int64(len(want)) {
		hint := ""
		for seq := range want {
			if seq > p.Highest {
				hint = fmt.Sprintf("; a hole above the highest number received (%d) shows only once the producer sends again", p.Highest)
			}
		}
		return fmt.Errorf("%d suspected lost messages from producer %s, the run lost %d (seq %s)%s", n, pid, len(want), holeSeqs(holes), hint)
	}
	var extra []string
	for _, g := range p.Suspected(window) {
		for seq := g.From; seq <= g.To; seq++ {
			if !want[seq] {
				extra = append(extra, fmt.Sprint(seq))
			}
		}
	}
	if len(extra) > 0 {
		return fmt.Errorf("producer %s: seq %s suspected lost, but the run lost seq %s", pid, strings.Join(extra, ", "), holeSeqs(holes))
	}
	return nil
}

// sleepCtx waits for d, or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// seqRange renders a hole as "n" or "from-to".
func seqRange(g store.SeqGap) string {
	if g.From == g.To {
		return fmt.Sprint(g.From)
	}
	return fmt.Sprintf("%d-%d", g.From, g.To)
}
