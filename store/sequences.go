package store

import (
	"context"
	"database/sql"
	"fmt"
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
	switch {
	case !fsm.ValidProducerID(producerID):
		return invalid(fmt.Errorf("producer_id %q must be %s", producerID, fsm.ProducerIDRule))
	case seq < 1:
		return invalid(fmt.Errorf("seq %d of producer %q is below 1", seq, producerID))
	}
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Exec(`
			INSERT INTO received_seq_producers AS p (producer_id, received) VALUES (?, 1)
			ON CONFLICT (producer_id) DO UPDATE SET received = p.received + 1, last_seen_at = now()`,
			producerID).Error; err != nil {
			return err
		}
		var near []seqRange
		if err := tx.Raw(`
			SELECT lo, hi, since FROM received_seq_ranges
			WHERE producer_id = ? AND lo <= ? AND hi >= ?
			ORDER BY lo`, producerID, seq+1, seq-1).Scan(&near).Error; err != nil {
			return err
		}
		var left, right *seqRange
		for i := range near {
			r := &near[i]
			switch {
			case r.Lo <= seq && seq <= r.Hi:
				return nil // a repeat
			case r.Hi == seq-1:
				left = r
			case r.Lo == seq+1:
				right = r
			}
		}
		var res *gorm.DB
		switch {
		case left != nil && right != nil:
			if err := tx.Exec(`DELETE FROM received_seq_ranges WHERE producer_id = ? AND lo = ?`, producerID, right.Lo).Error; err != nil {
				return err
			}
			res = tx.Exec(`UPDATE received_seq_ranges SET hi = ?, since = least(since, ?) WHERE producer_id = ? AND lo = ?`,
				right.Hi, right.Since, producerID, left.Lo)
		case left != nil:
			res = tx.Exec(`UPDATE received_seq_ranges SET hi = ? WHERE producer_id = ? AND lo = ?`, seq, producerID, left.Lo)
		case right != nil:
			res = tx.Exec(`UPDATE received_seq_ranges SET lo = ? WHERE producer_id = ? AND lo = ?`, seq, producerID, right.Lo)
		default:
			res = tx.Exec(`INSERT INTO received_seq_ranges (producer_id, lo, hi) VALUES (?, ?, ?)`, producerID, seq, seq)
		}
		if res.Error == nil && res.RowsAffected != 1 {
			return fmt.Errorf("range of %d changed under the producer's lock", seq)
		}
		return res.Error
	})
	if err != nil {
		return fmt.Errorf("record seq %d of producer %q: %w", seq, producerID, err)
	}
	return nil
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
