package store_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
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

// rangesOf returns producer p's ranges as [lo, hi] pairs, by lo.
func rangesOf(t *testing.T, s *store.Store, p string) [][2]int64 {
	t.Helper()
	var rows []struct{ Lo, Hi int64 }
	if err := s.DB().Raw(`SELECT lo, hi FROM received_seq_ranges WHERE producer_id = ? ORDER BY lo`, p).Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	out := [][2]int64{}
	for _, r := range rows {
		out = append(out, [2]int64{r.Lo, r.Hi})
	}
	return out
}

// TestRecordSeqsBatch records one batch into ranges recorded one by one:
// numbers that join two ranges, extend one, repeat one, start a new one,
// and another producer's, each case worked out by hand.
func TestRecordSeqsBatch(t *testing.T) {
	s := newStore(t)
	record(t, s, "p", 1, 2, 3) // 1..3
	time.Sleep(50 * time.Millisecond)
	record(t, s, "p", 7, 10, 11, 12) // 7, 10..12
	var first time.Time
	if err := s.DB().Raw(`SELECT since FROM received_seq_ranges WHERE producer_id = 'p' AND lo = 1`).Scan(&first).Error; err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	batch := []store.SeqNum{{"p", 5}, {"q", 15}, {"p", 4}, {"p", 6}, {"p", 7}, {"p", 9}, {"p", 21}, {"p", 20}, {"p", 4}}
	if err := s.RecordSeqs(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	if got, want := rangesOf(t, s, "p"), [][2]int64{{1, 7}, {9, 12}, {20, 21}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("ranges of p %v, want %v", got, want)
	}
	if got, want := rangesOf(t, s, "q"), [][2]int64{{15, 15}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("ranges of q %v, want %v", got, want)
	}
	gaps, p := gapsOf(t, s, "p")
	if want := [][2]int64{{8, 8}, {13, 19}}; !reflect.DeepEqual(gaps, want) || p.Received != 7+8 || p.Highest != 21 {
		t.Fatalf("gaps %v, producer %+v; want %v, received 15, highest 21", gaps, p, want)
	}
	// 1..7 keeps the time 1 arrived; 20..21 is new: the hole below it opened
	// with this batch, the one below 9..12 when 10 arrived, before it.
	var since []time.Time
	if err := s.DB().Raw(`SELECT since FROM received_seq_ranges WHERE producer_id = 'p' ORDER BY lo`).Scan(&since).Error; err != nil {
		t.Fatal(err)
	}
	if !since[0].Equal(first) || !since[1].After(first) || !since[1].Before(before) || since[2].Before(before.Add(-time.Second)) {
		t.Fatalf("since %v; want %s, then after it and before %s, then about %s", since, first, before, before)
	}

	// An invalid number refuses the whole batch.
	err := s.RecordSeqs(context.Background(), []store.SeqNum{{"p", 8}, {"p", 0}})
	if !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("a batch with seq 0: %v, want ErrInvalid", err)
	}
	if gaps, _ := gapsOf(t, s, "p"); len(gaps) != 2 {
		t.Fatalf("gaps %v after a refused batch, want 8 still missing", gaps)
	}
}

// TestRecordSeqsConcurrentBatches: goroutines record two producers'
// shuffled sequences, with repeats, in batches of random sizes that mix
// both producers; what never arrived are exactly the holes (no batch waits
// for another in a cycle, which PostgreSQL would refuse as a deadlock).
func TestRecordSeqsConcurrentBatches(t *testing.T) {
	s := newStore(t)
	const n = 300
	lost := map[string][]int64{"c": {1, 150, 151, 298}, "d": {40, 41, 42, 43, 300}}
	var nums []store.SeqNum
	for p, l := range lost {
		for i := int64(1); i <= n; i++ {
			if !slices.Contains(l, i) {
				nums = append(nums, store.SeqNum{ProducerID: p, Seq: i}, store.SeqNum{ProducerID: p, Seq: i})
			}
		}
	}
	rand.Shuffle(len(nums), func(a, b int) { nums[a], nums[b] = nums[b], nums[a] })
	var batches [][]store.SeqNum
	for rest := nums; len(rest) > 0; {
		k := min(len(rest), 1+rand.IntN(20))
		batches, rest = append(batches, rest[:k]), rest[k:]
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(batches))
	const workers = 8
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(batches); i += workers {
				if err := s.RecordSeqs(context.Background(), batches[i]); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for p, want := range map[string][][2]int64{"c": {{1, 1}, {150, 151}, {298, 298}}, "d": {{40, 43}}} {
		gaps, got := gapsOf(t, s, p)
		if !reflect.DeepEqual(gaps, want) {
			t.Errorf("gaps of %s %v, want %v", p, gaps, want)
		}
		if wantReceived := 2 * (n - int64(len(lost[p]))); got.Received != wantReceived {
			t.Errorf("%s received %d, want %d", p, got.Received, wantReceived)
		}
	}
}

// waitFor polls cond every 10 ms until it holds, failing t after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s for %s", what)
		}
	}
}

