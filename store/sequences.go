package store

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/orderflow/orderflow/fsm"
)

// RecordSeq records that the message numbered seq in producerID's sequence
// was received. The numbers are kept as contiguous ranges: a new number
// extends or joins its neighbours, a repeat changes nothing but the
// producer's counters. Concurrent calls for one producer are serialized by
// its row; calls for different producers do not wait for each other. A
// producer ID that breaks the contract's rule (fsm.ProducerIDRule), or a
// seq below 1, is refused with ErrInvalid.
func (s *Store) RecordSeq(ctx context.Context, producerID string, seq int64) error {
	if err := s.RecordSeqs(ctx, []SeqNum{{ProducerID: producerID, Seq: seq}}); err != nil {
		return fmt.Errorf("record seq %d of producer %q: %w", seq, producerID, err)
	}
	return nil
}

// SeqNum is a message's number in its producer's sequence.
type SeqNum struct {
	ProducerID string
	Seq        int64
}

// validSeq refuses, with ErrInvalid, a number RecordSeq would refuse.
func validSeq(n SeqNum) error {
	switch {
	case !fsm.ValidProducerID(n.ProducerID):
		return invalid(fmt.Errorf("producer_id %q must be %s", n.ProducerID, fsm.ProducerIDRule))
	case n.Seq < 1:
		return invalid(fmt.Errorf("seq %d of producer %q is below 1", n.Seq, n.ProducerID))
	}
	return nil
}

