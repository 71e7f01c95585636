package bridge

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestSequenceStatsScrapesDoNotRead: 200 concurrent scrapes of the
// suspected losses do not read them (no window query per scrape).
func TestSequenceStatsScrapesDoNotRead(t *testing.T) {
	var reads atomic.Int64
	read := func(context.Context) ([]ProducerGaps, error) {
		reads.Add(1)
		return []ProducerGaps{{ProducerID: "p1", Gaps: 2, Missing: 5}}, nil
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewSequenceStats(read, slog.New(slog.NewTextHandler(io.Discard, nil)), 0, nil))
	var wg sync.WaitGroup
	for range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := reg.Gather(); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := reads.Load(); n != 0 {
		t.Errorf("200 scrapes read the sequence gaps %d times, want 0", n)
	}
}

// TestSequenceStatsServeLastReading: a scrape serves what the last Refresh
// read, with its age, and keeps it when a later reading fails.
func TestSequenceStatsServeLastReading(t *testing.T) {
	var fail atomic.Bool
	read := func(context.Context) ([]ProducerGaps, error) {
		if fail.Load() {
			return nil, context.DeadlineExceeded
		}
		return []ProducerGaps{{ProducerID: "p1", Gaps: 2, Missing: 5}}, nil
	}
	s := NewSequenceStats(read, slog.New(slog.NewTextHandler(io.Discard, nil)), 0, nil)
	reg := prometheus.NewRegistry()
	reg.MustRegister(s)
	if got := gathered(t, reg); len(got) != 0 {
		t.Errorf("before the first reading: %v, want nothing", got)
	}
	for _, failing := range []bool{false, true} {
		fail.Store(failing)
		s.Refresh(context.Background())
		got := gathered(t, reg)
		if got["orderflow_sequence_gaps{p1}"] != 2 || got["orderflow_sequence_missing_messages{p1}"] != 5 {
			t.Errorf("failing reading %v: %v", failing, got)
		}
		if _, ok := got["orderflow_sequence_gaps_age_seconds{}"]; !ok {
			t.Errorf("failing reading %v: no age in %v", failing, got)
		}
	}
}

// TestSequenceStatsBoundLabels: of 30 producers with suspected losses and
// 40 without, only the 20 missing the most messages get series of their
// own; the totals count all 30; producers without losses get none.
func TestSequenceStatsBoundLabels(t *testing.T) {
	var ps []ProducerGaps
	var wantMissing int64
	for i := range 30 { // lossy-i misses i+1 messages in one hole
		ps = append(ps, ProducerGaps{ProducerID: fmt.Sprintf("lossy-%02d", i), Gaps: 1, Missing: int64(i + 1)})
		wantMissing += int64(i + 1)
	}
	for i := range 40 {
		ps = append(ps, ProducerGaps{ProducerID: fmt.Sprintf("fine-%02d", i)})
	}
	got := refreshed(t, ps, 20, nil)
	series := labelled(got, "orderflow_sequence_missing_messages")
	if len(series) != 20 || len(labelled(got, "orderflow_sequence_gaps")) != 20 {
		t.Fatalf("%d per-producer series, want 20: %v", len(series), series)
	}
	for i := 10; i < 30; i++ { // the 20 missing the most: lossy-10 .. lossy-29
		id := fmt.Sprintf("lossy-%02d", i)
		if series[id] != float64(i+1) {
			t.Errorf("%s: missing %v, want %d", id, series[id], i+1)
		}
	}
	for name, want := range map[string]float64{
		"orderflow_sequence_producers{}":                  70,
		"orderflow_sequence_watched_gap_producers{}":      30,
		"orderflow_sequence_watched_gaps{}":               30,
		"orderflow_sequence_watched_missing_messages{}":   float64(wantMissing),
		"orderflow_sequence_unwatched_gap_producers{}":    0,
		"orderflow_sequence_unwatched_missing_messages{}": 0,
	} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("%s = %v (exported %v), want %v", name, v, ok, want)
		}
	}
}

// TestSequenceStatsAllowList: with an allow-list, only the listed
// producers' losses raise per-producer series; the others' are counted in
// the unwatched totals.
func TestSequenceStatsAllowList(t *testing.T) {
	ps := []ProducerGaps{
		{ProducerID: "shop-a", Gaps: 2, Missing: 5},
		{ProducerID: "shop-b"},
		{ProducerID: "forged-1", Gaps: 1, Missing: 1000},
		{ProducerID: "forged-2", Gaps: 3, Missing: 7},
	}
	got := refreshed(t, ps, 20, []string{"shop-a", "shop-b", "shop-c"})
	if series := labelled(got, "orderflow_sequence_missing_messages"); len(series) != 1 || series["shop-a"] != 5 {
		t.Errorf("per-producer series %v, want shop-a only, 5 missing", series)
	}
	if series := labelled(got, "orderflow_sequence_gaps"); len(series) != 1 || series["shop-a"] != 2 {
		t.Errorf("per-producer gaps %v, want shop-a only, 2 holes", series)
	}
	for name, want := range map[string]float64{
		"orderflow_sequence_watched_gap_producers{}":      1,
		"orderflow_sequence_watched_gaps{}":               2,
		"orderflow_sequence_watched_missing_messages{}":   5,
		"orderflow_sequence_unwatched_gap_producers{}":    2,
		"orderflow_sequence_unwatched_gaps{}":             4,
		"orderflow_sequence_unwatched_missing_messages{}": 1007,
	} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("%s = %v (exported %v), want %v", name, v, ok, want)
		}
	}
}

// refreshed is what a scrape serves after one reading of ps.
func refreshed(t *testing.T, ps []ProducerGaps, series int, watched []string) map[string]float64 {
	t.Helper()
	s := NewSequenceStats(func(context.Context) ([]ProducerGaps, error) { return ps, nil },
		slog.New(slog.NewTextHandler(io.Discard, nil)), series, watched)
	reg := prometheus.NewRegistry()
	reg.MustRegister(s)
	s.Refresh(context.Background())
	return gathered(t, reg)
}

// labelled is the series of metric name by their one label's value.
func labelled(got map[string]float64, name string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range got {
		if rest, ok := strings.CutPrefix(k, name+"{"); ok && rest != "}" {
			out[strings.TrimSuffix(rest, "}")] = v
		}
	}
	return out
}

// gathered is every gauge of reg by name{label values}.
func gathered(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetValue())
			}
			out[mf.GetName()+"{"+strings.Join(labels, ",")+"}"] = m.GetGauge().GetValue()
		}
	}
	return out
}
