package bridge

import (
	"context"
	"log/slog"
	"sync"
)

// RecordFunc records that the message numbered seq in producerID's sequence
// was received, for loss detection, and returns once that is committed.
// It returns nil for numbers it declines to keep (it logs them).
type RecordFunc func(ctx context.Context, producerID string, seq int64) error

// WithRecorder makes h record the producer_id and seq of every valid event
// it acknowledges as signalled or as a duplicate, with r, after the event's
// effect is durable. A parked message records nothing, whatever the reason:
// an invalid one proves nothing (its producer_id and seq may be forged),
// and an undeliverable one had no effect, so its number stays a hole until
// a copy is delivered. A message is acknowledged only once its number is
// recorded; while that fails transiently, it is retried and handed back
// like a failed delivery. A number PostgreSQL refuses for good (errclass)
// is logged and left out: the message is acknowledged without it. Call it
// before h handles messages. It returns h.
func (h *Handler) WithRecorder(r RecordFunc) *Handler {
	h.record = r
	return h
}

// recordSeqs records the sequence numbers of the batch's messages to be
// acked as signalled or duplicate, at once, so that they share a commit
// (a RecordFunc such as store.SeqRecorder's commits concurrent calls
// together); a message whose number is not recorded fails (p.err), and the
// batch goes back to the broker.
func (h *Handler) recordSeqs(ps []*pending) {
	if h.record == nil {
		return
	}
	var todo []*pending
	for _, p := range ps {
		if p.seq && p.err == nil {
			todo = append(todo, p)
		}
	}
	record := func(p *pending) {
		e := p.item.Event
		p.err = h.recordSeq(p.ctx, p.log, e.ProducerID, e.Seq)
	}
	if len(todo) == 1 {
		record(todo[0])
		return
	}
	var wg sync.WaitGroup
	for _, p := range todo {
		wg.Go(func() { record(p) })
	}
	wg.Wait()
}

// recordSeq records producerID's seq when the handler records numbers and
// the message carries one.
func (h *Handler) recordSeq(ctx context.Context, log *slog.Logger, producerID string, seq int64) error {
	if h.record == nil || producerID == "" || seq < 1 {
		return nil
	}
	err := h.attempt(ctx, log, targetPostgres, func(ctx context.Context) error { return h.record(ctx, producerID, seq) })
	if _, ok := refused(err); ok {
		log.Error("the message's sequence number cannot be recorded; acked without it",
			"producer_id", producerID, "seq", seq, "err", err)
		return nil
	}
	if err != nil {
		log.Error("cannot record the message's sequence number; the broker will deliver it again",
			"producer_id", producerID, "seq", seq, "err", err)
	}
	return err
}
