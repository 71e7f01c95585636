package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/orderflow/orderflow/wire"
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
	// IncludeUnreplayed removes the dead letters of such orders that were
	// never replayed too; by default only replayed ones go (the others may
	// still need an operator's eye).
	IncludeUnreplayed bool
	// BodyOrderID is the order a parked body names, or "" when it names
	// none (message.BodyOrderID, the decoder's reading); required, as the
	// store does not decode message bodies. Prune gives it only bodies of
	// at most wire.MaxBodySize bytes.
	BodyOrderID func(body []byte) string
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
	// KeptUnreplayed counts the dead letters of such orders kept because
	// they were never replayed (0 with IncludeUnreplayed).
	KeptUnreplayed int64 `json:"kept_unreplayed"`
	// Producers counts the producers retired: their received sequence
	// numbers removed, as none arrived since before the cutoff;
	// SequenceRanges the rows of numbers removed with them.
	Producers      int64 `json:"producers"`
	SequenceRanges int64 `json:"sequence_ranges"`
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
// A dead letter belongs to the order its body names (o.BodyOrderID), never
// to the one its keys name, which the producer sets apart from the body;
// one whose body names no order stays. It is removed when it was last seen
// before the cutoff too and was replayed (or o.IncludeUnreplayed). Orders
// are walked in primary key order o.Batch at a time, and each statement
// deletes at most o.Batch rows in its own short transaction, re-checking
// the order's condition, so an order that changes meanwhile keeps its rows
// and the hot path (ApplyEvent on other orders) is never blocked for long;
// the statement that removes an order's rows stamps it. progress, when not
// nil, is called after every statement.
//
// Producers whose last sequence number was received before the cutoff are
// retired: their received_seq_producers row goes, and their ranges with
// it, o.Batch producers a statement, each re-checked in the statement (a
// number recorded meanwhile keeps the producer). Their open holes go too;
// a producer that sends again starts a new record.
//
// Cancelled (ctx), Prune returns ctx's error and the stats of the
// statements that completed: what was removed so far.
func (s *Store) Prune(ctx context.Context, o PruneOptions, progress func(PruneStats)) (PruneStats, error) {
	if o.OlderThan <= 0 {
		return PruneStats{}, invalid(fmt.Errorf("retention window %s must be positive", o.OlderThan))
	}
	if o.BodyOrderID == nil {
		return PruneStats{}, invalid(errors.New("prune: no BodyOrderID to read the order a dead letter's body names"))
	}
	p := &pruner{o: o, progress: progress, db: s.db.WithContext(ctx), ctx: ctx}
	if p.o.Batch <= 0 {
		p.o.Batch = 1000
	}
	p.st.DryRun = o.DryRun
	if err := p.db.Raw(`SELECT now() - ?::interval`, fmt.Sprintf("%d microseconds", o.OlderThan.Microseconds())).
		Row().Scan(&p.st.Cutoff); err != nil {
		return p.st, fmt.Errorf("prune: read the database clock: %w", err)
	}
	if err := p.orderEvents(); err != nil {
		return p.st, err
	}
	if err := p.deadLetters(); err != nil {
		return p.st, err
	}
	return p.st, p.producers()
}

// pruner is one run of Prune.
type pruner struct {
	o        PruneOptions
	progress func(PruneStats)
	db       *gorm.DB
	ctx      context.Context
	st       PruneStats
}

// step counts a completed statement, reports progress, pauses, and returns
// the context's error once it is cancelled.
func (p *pruner) step() error {
	p.st.Statements++
	if p.progress != nil {
		p.progress(p.st)
	}
	if p.o.Pause > 0 {
		select {
		case <-p.ctx.Done():
		case <-time.After(p.o.Pause):
		}
	}
	return p.ctx.Err()
}

// orderEvents removes (or counts) the order_events rows of the orders
// terminalBefore the cutoff, o.Batch orders at a time.
func (p *pruner) orderEvents() error {
	after := ""
	for {
		var ids []string
		if err := p.db.Raw(`SELECT o.order_id FROM orders o WHERE o.order_id > ? AND `+terminalBefore+`
			ORDER BY o.order_id LIMIT ?`, after, p.st.Cutoff, p.o.Batch).Scan(&ids).Error; err != nil {
			return fmt.Errorf("prune: list orders: %w", err)
		}
		if len(ids) == 0 {
			return nil
		}
		after = ids[len(ids)-1]
		if err := p.step(); err != nil {
			return err
		}
		var err error
		if p.o.DryRun {
			err = p.countEvents(ids)
		} else {
			err = p.deleteEvents(ids)
		}
		if err != nil {
			return err
		}
	}
}

