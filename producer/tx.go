package producer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/mq"
)

// Properties every transactional message carries, for the check-back.
const (
	// PropOutboxID is the ID of the message's producer_outbox row.
	PropOutboxID = "ORDERFLOW_OUTBOX_ID"
	// PropProducerID is the message's producer ID.
	PropProducerID = "ORDERFLOW_PRODUCER_ID"
)

// checkLockTimeout bounds how long a check-back waits for a local
// transaction still running; past it, the answer is "unknown" and the
// broker asks again later.
const checkLockTimeout = "3s"

// checkTimeout bounds one check-back's database work.
const checkTimeout = 10 * time.Second

// ErrOutcomeUnknown is wrapped when the commit of the local transaction
// failed without saying whether it took effect. The broker's check-back
// then decides from the outbox row: the message is delivered exactly when
// the local transaction committed.
var ErrOutcomeUnknown = errors.New("local transaction outcome unknown")

// TxProducer sends order events as RocketMQ transactional messages tied to
// the caller's local transaction: the half message is stored (invisible to
// consumers), then the caller's writes and the outbox row commit in one
// PostgreSQL transaction, then the half message is committed; when the
// local transaction fails it is rolled back with the half message. If the
// producer dies in between, or the broker never hears the outcome, the
// broker checks back with a live producer of the group, which answers from
// the outbox row: commit when it exists, rollback when it does not. The
// message is delivered exactly when the local transaction committed.
//
// It is safe for concurrent use; sends are serialized by the producer's
// sequence (see the package documentation).
type TxProducer struct {
	cfg Config
	db  *gorm.DB
	mq  *mq.TxProducer
}

