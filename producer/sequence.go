package producer

import (
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm"
)

// allocate hands out producerID's next sequence number inside tx and
// locks the producer's row of producer_sequences until tx ends: the
// number is used only if tx commits, and no other send of the producer
// gets a number meanwhile.
func allocate(tx *gorm.DB, producerID string) (int64, error) {
	var seq int64
	err := tx.Raw(`
		INSERT INTO producer_sequences AS s (producer_id, next_seq) VALUES (?, 2)
		ON CONFLICT (producer_id) DO UPDATE SET next_seq = s.next_seq + 1, updated_at = now()
		RETURNING next_seq - 1`, producerID).Scan(&seq).Error
	if err != nil {
		return 0, fmt.Errorf("allocate a sequence number of %q: %w", producerID, err)
	}
	if seq < 1 {
		return 0, fmt.Errorf("allocate a sequence number of %q: got %d", producerID, seq)
	}
	return seq, nil
}

// NextSeq returns the sequence number the next message of producerID will
// get: 1 for a producer that never sent, else one more than its last
// message's. It reads db, the producer's database, without waiting for a
// send in progress.
func NextSeq(ctx context.Context, db *gorm.DB, producerID string) (int64, error) {
	var next int64
	res := db.WithContext(ctx).Raw(`SELECT next_seq FROM producer_sequences WHERE producer_id = ?`, producerID).Scan(&next)
	if res.Error != nil {
		return 0, fmt.Errorf("producer: read sequence of %s: %w", producerID, res.Error)
	}
	if res.RowsAffected == 0 {
		return 1, nil
	}
	return next, nil
}

// errDone ends a transaction that only looked: it is rolled back.
var errDone = errors.New("done")