// countEvents counts the order_events rows of orders ids that a prune
// would remove.
func (p *pruner) countEvents(ids []string) error {
	var n struct{ Orders, Events int64 }
	if err := p.db.Raw(`SELECT count(DISTINCT e.order_id) AS orders, count(*) AS events
		FROM order_events e JOIN orders o ON o.order_id = e.order_id
		WHERE e.order_id IN ? AND `+terminalBefore, ids, p.st.Cutoff).Scan(&n).Error; err != nil {
		return fmt.Errorf("prune: count order_events: %w", err)
	}
	p.st.Orders += n.Orders
	p.st.Events += n.Events
	return p.step()
}

// deleteEvents removes the order_events rows of orders ids, at most
// o.Batch a statement; each statement stamps the orders it removed rows
// of, so that an interrupted prune leaves no order without its rows and
// unstamped.
func (p *pruner) deleteEvents(ids []string) error {
	pruned := map[string]bool{}
	for {
		var gone []string
		if err := p.db.Raw(`WITH victims AS (
				SELECT e.order_id, e.version FROM order_events e JOIN orders o ON o.order_id = e.order_id
				WHERE e.order_id IN ? AND `+terminalBefore+`
				ORDER BY e.order_id, e.version LIMIT ?),
			gone AS (
				DELETE FROM order_events e USING victims v, orders o
				WHERE e.order_id = v.order_id AND e.version = v.version AND o.order_id = e.order_id AND `+terminalBefore+`
				RETURNING e.order_id),
			stamped AS (
				UPDATE orders SET events_pruned_at = now() WHERE order_id IN (SELECT order_id FROM gone))
			SELECT order_id FROM gone`, ids, p.st.Cutoff, p.o.Batch, p.st.Cutoff).Scan(&gone).Error; err != nil {
			return fmt.Errorf("prune: delete order_events: %w", err)
		}
		p.st.Events += int64(len(gone))
		for _, id := range gone {
			if !pruned[id] {
				pruned[id] = true
				p.st.Orders++
			}
		}
		if err := p.step(); err != nil {
			return err
		}
		if len(gone) < p.o.Batch {
			return nil
		}
	}
}

// deadLetters removes (or counts) the dead letters of the orders
// terminalBefore the cutoff, walking dead_letters by id, o.Batch at a time.
func (p *pruner) deadLetters() error {
	var afterID int64
	for {
		var page []struct {
			ID       int64
			Body     []byte
			Replayed bool
		}
		// A body past the contract's bound names no order: it is not read.
		if err := p.db.Raw(`SELECT id, CASE WHEN length(body) <= ? THEN body END AS body, replayed_at IS NOT NULL AS replayed
			FROM dead_letters WHERE id > ? AND last_seen_at < ? ORDER BY id LIMIT ?`,
			wire.MaxBodySize, afterID, p.st.Cutoff, p.o.Batch).Scan(&page).Error; err != nil {
			return fmt.Errorf("prune: list dead letters: %w", err)
		}
		if len(page) == 0 {
			return nil
		}
		afterID = page[len(page)-1].ID
		var remove, keep candidates
		for _, d := range page {
			id := ""
			if d.Body != nil {
				id = p.o.BodyOrderID(d.Body)
			}
			switch {
			case id == "":
			case d.Replayed || p.o.IncludeUnreplayed:
				remove.add(d.ID, id)
			default:
				keep.add(d.ID, id)
			}
		}
		if err := p.step(); err != nil {
			return err
		}
		if err := p.removeDeadLetters(remove); err != nil {
			return err
		}
		if err := p.countKept(keep); err != nil {
			return err
		}
	}
}

// candidates are dead letters and the orders their bodies name, as the
// comma-separated lists the statements unnest (an order ID holds no comma).
type candidates struct {
	ids, orders []string
}

func (c *candidates) add(id int64, orderID string) {
	c.ids = append(c.ids, strconv.FormatInt(id, 10))
	c.orders = append(c.orders, orderID)
}

