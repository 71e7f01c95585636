package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/orderflow/orderflow/fsm"
)

// Judgement is what ApplyEvent would decide on an event now, without
// writing anything.
type Judgement struct {
	Decision fsm.Decision `json:"decision"`
	// Recorded is true when the event's business key already has its
	// order_events row (with this content for a duplicate, other content
	// for a conflict).
	Recorded bool `json:"recorded"`
}

// Judge returns the decision ApplyEvent would take on e against the rows
// as they are now, and writes nothing: a business key recorded with the
// same content is a duplicate, one recorded with other content a conflict,
// and a key not yet recorded is judged by fsm.Decide against the stored
// order. The answer may be out of date as soon as it is returned (the
// order's workflow may apply an event in between); the workflow's
// ApplyEvent stays the authority. An invalid event is refused with an
// error wrapping ErrInvalid.
func (s *Store) Judge(ctx context.Context, e fsm.Event) (Judgement, error) {
	if err := e.Validate(); err != nil {
		return Judgement{}, invalid(err)
	}
	st, err := readStored(s.db.WithContext(ctx), e.Key())
	if err != nil {
		return Judgement{}, fmt.Errorf("judge event %s: %w", e.Key(), err)
	}
	hash := e.ContentHash()
	switch {
	case st.evHash != nil && *st.evHash == hash:
		return Judgement{Recorded: true, Decision: fsm.Decision{Outcome: fsm.Duplicate, Next: st.order}}, nil
	case st.evHash != nil:
		return Judgement{Recorded: true, Decision: fsm.Decision{Outcome: fsm.Conflict, Next: st.order,
			Reason: fmt.Sprintf("conflict: %s was recorded with content %s; this delivery has content %s",
				e.Key(), short(*st.evHash), short(hash))}}, nil
	}
	var stored *fsm.Order
	if st.found {
		stored = &st.order
	}
	return Judgement{Decision: fsm.Decide(stored, e)}, nil
}

// RecordedKey is one business key's order_events row, as a replay waits
// for it.
type RecordedKey struct {
	Found       bool        `json:"found"`
	ContentHash string      `json:"content_hash"`
	Outcome     fsm.Outcome `json:"outcome"`
}

// RecordedKeyOf returns the order_events row of the business key k (Found
// false when it is not recorded).
func (s *Store) RecordedKeyOf(ctx context.Context, k fsm.Key) (RecordedKey, error) {
	var r RecordedKey
	var outcome string
	err := s.db.WithContext(ctx).Raw(`SELECT content_hash, outcome FROM order_events WHERE order_id = ? AND version = ?`,
		k.OrderID, k.Version).Row().Scan(&r.ContentHash, &outcome)
	if errors.Is(err, sql.ErrNoRows) {
		return RecordedKey{}, nil
	}
	if err != nil {
		return RecordedKey{}, fmt.Errorf("read business key %s: %w", k, err)
	}
	r.Found, r.Outcome = true, fsm.Outcome(outcome)
	return r, nil
}

// ReplayDelivered is the replay outcome of a dead letter whose event was
// delivered but whose decision was not recorded yet when the replay
// stopped waiting.
const ReplayDelivered = "delivered"

// MarkReplayed records that dead letter id was re-delivered, with the
// outcome of the replay (an fsm.Outcome, or ReplayDelivered). The first
// replay time is kept; the outcome is overwritten, so a replay that
// learns the decision later can fill it in. It reports false when there is
// no such dead letter.
func (s *Store) MarkReplayed(ctx context.Context, id int64, outcome string) (bool, error) {
	w := s.db.WithContext(ctx).Exec(`UPDATE dead_letters SET replayed_at = coalesce(replayed_at, now()), replay_outcome = ?
		WHERE id = ?`, outcome, id)
	if w.Error != nil {
		return false, fmt.Errorf("mark dead letter %d replayed: %w", id, w.Error)
	}
	return w.RowsAffected == 1, nil
}
