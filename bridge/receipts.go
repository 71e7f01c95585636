package bridge

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/orderflow/orderflow/wire"
)

// ReceiptFunc records that the database holds the effect of each message
// of qs (store.Store.RecordReceipts), returning once that is committed.
type ReceiptFunc func(ctx context.Context, qs []wire.QueueOffset) error

// WithReceipts makes h record, with r, the receipt of every message it
// settles itself, a duplicate it acks without a signal or a message it
// parks, before it acks the batch: the database then proves that the
// message need not be delivered again after a restore (docs/design.md,
// recovery points). A message signalled to its workflow gets its receipt
// from the worker, with its event's effect. While recording fails, the
// batch is retried and handed back like a failed delivery. Call it before
// h handles messages. It returns h.
func (h *Handler) WithReceipts(r ReceiptFunc) *Handler {
	h.receipts = r
	return h
}

// queueOffset is m's place in the broker, nil when the client did not
// say which queue it came from.
func queueOffset(m *primitive.MessageExt) *wire.QueueOffset {
	if m.Queue == nil {
		return nil
	}
	q := wire.QueueOffset{Topic: m.Queue.Topic, Broker: m.Queue.BrokerName, QueueID: m.Queue.QueueId, Offset: m.QueueOffset}
	if !q.Valid() {
		return nil
	}
	return &q
}

// settleReceipts records the receipts of the messages of ps the handler
// settled itself (acked as duplicates or parked); when that fails, they
// fail with the error, to be handed back.
func (h *Handler) settleReceipts(ctx context.Context, ps []*pending) {
	if h.receipts == nil {
		return
	}
	var (
		qs  []wire.QueueOffset
		own []*pending
	)
	for _, p := range ps {
		if p.err != nil || p.result == "" || p.result == ResultSignalled {
			continue
		}
		if q := queueOffset(p.m); q != nil {
			qs = append(qs, *q)
			own = append(own, p)
		}
	}
	if len(qs) == 0 {
		return
	}
	err := h.attempt(ctx, h.log, targetPostgres, func(ctx context.Context) error { return h.receipts(ctx, qs) })
	if err == nil {
		return
	}
	h.log.Error("cannot record the receipts of settled messages; the broker will deliver them again", "messages", len(qs), "err", err)
	for _, p := range own {
		p.err = fmt.Errorf("message %s: record its receipt: %w", p.m.MsgId, err)
	}
}

// SentBack returns the hook the consumer calls with each message the broker
// took back into the group's retry topic (mq.ConsumerConfig.SentBack): it
// records the message's receipt, since its copy in the retry topic now
// carries its event and gets a receipt of its own, so that the original's
// queue's recovery point is not held at it. It tries for up to timeout;
// a receipt it cannot record holds the point back, which costs a recovery
// redelivery, never a loss.
func (h *Handler) SentBack(timeout time.Duration) func(m *primitive.MessageExt) {
	return func(m *primitive.MessageExt) {
		q := queueOffset(m)
		if h.receipts == nil || q == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		err := h.attempt(ctx, h.log, targetPostgres, func(ctx context.Context) error { return h.receipts(ctx, []wire.QueueOffset{*q}) })
		if err != nil {
			h.log.Warn("the receipt of a message handed back is not recorded: its queue's recovery point stays at it",
				"message_id", m.MsgId, "queue", fmt.Sprintf("%s/%s/%d", q.Topic, q.Broker, q.QueueID), "offset", q.Offset, "err", err)
		}
	}
}