// NewTx starts a transactional producer whose sequence and outbox live in
// db, the database of the caller's local transactions (with Schema
// applied). cfg.Group is required.
//
// Before it returns, it sends one half message marked as a probe and rolls
// it back (consumers never see it): the broker checks back only with
// producers that send it heartbeats, and the RocketMQ client heartbeats only
// to brokers it has sent to. So a producer restarted after a crash answers
// the check-backs about the half messages its predecessor left pending
// within the client's heartbeat period (30 s), even before it sends.
func NewTx(ctx context.Context, db *gorm.DB, cfg Config) (*TxProducer, error) {
	if db == nil {
		return nil, errors.New("producer: no database")
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Group == "" {
		return nil, errors.New("producer: a transactional producer needs a Group")
	}
	cfg = cfg.withDefaults()
	p := &TxProducer{cfg: cfg, db: db}
	tp, err := mq.NewTxProducer(cfg.NameServer, cfg.Group, p.check, cfg.mqOptions()...)
	if err != nil {
		return nil, fmt.Errorf("producer: %w", err)
	}
	p.mq = tp
	if _, err := retry(ctx, cfg, "register", func(actx context.Context) (struct{}, error) {
		return struct{}{}, tp.Register(actx, cfg.Topic)
	}); err != nil {
		_ = tp.Close()
		return nil, fmt.Errorf("producer: %w", err)
	}
	return p, nil
}

// Send numbers e with the producer's next sequence number (its ProducerID
// and Seq are overwritten) and publishes it in a transaction with local:
//
//  1. begin a transaction on the producer's database and allocate the
//     number (the sequence row stays locked until the transaction ends);
//  2. store the half message (retried up to MaxAttempts);
//  3. run local(tx), which makes the caller's writes with tx and must
//     neither commit nor roll it back, then insert the outbox row;
//  4. commit, and commit the half message; or, when local or the insert
//     failed, roll both back.
//
// Send returns e as sent when the local transaction committed. It returns
// local's error (wrapped) when local failed, and an error when the half
// message could not be stored or the database failed before the commit;
// in both cases nothing was written and nothing will be delivered. When the commit itself failed,
// the error wraps ErrOutcomeUnknown: the local transaction may have
// committed, and the check-back settles the message accordingly. The
// whole transaction must finish within Config.LocalTimeout.
//
// The send is a span, "send <topic>", a child of the span in ctx, and the
// message carries its W3C trace context (see the package documentation).
func (p *TxProducer) Send(ctx context.Context, e fsm.Event, local func(tx *gorm.DB) error) (sent Sent, err error) {
	if _, _, err := number(p.cfg.Topic, p.cfg.ProducerID, 1, e); err != nil {
		return Sent{}, fmt.Errorf("producer: send %s: %w", e.Key(), err)
	}
	if local == nil {
		return Sent{}, errors.New("producer: no local transaction")
	}
	ctx, span := startSend(ctx, p.cfg.Topic, e)
	defer func() { endSend(span, sent, err) }()
	return p.send(ctx, e, local)
}

func (p *TxProducer) send(ctx context.Context, e fsm.Event, local func(tx *gorm.DB) error) (Sent, error) {
	lctx, cancel := context.WithTimeout(ctx, p.cfg.LocalTimeout)
	defer cancel()
	tx := p.db.WithContext(lctx).Begin()
	if tx.Error != nil {
		return Sent{}, fmt.Errorf("producer: send %s: begin local transaction: %w", e.Key(), tx.Error)
	}
	ended := false
	defer func() {
		if !ended {
			tx.Rollback()
		}
	}()
	// A producer that stalls must not keep the sequence locked, nor commit
	// long after the broker gave up on its half message.
	if err := tx.Exec(fmt.Sprintf("SET LOCAL idle_in_transaction_session_timeout = %d",
		p.cfg.LocalTimeout.Milliseconds())).Error; err != nil {
		return Sent{}, fmt.Errorf("producer: send %s: local transaction: %w", e.Key(), err)
	}
	seq, err := allocate(tx, p.cfg.ProducerID)
	if err != nil {
		return Sent{}, fmt.Errorf("producer: send %s: %w", e.Key(), err)
	}
	e, m, err := number(p.cfg.Topic, p.cfg.ProducerID, seq, e)
	if err != nil {
		return Sent{}, fmt.Errorf("producer: send %s: %w", e.Key(), err)
	}
	outboxID, err := newOutboxID()
	if err != nil {
		return Sent{}, fmt.Errorf("producer: send %s: %w", e.Key(), err)
	}
	m.Properties = map[string]string{PropOutboxID: outboxID, PropProducerID: p.cfg.ProducerID}
	m = traced(ctx, m)

	var (
		localErr, commitErr error
		panicked            any
		ran                 bool
	)
	runLocal := func(half mq.TxMessage) (state mq.TxState) {
		ran = true
		defer func() {
			if r := recover(); r != nil {
				panicked = r
				tx.Rollback()
				ended = true
				state = mq.TxRollback
			}
		}()
		if err := local(tx); err != nil {
			localErr = fmt.Errorf("producer: send %s: local transaction: %w", e.Key(), err)
			tx.Rollback()
			ended = true
			return p.endState(mq.TxRollback)
		}
		if err := tx.Exec(`INSERT INTO producer_outbox (id, producer_id, seq, topic, keys, tag, body, message_id)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			outboxID, p.cfg.ProducerID, seq, m.Topic, m.Keys, m.Tag, m.Body, half.MessageID).Error; err != nil {
			localErr = fmt.Errorf("producer: send %s: outbox row: %w", e.Key(), err)
			tx.Rollback()
			ended = true
			return p.endState(mq.TxRollback)
		}
		ended = true
		if err := tx.Commit().Error; err != nil {
			commitErr = err
			return p.endState(mq.TxUnknown)
		}
		return p.endState(mq.TxCommit)
	}
	r, err := retry(lctx, p.cfg, "half message", func(actx context.Context) (mq.Receipt, error) {
		r, _, err := p.mq.Send(actx, m, runLocal)
		if ran {
			// The half message was stored and the local transaction ran:
			// never send it again.
			return r, nil
		}
		return r, err
	})
	switch {
	case panicked != nil:
		panic(panicked)
	case err != nil:
		return Sent{}, fmt.Errorf("producer: send %s: %w", e.Key(), err)
	case localErr != nil:
		return Sent{}, localErr
	case commitErr != nil:
		return Sent{}, fmt.Errorf("producer: send %s: commit local transaction: %w: %w", e.Key(), ErrOutcomeUnknown, commitErr)
	}
	return Sent{Event: e, Body: m.Body, MessageID: r.MessageID}, nil
}

// endState is what Send tells the broker after its local transaction
// ended in state s (tests may change it).
func (p *TxProducer) endState(s mq.TxState) mq.TxState {
	if p.cfg.hooks != nil && p.cfg.hooks.endState != nil {
		return p.cfg.hooks.endState(s)
	}
	return s
}

// check answers the broker's check-back about a half message from the
// outbox row it names.
func (p *TxProducer) check(m mq.TxMessage) mq.TxState {
	id, pid := m.Properties[PropOutboxID], m.Properties[PropProducerID]
	log := p.cfg.Logger.With("outbox_id", id, "producer_id", pid, "message_id", m.MessageID, "keys", m.Keys)
	var (
		s   mq.TxState
		err error
	)
	if id == "" || pid == "" {
		s, err = mq.TxUnknown, errors.New("half message without outbox properties")
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
		s, err = decide(ctx, p.db, id, pid)
		cancel()
	}
	if err != nil {
		log.Warn("check-back: outcome unknown; the broker will ask again", "err", err)
	} else {
		log.Info("check-back answered", "answer", s.String())
	}
	if p.cfg.hooks != nil && p.cfg.hooks.checked != nil {
		p.cfg.hooks.checked(id, s, err)
	}
	return s
}

// decide says what becomes of the half message whose outbox row is
// outboxID, sent by producerID, from db, the producer's database: commit
// when the row exists, rollback when it does not.
//
// A local transaction holds its producer's sequence row locked from before
// its half message was sent until it ends, so decide first waits for that
// lock (up to checkLockTimeout; then the answer is unknown): it never
// judges a local transaction that is still running, and needs no time
// bound. If the database never numbered a message of producerID, the
// answer is unknown too: the half message is probably not this database's
// (a group shared by producers on different databases), and rolling it
// back could lose it.
func decide(ctx context.Context, db *gorm.DB, outboxID, producerID string) (mq.TxState, error) {
	state, why := mq.TxUnknown, ""
	err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Exec(`SET LOCAL lock_timeout = '` + checkLockTimeout + `'`).Error; err != nil {
			return err
		}
		// Waits for a producer's first transaction, which inserts the row.
		res := tx.Exec(`INSERT INTO producer_sequences (producer_id) VALUES (?) ON CONFLICT (producer_id) DO NOTHING`, producerID)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 1 {
			why = fmt.Sprintf("this database never numbered a message of producer %q", producerID)
			return errDone // and the row just inserted goes with the rollback
		}
		// Waits for a later transaction, which updates it.
		var one int
		if err := tx.Raw(`SELECT 1 FROM producer_sequences WHERE producer_id = ? FOR SHARE`, producerID).Scan(&one).Error; err != nil {
			return err
		}
		var n int64
		if err := tx.Raw(`SELECT count(*) FROM producer_outbox WHERE id = ?`, outboxID).Scan(&n).Error; err != nil {
			return err
		}
		state = mq.TxRollback
		if n > 0 {
			state = mq.TxCommit
		}
		return errDone
	})
	switch {
	case !errors.Is(err, errDone):
		return mq.TxUnknown, fmt.Errorf("producer: check outbox row %s: %w", outboxID, err)
	case why != "":
		return mq.TxUnknown, fmt.Errorf("producer: check outbox row %s: %s", outboxID, why)
	}
	return state, nil
}

// newOutboxID returns a random outbox row ID (32 hex digits).
func newOutboxID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("outbox ID: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// MinOutboxAge is the youngest outbox row PruneOutbox removes. The broker
// checks back about a half message for transactionCheckMax ×
// transactionCheckInterval (15 × 30 s by default); an outbox row must
// outlive that, or a late check-back would roll back a committed message.
const MinOutboxAge = time.Hour

// PruneOutbox deletes the outbox rows of db older than olderThan (at least
// MinOutboxAge; a day is a good choice) and returns how many it deleted.
// The sequence counters are kept.
func PruneOutbox(ctx context.Context, db *gorm.DB, olderThan time.Duration) (int64, error) {
	if olderThan < MinOutboxAge {
		return 0, fmt.Errorf("producer: prune outbox: rows younger than %s may still be checked back", MinOutboxAge)
	}
	res := db.WithContext(ctx).Exec(`DELETE FROM producer_outbox WHERE created_at < now() - make_interval(secs => ?)`,
		olderThan.Seconds())
	if res.Error != nil {
		return 0, fmt.Errorf("producer: prune outbox: %w", res.Error)
	}
	return res.RowsAffected, nil
}

// Close shuts the producer's client down; check-backs that still arrive
// are answered "unknown" (the broker asks another producer of the group,
// or again later). It does not close db.
func (p *TxProducer) Close() error {
	return p.mq.Close()
}
