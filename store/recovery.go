package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/orderflow/orderflow/wire"
)

// RecoveryPoint is where one broker queue must restart after the database
// is restored from a backup (docs/design.md, recovery points): every
// message of the queue below Next has its effect in the database.
type RecoveryPoint struct {
	Topic   string `json:"topic"`
	Broker  string `json:"broker"`
	QueueID int    `json:"queue_id"`
	// Recorded is the offset recovery_points holds; Next is Recorded moved
	// over the contiguous receipts above it (Next >= Recorded).
	Recorded int64 `json:"recorded"`
	Next     int64 `json:"next"`
	// Receipts counts the receipts above Next: messages whose effect is
	// held although an earlier one's may not be.
	Receipts int64 `json:"receipts_above"`
	// Since is when the queue's point was first recorded; MovedAt when it
	// last moved.
	Since   time.Time `json:"since"`
	MovedAt time.Time `json:"moved_at"`
}

// Key is the point's queue as "topic/broker/queue".
func (p RecoveryPoint) Key() string { return QueueKey(p.Topic, p.Broker, p.QueueID) }

// QueueKey names a queue as "topic/broker/queue".
func QueueKey(topic, broker string, queueID int) string {
	return fmt.Sprintf("%s/%s/%d", topic, broker, queueID)
}

// maxReceiptBatch bounds the receipts one statement inserts.
const maxReceiptBatch = 1000

// RecordReceipts records that the database holds the effect of each
// message in qs (idempotent: a receipt recorded before is kept). Places
// that name no queue are refused with ErrInvalid before anything is
// written.
func (s *Store) RecordReceipts(ctx context.Context, qs []wire.QueueOffset) error {
	for _, q := range qs {
		if !q.Valid() {
			return fmt.Errorf("record receipt %+v: %w", q, ErrInvalid)
		}
	}
	return insertReceipts(s.db.WithContext(ctx), qs)
}

// insertReceipts inserts the receipts of qs, valid places, with db (a
// transaction's, to commit them with what it writes).
func insertReceipts(db *gorm.DB, qs []wire.QueueOffset) error {
	for len(qs) > 0 {
		n := min(len(qs), maxReceiptBatch)
		var b strings.Builder
		b.WriteString(`INSERT INTO message_receipts (topic, broker, queue_id, queue_offset) VALUES `)
		args := make([]any, 0, 4*n)
		for i, q := range qs[:n] {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(?, ?, ?, ?)")
			args = append(args, q.Topic, q.Broker, q.QueueID, q.Offset)
		}
		b.WriteString(` ON CONFLICT DO NOTHING`)
		if err := db.Exec(b.String(), args...).Error; err != nil {
			return fmt.Errorf("record %d receipts: %w", n, err)
		}
		qs = qs[n:]
	}
	return nil
}

// receipt records the receipt of src's message, when src names its queue.
func (s *Store) receipt(ctx context.Context, src wire.Envelope) error {
	if src.Queue == nil || !src.Queue.Valid() {
		return nil
	}
	return s.RecordReceipts(ctx, []wire.QueueOffset{*src.Queue})
}

// SeedRecoveryPoints records the point of each queue of qs that has none
// yet, at the offset given (the broker's committed offset of the consumer
// group before it consumes: the bridge calls it before it starts), and
// returns how many it recorded. A queue's point is recorded once; later
// calls leave it alone.
func (s *Store) SeedRecoveryPoints(ctx context.Context, qs []wire.QueueOffset) (int64, error) {
	var seeded int64
	for _, q := range qs {
		if !q.Valid() {
			return seeded, fmt.Errorf("seed recovery point %+v: %w", q, ErrInvalid)
		}
		res := s.db.WithContext(ctx).Exec(`INSERT INTO recovery_points (topic, broker, queue_id, next_offset)
			VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`, q.Topic, q.Broker, q.QueueID, q.Offset)
		if res.Error != nil {
			return seeded, fmt.Errorf("seed recovery point of queue %s: %w", QueueKey(q.Topic, q.Broker, q.QueueID), res.Error)
		}
		seeded += res.RowsAffected
	}
	return seeded, nil
}

