package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/orderflow/orderflow/config"
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
// been open for the window or longer (a suspected loss).
func runGaps(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		cfg      config.Config
		producer string
		asJS     bool
	)
	s := config.NewSet("gaps", "Usage: orderflow gaps [flags]   (holes in the producers' sequences: suspected lost messages)", stderr)
	cfg.RegisterDatabase(s)
	cfg.RegisterGapWindow(s)
	g := func(flag, usage string) config.Setting { return config.Own("ORDERFLOW_GAPS_", flag, usage) }
	s.String(&producer, "", g("producer", "only this producer ID"))
	s.Bool(&asJS, false, g("json", "print JSON for scripts"))
	if err := parse(s, args); err != nil {
		return err
	}
	if cfg.GapWindow < 0 {
		return fmt.Errorf("%w: -gap-window %s is negative", errUsage, cfg.GapWindow)
	}
	db, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	ps, err := db.SequenceGaps(ctx, producer)
	if err != nil {
		return err
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
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\n", p.ProducerID, p.Received, p.Highest, len(p.Gaps), missing,
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
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", p.ProducerID, seqRange(g), g.Missing(),
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
		fmt.Fprintf(w, "suspected lost: %d messages from producer %s (seq %s)\n", r.Suspected[p.ProducerID], p.ProducerID, strings.Join(seqs, ", "))
		n++
	}
	if n == 0 {
		fmt.Fprintf(w, "no suspected loss: %d producer(s), no hole open for %s or longer (as of %s)\n",
			len(r.Producers), r.Window, now.UTC().Format(time.RFC3339))
	}
	return nil
}

// seqRange renders a hole as "n" or "from-to".
func seqRange(g store.SeqGap) string {
	if g.From == g.To {
		return fmt.Sprint(g.From)
	}
	return fmt.Sprintf("%d-%d", g.From, g.To)
}
