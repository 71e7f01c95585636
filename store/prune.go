package store

import (
	"context"
	"fmt"
	"time"
)

// PruneOptions say what Prune removes and how.
type PruneOptions struct {
	// OlderThan is the retention window: the details of orders that have
	// been COMPLETED or CANCELLED (unchanged since) for longer are removed.
	OlderThan time.Duration
	// Batch is how many rows one statement (one short transaction) deletes
	// at most, and how many orders or dead letters one round looks at
	// (default 1000).
	Batch int
	// Pause is how long Prune sleeps between statements, to leave the
	// database to the hot path (default none).
	Pause time.Duration
	// DryRun counts what would be removed and removes nothing.
	DryRun bool
}

// PruneStats says what Prune removed (or, in a dry run, would remove).
type PruneStats struct {
	// Cutoff is the database time before which a terminal order's last
	// change must lie.
	Cutoff time.Time `json:"cutoff"`
	// Orders counts the orders whose order_events rows were removed.
	Orders int64 `json:"orders"`
	// Events counts the order_events rows removed; DeadLetters the dead
	// letters.
	Events      int64 `json:"events"`
	DeadLetters int64 `json:"dead_letters"`
	// Statements counts the statements run (each its own transaction).
	Statements int64 `json:"statements"`
	DryRun     bool  `json:"dry_run"`
}

// terminalBefore is the condition on orders o of an order whose details
// may be pruned: terminal, and unchanged since before the cutoff (the one
// argument). updated_at moves only when an event is applied, and a
// terminal order only accepts data updates at its status, which move it.
const terminalBefore = `o.status IN ('COMPLETED', 'CANCELLED') AND o.updated_at < ?`

// Prune removes the order_events rows and the dead letters of orders that
// have been terminal for longer than o.OlderThan, and stamps each such
// order's events_pruned_at. It never removes an orders row or a
// points_ledger row: the orders row keeps the version and content hash of
// the order's last event, so a late copy of any pruned business key is
// still judged stale (an older version), a duplicate (the last version,
// same content) or a conflict (the last version, other content), and
// changes nothing; the ledger keeps at most one row per kind.
//
// A dead letter is removed when its keys name such an order and it was
// last seen before the cutoff too. Orders are walked in primary key order
// o.Batch at a time, and each statement deletes at most o.Batch rows in its
// own short transaction, re-checking the order's condition, so an order
// that changes meanwhile keeps its rows and the hot path (ApplyEvent on
// other orders) is never blocked for long. progress, when not nil, is
// called after every statement.
func (s *Store) Prune(ctx context.Context, o PruneOptions, progress func(PruneStats)) (PruneStats, error) {
	if o.OlderThan <= 0 {
		return PruneStats{}, invalid(fmt.Errorf("retention window %s must be positive", o.OlderThan))
	}
	batch := o.Batch
	if batch <= 0 {
		batch = 1000
	}
	db := s.db.WithContext(ctx)
	st := PruneStats{DryRun: o.DryRun}
	if err := db.Raw(`SELECT now() - ?::interval`, fmt.Sprintf("%d microseconds", o.OlderThan.Microseconds())).
		Row().Scan(&st.Cutoff); err != nil {
		return st, fmt.Errorf("prune: read the database clock: %w", err)
	}
	step := func() error {
		st.Statements++
		if progress != nil {
			progress(st)
		}
		if o.Pause > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(o.Pause):
			}
		}
		return ctx.Err()
	}

	// order_events, order by order.
	after := ""
	for {
		var ids []string
		if err := db.Raw(`SELECT o.order_id FROM orders o WHERE o.order_id > ? AND `+terminalBefore+`
			ORDER BY o.order_id LIMIT ?`, after, st.Cutoff, batch).Scan(&ids).Error; err != nil {
			return st, fmt.Errorf("prune: list orders: %w", err)
		}
		if len(ids) == 0 {
			break
		}
		after = ids[len(ids)-1]
		if err := step(); err != nil {
			return st, err
		}
		if o.DryRun {
			var n struct{ Orders, Events int64 }
			if err := db.Raw(`SELECT count(DISTINCT e.order_id) AS orders, count(*) AS events
				FROM order_events e JOIN orders o ON o.order_id = e.order_id
				WHERE e.order_id IN ? AND `+terminalBefore, ids, st.Cutoff).Scan(&n).Error; err != nil {
				return st, fmt.Errorf("prune: count order_events: %w", err)
			}
			st.Orders += n.Orders
			st.Events += n.Events
			if err := step(); err != nil {
				return st, err
			}
			continue
		}
		pruned := map[string]bool{}
		for {
			var gone []string
			if err := db.Raw(`WITH victims AS (
					SELECT e.order_id, e.version FROM order_events e JOIN orders o ON o.order_id = e.order_id
					WHERE e.order_id IN ? AND `+terminalBefore+`
					ORDER BY e.order_id, e.version LIMIT ?)
				DELETE FROM order_events e USING victims v, orders o
				WHERE e.order_id = v.order_id AND e.version = v.version AND o.order_id = e.order_id AND `+terminalBefore+`
				RETURNING e.order_id`, ids, st.Cutoff, batch, st.Cutoff).Scan(&gone).Error; err != nil {
				return st, fmt.Errorf("prune: delete order_events: %w", err)
			}
			st.Events += int64(len(gone))
			for _, id := range gone {
				pruned[id] = true
			}
			if err := step(); err != nil {
				return st, err
			}
			if len(gone) < batch {
				break
			}
		}
		if len(pruned) > 0 {
			marked := make([]string, 0, len(pruned))
			for id := range pruned {
				marked = append(marked, id)
			}
			if err := db.Exec(`UPDATE orders SET events_pruned_at = now() WHERE order_id IN ?`, marked).Error; err != nil {
				return st, fmt.Errorf("prune: stamp orders: %w", err)
			}
			st.Orders += int64(len(marked))
			if err := step(); err != nil {
				return st, err
			}
		}
	}

	// dead_letters, by id range.
	var afterID int64
	for {
		var hi *int64
		if err := db.Raw(`SELECT max(id) FROM (SELECT id FROM dead_letters WHERE id > ? ORDER BY id LIMIT ?) r`,
			afterID, batch).Row().Scan(&hi); err != nil {
			return st, fmt.Errorf("prune: list dead letters: %w", err)
		}
		if hi == nil {
			break
		}
		cond := `d.id > ? AND d.id <= ? AND d.last_seen_at < ? AND EXISTS (
			SELECT 1 FROM unnest(string_to_array(d.keys, ' ')) AS k(order_id) JOIN orders o ON o.order_id = k.order_id
			WHERE ` + terminalBefore + `)`
		args := []any{afterID, *hi, st.Cutoff, st.Cutoff}
		var n int64
		if o.DryRun {
			if err := db.Raw(`SELECT count(*) FROM dead_letters d WHERE `+cond, args...).Row().Scan(&n); err != nil {
				return st, fmt.Errorf("prune: count dead letters: %w", err)
			}
		} else {
			w := db.Exec(`DELETE FROM dead_letters d WHERE `+cond, args...)
			if w.Error != nil {
				return st, fmt.Errorf("prune: delete dead letters: %w", w.Error)
			}
			n = w.RowsAffected
		}
		st.DeadLetters += n
		afterID = *hi
		if err := step(); err != nil {
			return st, err
		}
	}
	return st, nil
}
