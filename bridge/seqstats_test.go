package bridge

import (
	"context"
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
	reg.MustRegister(NewSequenceStats(read, slog.New(slog.NewTextHandler(io.Discard, nil))))
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
	s := NewSequenceStats(read, slog.New(slog.NewTextHandler(io.Discard, nil)))
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
