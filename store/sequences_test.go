package store_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orderflow/orderflow/store"
)

// gapsOf returns the holes of producer p as [from, to] pairs.
func gapsOf(t *testing.T, s *store.Store, p string) ([][2]int64, store.SeqProducer) {
	t.Helper()
	ps, err := s.SequenceGaps(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 1 || ps[0].ProducerID != p {
		t.Fatalf("SequenceGaps(%q) = %+v", p, ps)
	}
	out := [][2]int64{}
	for _, g := range ps[0].Gaps {
		out = append(out, [2]int64{g.From, g.To})
	}
	return out, ps[0]
}

func record(t *testing.T, s *store.Store, p string, seqs ...int64) {
	t.Helper()
	for _, n := range seqs {
		if err := s.RecordSeq(context.Background(), p, n); err != nil {
			t.Fatalf("RecordSeq(%s, %d): %v", p, n, err)
		}
	}
}

func rangeRows(t *testing.T, s *store.Store, p string) int64 {
	t.Helper()
	var n int64
	if err := s.DB().Raw(`SELECT count(*) FROM received_seq_ranges WHERE producer_id = ?`, p).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

func TestRecordSeqFindsAndClosesGaps(t *testing.T) {
	s := newStore(t)
	record(t, s, "p", 3, 1, 2, 7, 5, 2, 6)
	gaps, p := gapsOf(t, s, "p")
	if !reflect.DeepEqual(gaps, [][2]int64{{4, 4}}) || p.Highest != 7 || p.Received != 7 {
		t.Fatalf("gaps %v, producer %+v; want [4 4], highest 7, received 7", gaps, p)
	}
	if n := rangeRows(t, s, "p"); n != 2 {
		t.Fatalf("%d range rows, want 2", n)
	}
	record(t, s, "p", 4) // the late arrival closes the hole
	if gaps, _ := gapsOf(t, s, "p"); len(gaps) != 0 {
		t.Fatalf("gaps %v after the late arrival", gaps)
	}
	if n := rangeRows(t, s, "p"); n != 1 {
		t.Fatalf("%d range rows, want 1", n)
	}

	// Numbers start at 1: a hole below the first one received counts.
	record(t, s, "q", 4)
	if gaps, _ := gapsOf(t, s, "q"); !reflect.DeepEqual(gaps, [][2]int64{{1, 3}}) {
		t.Fatalf("gaps of q %v, want [1 3]", gaps)
	}
	all, err := s.SequenceGaps(context.Background(), "")
	if err != nil || len(all) != 2 || all[0].ProducerID != "p" || all[1].ProducerID != "q" {
		t.Fatalf("SequenceGaps(\"\") = %+v, %v", all, err)
	}

	for _, bad := range []struct {
		p   string
		seq int64
	}{{"", 1}, {"p", 0}, {"p", -3}, {"a\x00b", 1}, {strings.Repeat("p", 65), 1},
		{"a b", 1}, {"p\x1b[2J", 1}, {"prodücer", 1}} {
		if err := s.RecordSeq(context.Background(), bad.p, bad.seq); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("RecordSeq(%q, %d) = %v, want ErrInvalid", bad.p, bad.seq, err)
		}
	}
}

// TestSeqGapSince: a hole is open since the first number above it arrived,
// whichever range that number is in now.
func TestSeqGapSince(t *testing.T) {
	s := newStore(t)
	record(t, s, "p", 1)
	time.Sleep(50 * time.Millisecond)
	before := time.Now()
	record(t, s, "p", 6) // holes 2..5 open now
	after := time.Now()
	time.Sleep(300 * time.Millisecond)
	record(t, s, "p", 3) // splits them: 2 and 4..5, both open since 6 arrived
	_, p := gapsOf(t, s, "p")
	if len(p.Gaps) != 2 {
		t.Fatalf("gaps %+v", p.Gaps)
	}
	// Since is the database's clock when 6 was recorded: on this machine's
	// clock, within the call (a second's allowance below for rounding), and
	// before 3 arrived, however slow the calls were.
	for _, g := range p.Gaps {
		if g.Since.Before(before.Add(-time.Second)) || g.Since.After(after) {
			t.Errorf("gap %d..%d open since %s, want when 6 arrived (between %s and %s)", g.From, g.To, g.Since, before, after)
		}
	}
	if p.Gaps[0].Missing() != 1 || p.Gaps[1].Missing() != 2 {
		t.Errorf("missing %d and %d, want 1 and 2", p.Gaps[0].Missing(), p.Gaps[1].Missing())
	}
	if o := p.Gaps[0].OpenFor; o < 250*time.Millisecond || o > time.Minute {
		t.Errorf("gap open for %s, want about 300ms", o)
	}
	if n := len(p.Suspected(200 * time.Millisecond)); n != 2 {
		t.Errorf("%d holes open 200ms or longer, want 2", n)
	}
	if n := len(p.Suspected(time.Hour)); n != 0 {
		t.Errorf("%d holes open an hour or longer, want 0", n)
	}
}

// TestRecordSeqConcurrent: goroutines (bridges) record a shuffled sequence
// with repeats at once; what never arrived are exactly the holes, and the
// table holds one row per range.
func TestRecordSeqConcurrent(t *testing.T) {
	s := newStore(t)
	const n = 400
	lost := map[int64]bool{57: true, 200: true, 201: true, 202: true, 399: true}
	var seqs []int64
	for i := int64(1); i <= n; i++ {
		if !lost[i] {
			seqs = append(seqs, i, i) // every number twice: a redelivery
		}
	}
	rand.Shuffle(len(seqs), func(a, b int) { seqs[a], seqs[b] = seqs[b], seqs[a] })
	var wg sync.WaitGroup
	errs := make(chan error, len(seqs))
	const workers = 12
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(seqs); i += workers {
				if err := s.RecordSeq(context.Background(), "c", seqs[i]); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	gaps, p := gapsOf(t, s, "c")
	if want := [][2]int64{{57, 57}, {200, 202}, {399, 399}}; !reflect.DeepEqual(gaps, want) {
		t.Fatalf("gaps %v, want %v", gaps, want)
	}
	if p.Received != int64(len(seqs)) || p.Highest != n {
		t.Fatalf("producer %+v; want received %d, highest %d", p, len(seqs), n)
	}
	if rows := rangeRows(t, s, "c"); rows != int64(len(gaps)+1) {
		t.Fatalf("%d range rows for %d gaps", rows, len(gaps))
	}
}
