package store

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
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
	if len(nums) == 0 {
		return nil
	}
	producers, seqs := make([]string, len(nums)), make([]string, len(nums))
	for i, n := range nums {
		if err := validSeq(n); err != nil {
			return err
		}
		producers[i], seqs[i] = n.ProducerID, strconv.FormatInt(n.Seq, 10)
	}
	// One call, one round trip: orderflow_record_seqs (migration 00010)
	// locks each producer's row in the order of their IDs and merges its
	// numbers into the ranges around them, rewriting only those that change.
	// The lists go as comma-separated text (a producer ID holds no comma).
	if err := s.db.WithContext(ctx).Exec(`SELECT orderflow_record_seqs(string_to_array(?::text, ','), string_to_array(?::text, ',')::bigint[])`,
		strings.Join(producers, ","), strings.Join(seqs, ",")).Error; err != nil {
		return fmt.Errorf("record %d sequence numbers: %w", len(nums), err)
	}
	return nil
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