// of is the SQL that joins the candidates with their dead letters and
// their orders, kept to those last seen and terminalBefore the cutoff, and
// its arguments.
func (c candidates) of(cutoff time.Time) (string, []any) {
	return `unnest(string_to_array(?::text, ',')::bigint[], string_to_array(?::text, ',')) AS c(id, order_id)
		JOIN dead_letters d ON d.id = c.id JOIN orders o ON o.order_id = c.order_id
		WHERE d.last_seen_at < ? AND ` + terminalBefore,
		[]any{strings.Join(c.ids, ","), strings.Join(c.orders, ","), cutoff, cutoff}
}

// removeDeadLetters removes (or counts) the candidates whose order is
// terminalBefore the cutoff, re-checked in the statement.
func (p *pruner) removeDeadLetters(c candidates) error {
	if len(c.ids) == 0 {
		return nil
	}
	from, args := c.of(p.st.Cutoff)
	var n int64
	if p.o.DryRun {
		if err := p.db.Raw(`SELECT count(*) FROM `+from, args...).Row().Scan(&n); err != nil {
			return fmt.Errorf("prune: count dead letters: %w", err)
		}
	} else {
		if err := p.db.Raw(`WITH gone AS (
				DELETE FROM dead_letters x WHERE x.id IN (SELECT d.id FROM `+from+`) AND x.last_seen_at < ? RETURNING 1)
			SELECT count(*) FROM gone`, append(args, p.st.Cutoff)...).Row().Scan(&n); err != nil {
			return fmt.Errorf("prune: delete dead letters: %w", err)
		}
	}
	p.st.DeadLetters += n
	return p.step()
}

// countKept counts the candidates, never replayed, that a prune with
// IncludeUnreplayed would remove.
func (p *pruner) countKept(c candidates) error {
	if len(c.ids) == 0 {
		return nil
	}
	from, args := c.of(p.st.Cutoff)
	var n int64
	if err := p.db.Raw(`SELECT count(*) FROM `+from, args...).Row().Scan(&n); err != nil {
		return fmt.Errorf("prune: count unreplayed dead letters: %w", err)
	}
	p.st.KeptUnreplayed += n
	return p.step()
}

// producers removes (or counts) the producers idle since before the
// cutoff, with their ranges, o.Batch producers a statement.
func (p *pruner) producers() error {
	if p.o.DryRun {
		var n struct{ Producers, Ranges int64 }
		if err := p.db.Raw(`SELECT count(*) AS producers,
				coalesce(sum((SELECT count(*) FROM received_seq_ranges r WHERE r.producer_id = x.producer_id)), 0) AS ranges
			FROM received_seq_producers x WHERE x.last_seen_at < ?`, p.st.Cutoff).Scan(&n).Error; err != nil {
			return fmt.Errorf("prune: count idle producers: %w", err)
		}
		p.st.Producers, p.st.SequenceRanges = p.st.Producers+n.Producers, p.st.SequenceRanges+n.Ranges
		return p.step()
	}
	for {
		var n struct{ Selected, Producers, Ranges int64 }
		// The ranges go by ON DELETE CASCADE; the count reads them from the
		// statement's snapshot, taken before.
		if err := p.db.Raw(`WITH victims AS (
				SELECT producer_id FROM received_seq_producers WHERE last_seen_at < ? ORDER BY producer_id LIMIT ?),
			gone AS (
				DELETE FROM received_seq_producers x USING victims v
				WHERE x.producer_id = v.producer_id AND x.last_seen_at < ? RETURNING x.producer_id)
			SELECT (SELECT count(*) FROM victims) AS selected, count(*) AS producers,
				coalesce(sum((SELECT count(*) FROM received_seq_ranges r WHERE r.producer_id = g.producer_id)), 0) AS ranges
			FROM gone g`, p.st.Cutoff, p.o.Batch, p.st.Cutoff).Scan(&n).Error; err != nil {
			return fmt.Errorf("prune: delete idle producers: %w", err)
		}
		p.st.Producers, p.st.SequenceRanges = p.st.Producers+n.Producers, p.st.SequenceRanges+n.Ranges
		if err := p.step(); err != nil {
			return err
		}
		if n.Selected < int64(p.o.Batch) {
			return nil
		}
	}
}