// RecordSeqs records nums, repeats included, as RecordSeq records each, in
// one transaction: all or none. Each producer's row is locked once, in the
// order of the producers' IDs, so that concurrent calls never wait for each
// other in a cycle. Any invalid number refuses the whole call with
// ErrInvalid.
func (s *Store) RecordSeqs(ctx context.Context, nums []SeqNum) error {
	byProducer := map[string][]int64{}
	for _, n := range nums {
		if err := validSeq(n); err != nil {
			return err
		}
		byProducer[n.ProducerID] = append(byProducer[n.ProducerID], n.Seq)
	}
	if len(byProducer) == 0 {
		return nil
	}
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for _, p := range slices.Sorted(maps.Keys(byProducer)) {
			if err := recordProducerSeqs(tx, p, byProducer[p]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record %d sequence numbers: %w", len(nums), err)
	}
	return nil
}

// recordProducerSeqs records seqs of producerID in tx: it counts them on
// the producer's row, which it locks, then merges them into the ranges
// around them, rewriting only the ranges that change.
func recordProducerSeqs(tx *gorm.DB, producerID string, seqs []int64) error {
	if err := tx.Exec(`
		INSERT INTO received_seq_producers AS p (producer_id, received) VALUES (?, ?)
		ON CONFLICT (producer_id) DO UPDATE SET received = p.received + EXCLUDED.received, last_seen_at = now()`,
		producerID, len(seqs)).Error; err != nil {
		return err
	}
	seqs = slices.Compact(slices.Sorted(slices.Values(seqs)))
	var near []seqRange
	if err := tx.Raw(`
		SELECT lo, hi, since FROM received_seq_ranges
		WHERE producer_id = ? AND lo <= ? AND hi >= ?
		ORDER BY lo`, producerID, seqs[len(seqs)-1]+1, seqs[0]-1).Scan(&near).Error; err != nil {
		return err
	}
	gone, added := mergeSeqs(near, seqs)
	if len(gone) > 0 {
		res := tx.Exec(`DELETE FROM received_seq_ranges WHERE producer_id = ? AND lo IN ?`, producerID, gone)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected != int64(len(gone)) {
			return fmt.Errorf("ranges of producer %q changed under its lock", producerID)
		}
	}
	if len(added) == 0 {
		return nil
	}
	var q strings.Builder
	args := make([]any, 0, 4*len(added))
	q.WriteString(`INSERT INTO received_seq_ranges (producer_id, lo, hi, since) VALUES `)
	for i, r := range added {
		if i > 0 {
			q.WriteString(", ")
		}
		// A range of new numbers only is received since now.
		q.WriteString(`(?, ?, ?, coalesce(?::timestamptz, now()))`)
		var since *time.Time
		if !r.Since.IsZero() {
			since = &r.Since
		}
		args = append(args, producerID, r.Lo, r.Hi, since)
	}
	return tx.Exec(q.String(), args...).Error
}

// mergeSeqs merges the sorted, distinct numbers seqs into the ranges near
// them (sorted by Lo; neither overlapping nor touching): the ranges to
// delete, by Lo, and those to insert in their place. A range that takes new
// numbers or joins another is replaced, with the earliest Since of the
// ranges it joined; one of new numbers only has a zero Since. The others
// stay.
func mergeSeqs(near []seqRange, seqs []int64) (gone []int64, added []seqRange) {
	type part struct {
		r   seqRange
		old bool
	}
	parts := make([]part, 0, len(near)+len(seqs))
	for _, r := range near {
		parts = append(parts, part{r, true})
	}
	for _, n := range seqs {
		i, _ := slices.BinarySearchFunc(near, n, func(r seqRange, n int64) int { return cmp.Compare(r.Hi, n) })
		if i < len(near) && near[i].Lo <= n {
			continue // a repeat
		}
		parts = append(parts, part{seqRange{Lo: n, Hi: n}, false})
	}
	slices.SortFunc(parts, func(a, b part) int { return cmp.Compare(a.r.Lo, b.r.Lo) })
	for i := 0; i < len(parts); {
		merged, olds, news := parts[i].r, []int64{}, 0
		j := i
		for ; j < len(parts) && (j == i || parts[j].r.Lo <= merged.Hi+1); j++ {
			p := parts[j]
			merged.Hi = max(merged.Hi, p.r.Hi)
			if !p.old {
				news++
				continue
			}
			olds = append(olds, p.r.Lo)
			if merged.Since.IsZero() || p.r.Since.Before(merged.Since) {
				merged.Since = p.r.Since
			}
		}
		if news > 0 { // old ranges never touch: only new numbers join them
			gone = append(gone, olds...)
			added = append(added, merged)
		}
		i = j
	}
	return gone, added
}

// seqRange is a row of received_seq_ranges.
type seqRange struct {
	Lo, Hi int64
	Since  time.Time
}

// SeqGap is a hole in a producer's sequence: the numbers From..To were never
// received, while a higher one was.
type SeqGap struct {
	From int64 `json:"from"`
	To   int64 `json:"to"`
	// Since is when the hole opened: when the first number above it was
	// recorded.
	Since time.Time `json:"since"`
	// OpenFor is how long it has been open, by the database's clock.
	OpenFor time.Duration `json:"open_for_ns"`
}

// Missing is the number of messages in the hole.
func (g SeqGap) Missing() int64 { return g.To - g.From + 1 }

// SeqProducer is what was received of one producer's sequence.
type SeqProducer struct {
	ProducerID string `json:"producer_id"`
	// Received counts the recorded messages, repeats included.
	Received int64 `json:"received"`
	// Highest is the highest number received.
	Highest     int64     `json:"highest"`
	FirstSeenAt time.Time `json:"first_seen_at"`
	LastSeenAt  time.Time `json:"last_seen_at"`
	// Gaps are the holes, lowest first.
	Gaps []SeqGap `json:"gaps"`
}

// SequenceGaps returns every producer whose numbers were recorded (only
// producerID when it is not empty), by producer ID, with the holes in its
// sequence, read from one snapshot. A hole below the lowest number received
// counts: sequences start at 1.
func (s *Store) SequenceGaps(ctx context.Context, producerID string) ([]SeqProducer, error) {
	var (
		producers []struct {
			ProducerID              string
			Received, Highest       int64
			FirstSeenAt, LastSeenAt time.Time
		}
		gaps []struct {
			ProducerID string
			From, To   int64
			Since      time.Time
			OpenFor    float64
		}
	)
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Raw(`
			SELECT p.producer_id, p.received, p.first_seen_at, p.last_seen_at,
			       coalesce((SELECT max(hi) FROM received_seq_ranges r WHERE r.producer_id = p.producer_id), 0) AS highest
			FROM received_seq_producers p
			WHERE ? = '' OR p.producer_id = ?
			ORDER BY p.producer_id`, producerID, producerID).Scan(&producers).Error; err != nil {
			return err
		}
		return tx.Raw(`
			SELECT producer_id, prev_hi + 1 AS "from", lo - 1 AS "to", since_above AS since,
			       extract(epoch FROM now() - since_above)::float8 AS open_for
			FROM (
				SELECT producer_id, lo,
				       coalesce(lag(hi) OVER (PARTITION BY producer_id ORDER BY lo), 0) AS prev_hi,
				       min(since) OVER (PARTITION BY producer_id ORDER BY lo DESC
				                        ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS since_above
				FROM received_seq_ranges
				WHERE ? = '' OR producer_id = ?
			) r
			WHERE lo > prev_hi + 1
			ORDER BY producer_id, lo`, producerID, producerID).Scan(&gaps).Error
	}, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("read sequence gaps: %w", err)
	}
	out := make([]SeqProducer, len(producers))
	at := map[string]int{}
	for i, p := range producers {
		out[i] = SeqProducer{ProducerID: p.ProducerID, Received: p.Received, Highest: p.Highest,
			FirstSeenAt: p.FirstSeenAt, LastSeenAt: p.LastSeenAt}
		at[p.ProducerID] = i
	}
	for _, g := range gaps {
		if i, ok := at[g.ProducerID]; ok {
			out[i].Gaps = append(out[i].Gaps, SeqGap{From: g.From, To: g.To, Since: g.Since,
				OpenFor: time.Duration(g.OpenFor * float64(time.Second))})
		}
	}
	return out, nil
}

// Suspected returns the holes of p open for window or longer when read:
// the suspected losses. A younger hole may still close (numbers arrive out
// of order).
func (p SeqProducer) Suspected(window time.Duration) []SeqGap {
	var out []SeqGap
	for _, g := range p.Gaps {
		if g.OpenFor >= window {
			out = append(out, g)
		}
	}
	return out
}