// TestSeqRecorderCommitsTogether holds producer p's row locked while one
// number's commit waits for it and ten more calls queue behind that commit;
// once the lock goes, the ten are committed in one transaction: their new
// ranges have one "since", the transaction's start, and the first number's
// another. Every call returns only once its number is recorded.
func TestSeqRecorderCommitsTogether(t *testing.T) {
	s := newStore(t)
	record(t, s, "p", 1)
	r := s.NewSeqRecorder(time.Minute, 0)
	lock := s.DB().Begin()
	if err := lock.Exec(`SELECT 1 FROM received_seq_producers WHERE producer_id = 'p' FOR UPDATE`).Error; err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 11)
	call := func(seq int64) {
		wg.Go(func() {
			if err := r.Record(context.Background(), "p", seq); err != nil {
				errs <- err
				return
			}
			var in int64
			if err := s.DB().Raw(`SELECT count(*) FROM received_seq_ranges WHERE producer_id = 'p' AND lo <= ? AND hi >= ?`, seq, seq).Scan(&in).Error; err != nil || in != 1 {
				errs <- fmt.Errorf("seq %d: returned before it was recorded (%d ranges hold it, %v)", seq, in, err)
			}
		})
	}
	call(100)
	waitFor(t, "the first commit to wait for the lock", func() bool {
		var n int64
		_ = s.DB().Raw(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n).Error
		return n == 1
	})
	for i := range int64(10) {
		call(200 + 10*i)
	}
	waitFor(t, "ten calls to queue", func() bool { return store.QueuedSeqs(r) == 10 })
	if err := lock.Commit().Error; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var sinces []time.Time
	if err := s.DB().Raw(`SELECT DISTINCT since FROM received_seq_ranges WHERE producer_id = 'p' AND lo >= 100 ORDER BY since`).Scan(&sinces).Error; err != nil {
		t.Fatal(err)
	}
	if len(sinces) != 2 {
		t.Fatalf("the ranges from 100 up have %d distinct since, want 2 (100's commit, then one for the ten): %v", len(sinces), sinces)
	}
	if _, p := gapsOf(t, s, "p"); p.Received != 12 || len(p.Gaps) != 11 {
		t.Fatalf("producer %+v, want 12 received and 11 holes", p)
	}
	if err := r.Record(context.Background(), "p", 0); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Record seq 0: %v, want ErrInvalid", err)
	}
}

// TestSeqRecorderLingers: numbers recorded one after another, 20 ms apart,
// within the linger of an idle recorder share its commit (their ranges
// have one "since", the transaction's start); each call returns once its
// number is recorded, none much later than the linger after it began; a
// number recorded after that commit starts the next.
func TestSeqRecorderLingers(t *testing.T) {
	s := newStore(t)
	const linger = 400 * time.Millisecond
	r := s.NewSeqRecorder(time.Minute, linger)
	var wg sync.WaitGroup
	errs := make(chan error, 5)
	for i := range int64(4) {
		wg.Go(func() {
			began := time.Now()
			if err := r.Record(context.Background(), "p", 10*(i+1)); err != nil {
				errs <- err
				return
			}
			if took := time.Since(began); took > linger+5*time.Second {
				errs <- fmt.Errorf("seq %d: Record took %s, linger %s", 10*(i+1), took, linger)
			}
		})
		time.Sleep(20 * time.Millisecond)
	}
	wg.Wait()
	if err := r.Record(context.Background(), "p", 100); err != nil {
		t.Fatal(err)
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var sinces []time.Time
	if err := s.DB().Raw(`SELECT DISTINCT since FROM received_seq_ranges WHERE producer_id = 'p' ORDER BY since`).Scan(&sinces).Error; err != nil {
		t.Fatal(err)
	}
	if len(sinces) != 2 {
		t.Fatalf("the ranges have %d distinct since, want 2 (the four numbers' commit, then 100's): %v", len(sinces), sinces)
	}
	if _, p := gapsOf(t, s, "p"); p.Received != 5 {
		t.Fatalf("producer %+v, want 5 received", p)
	}
}