// nextSQL reads each queue's point and the first offset at or above it
// without a receipt (next): the receipts from the point up, numbered in
// order, form an unbroken run from the point exactly when offset -
// row_number is the point - 1 (the classic gaps-and-islands query).
const nextSQL = `SELECT p.topic, p.broker, p.queue_id, p.next_offset, p.since, p.moved_at,
	COALESCE(run.last + 1, p.next_offset) AS next
FROM recovery_points AS p
LEFT JOIN LATERAL (
	SELECT max(x.queue_offset) AS last FROM (
		SELECT r.queue_offset, r.queue_offset - row_number() OVER (ORDER BY r.queue_offset) AS island
		FROM message_receipts r
		WHERE r.topic = p.topic AND r.broker = p.broker AND r.queue_id = p.queue_id AND r.queue_offset >= p.next_offset
	) AS x WHERE x.island = p.next_offset - 1
) AS run ON true`

// pointsSQL is nextSQL with the count of the receipts above next, in the
// queues' order.
const pointsSQL = `SELECT m.*, (SELECT count(*) FROM message_receipts r WHERE r.topic = m.topic AND r.broker = m.broker
		AND r.queue_id = m.queue_id AND r.queue_offset >= m.next) AS above
FROM (` + nextSQL + `) AS m
ORDER BY m.topic, m.broker, m.queue_id`

// HasRecoveryPoints reports whether any queue of topic has a recovery
// point.
func (s *Store) HasRecoveryPoints(ctx context.Context, topic string) (bool, error) {
	var found bool
	err := s.db.WithContext(ctx).Raw(`SELECT EXISTS (SELECT 1 FROM recovery_points WHERE topic = ?)`, topic).Row().Scan(&found)
	if err != nil {
		return false, fmt.Errorf("read recovery points: %w", err)
	}
	return found, nil
}

// RecoveryPoints reads every queue's recovery point, moved over the
// receipts recorded above it; it changes nothing.
func (s *Store) RecoveryPoints(ctx context.Context) ([]RecoveryPoint, error) {
	rows, err := s.db.WithContext(ctx).Raw(pointsSQL).Rows()
	if err != nil {
		return nil, fmt.Errorf("read recovery points: %w", err)
	}
	defer rows.Close()
	var out []RecoveryPoint
	for rows.Next() {
		var p RecoveryPoint
		if err := rows.Scan(&p.Topic, &p.Broker, &p.QueueID, &p.Recorded, &p.Since, &p.MovedAt, &p.Next, &p.Receipts); err != nil {
			return nil, fmt.Errorf("read recovery points: %w", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read recovery points: %w", err)
	}
	return out, nil
}

// MoveRecoveryPoints moves each queue's point over the contiguous receipts
// above it and deletes the receipts below the point, which it no longer
// needs, in one transaction; it returns how many points moved. Concurrent
// calls are safe: a point only moves forward, and only over receipts.
func (s *Store) MoveRecoveryPoints(ctx context.Context) (int64, error) {
	var moved int64
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		up := tx.Exec(`UPDATE recovery_points AS p SET next_offset = m.next, moved_at = now()
			FROM (` + nextSQL + `) AS m
			WHERE p.topic = m.topic AND p.broker = m.broker AND p.queue_id = m.queue_id AND m.next > p.next_offset`)
		if up.Error != nil {
			return fmt.Errorf("move recovery points: %w", up.Error)
		}
		moved = up.RowsAffected
		if err := tx.Exec(`DELETE FROM message_receipts AS r USING recovery_points AS p
			WHERE r.topic = p.topic AND r.broker = p.broker AND r.queue_id = p.queue_id AND r.queue_offset < p.next_offset`).Error; err != nil {
			return fmt.Errorf("delete receipts below the recovery points: %w", err)
		}
		return nil
	})
	return moved, err
}
