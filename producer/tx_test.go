package producer

import (
	"context"
	"errors"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/internal/uniq"
)

// outboxID returns the outbox row of producerID's message seq ("" if none).
func outboxID(t *testing.T, db *gorm.DB, producerID string, seq int64) (id, messageID string) {
	t.Helper()
	var row struct{ ID, MessageID string }
	if err := db.Raw(`SELECT id, message_id FROM producer_outbox WHERE producer_id = ? AND seq = ?`, producerID, seq).Scan(&row).Error; err != nil {
		t.Fatal(err)
	}
	return row.ID, row.MessageID
}

// TestTxCommitAndRollback: a committed local transaction delivers its
// message with the outbox row written; a failed or panicking one delivers
// nothing, writes nothing and gives its sequence number back.
func TestTxCommitAndRollback(t *testing.T) {
	t.Parallel()
	b := newBroker(t, 2)
	r := newReader(t, b)
	ctx := context.Background()
	pid := uniq.Name("tx")
	cfg := b.config(pid)
	cfg.Group = uniq.Name("tx-group")
	p, err := NewTx(ctx, b.db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	order := uniq.Name("o")

	e1 := event(order, 1)
	s1, err := p.Send(ctx, e1, writeShopOrder(e1))
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	if s1.Event.Seq != 1 || s1.Event.ProducerID != pid || s1.MessageID == "" {
		t.Fatalf("Send returned %+v", s1)
	}
	if id, mid := outboxID(t, b.db, pid, 1); id == "" || mid != s1.MessageID {
		t.Fatalf("outbox row of seq 1: id %q message ID %q; sent %q", id, mid, s1.MessageID)
	}
	if !shopOrderExists(t, b.db, e1) {
		t.Fatal("the local write of a committed send is missing")
	}

	errOutOfStock := errors.New("out of stock")
	e2 := event(order, 2)
	_, err = p.Send(ctx, e2, func(tx *gorm.DB) error {
		if err := writeShopOrder(e2)(tx); err != nil {
			return err
		}
		return errOutOfStock
	})
	if !errors.Is(err, errOutOfStock) {
		t.Fatalf("Send with a failing local transaction = %v; want its error", err)
	}
	if shopOrderExists(t, b.db, e2) {
		t.Fatal("the local write of a failed send was committed")
	}

	e3 := event(order, 3)
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("a panic in the local transaction did not reach the caller")
			}
		}()
		_, _ = p.Send(ctx, e3, func(tx *gorm.DB) error {
			if err := writeShopOrder(e3)(tx); err != nil {
				return err
			}
			panic("bug in the order service")
		})
	}()
	if shopOrderExists(t, b.db, e3) {
		t.Fatal("the local write of a panicking send was committed")
	}
	if n, _ := NextSeq(ctx, b.db, pid); n != 2 {
		t.Fatalf("failed local transactions used numbers: next %d, want 2", n)
	}

	e4 := event(order, 4)
	s4, err := p.Send(ctx, e4, writeShopOrder(e4))
	if err != nil || s4.Event.Seq != 2 {
		t.Fatalf("Send after failures = seq %d, %v; want seq 2", s4.Event.Seq, err)
	}

	// A transactional message reaches its queue when the broker handles
	// its commit, which the send does not wait for: the committed ones
	// first, then the sentinel.
	r.waitFor(t, 60*time.Second, "the committed messages", func(got []received) bool {
		return withEvent(got, e1.EventID) > 0 && withEvent(got, e4.EventID) > 0
	})
	got := b.consumedThrough(t, r, order)
	if len(got) != 2 || got[0].event != s1.Event || got[1].event != s4.Event {
		t.Fatalf("consumed %s; want seq 1 (%s) and seq 2 (%s) only", describe(got), e1.EventID, e4.EventID)
	}
	if got[0].props[PropOutboxID] == "" || got[0].keys != order || got[0].sharding != order || got[0].tag != string(e1.Status) {
		t.Fatalf("committed message: keys %q tag %q sharding key %q properties %v", got[0].keys, got[0].tag, got[0].sharding, got[0].props)
	}
	if got[0].queue != got[1].queue {
		t.Fatalf("one order's transactional messages went to queues %d and %d", got[0].queue, got[1].queue)
	}
}

// TestTxUnknownOutcomeResolvedByCheckBack: the producer leaves the outcome
// unknown to the broker after its local transaction committed, and after
// it rolled back; the broker checks back, and the producer answers from
// the outbox: the first message is delivered, the second never.
func TestTxUnknownOutcomeResolvedByCheckBack(t *testing.T) {
	t.Parallel()
	b := newBroker(t, 2)
	r := newReader(t, b)
	ctx := context.Background()
	pid := uniq.Name("unknown")
	cfg := b.config(pid)
	cfg.Group = uniq.Name("unknown-group")
	var c checks
	cfg.hooks = &hooks{
		endState: func(mq.TxState) mq.TxState { return mq.TxUnknown },
		checked:  c.hook,
	}
	p, err := NewTx(ctx, b.db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	order := uniq.Name("o")

	committed := event(order, 1)
	start := time.Now()
	if _, err := p.Send(ctx, committed, writeShopOrder(committed)); err != nil {
		t.Fatalf("Send: %v", err)
	}
	rolledBack := event(order, 2)
	if _, err := p.Send(ctx, rolledBack, func(*gorm.DB) error { return errors.New("payment refused") }); err == nil {
		t.Fatal("Send with a failing local transaction succeeded")
	}
	if got := r.all(t); len(got) != 0 {
		t.Fatalf("delivered before any check-back: %s", describe(got))
	}

	id, _ := outboxID(t, b.db, pid, 1)
	c.waitAnswer(t, id, nil, mq.TxCommit)
	t.Logf("check-back committed the first message %s after the send", time.Since(start).Round(time.Second))
	c.waitAnswer(t, "", []string{id}, mq.TxRollback)
	t.Logf("check-back rolled back the second message %s after the send", time.Since(start).Round(time.Second))

	r.waitFor(t, 30*time.Second, "the committed message", func(got []received) bool { return withEvent(got, committed.EventID) > 0 })
	got := b.consumedThrough(t, r, order)
	if len(got) != 1 || got[0].event.EventID != committed.EventID || got[0].event.Seq != 1 {
		t.Fatalf("consumed %s; want only %s", describe(got), committed.EventID)
	}
}
