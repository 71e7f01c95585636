package mq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/orderflow/orderflow/internal/uniq"
)

// TxState is what a producer says about the local transaction of a
// transactional (half) message.
type TxState int

// Transaction states.
const (
	// TxUnknown leaves the half message pending: the broker checks back
	// later.
	TxUnknown TxState = iota
	// TxCommit makes the half message visible to consumers.
	TxCommit
	// TxRollback discards the half message.
	TxRollback
)

// String names the state.
func (s TxState) String() string {
	switch s {
	case TxCommit:
		return "commit"
	case TxRollback:
		return "rollback"
	default:
		return "unknown"
	}
}

func (s TxState) primitive() primitive.LocalTransactionState {
	switch s {
	case TxCommit:
		return primitive.CommitMessageState
	case TxRollback:
		return primitive.RollbackMessageState
	default:
		return primitive.UnknowState
	}
}

// TxMessage is a half message: the one just stored, given to the local
// transaction, or the one the broker checks back about.
type TxMessage struct {
	Topic string
	Keys  string
	Tag   string
	Body  []byte
	// Properties are the user properties the message was sent with.
	Properties map[string]string
	// MessageID is the message's ID (the client's unique key), which the
	// committed message keeps.
	MessageID string
	// TransactionID is the broker's transaction ID.
	TransactionID string
	// BornAt is when the producer sent it (zero when unknown).
	BornAt time.Time
}

// CheckFunc answers the broker's check-back about a half message whose
// outcome the broker does not know.
type CheckFunc func(m TxMessage) TxState

// Property names the transactional producer uses itself.
const (
	// propSend identifies one Send call, so that the listener finds its
	// local transaction.
	propSend = "ORDERFLOW_TX_SEND"
	// propProbe marks the half message Register sends and rolls back.
	propProbe = "ORDERFLOW_TX_PROBE"
)

// TxProducer sends transactional messages with the hash queue selector:
// a half message, invisible to consumers, then the local transaction, then
// commit or rollback of the half message; the broker checks back with any
// live producer of the group when it did not learn the outcome. Every
// producer of a group must answer check-backs alike (read the same
// database). It is safe for concurrent use.
type TxProducer struct {
	p      rocketmq.TransactionProducer
	l      *txListener
	closed atomic.Bool
}

// txListener adapts the client's listener to per-call local transactions
// and to a CheckFunc.
type txListener struct {
	check CheckFunc
	tp    *TxProducer

	mu      sync.Mutex
	pending map[string]func(TxMessage) TxState
	next    uint64
}

// ExecuteLocalTransaction runs the local transaction of the Send call that
// sent msg. The client calls it in that call's goroutine, after the broker
// stored the half message.
func (l *txListener) ExecuteLocalTransaction(msg *primitive.Message) primitive.LocalTransactionState {
	l.mu.Lock()
	local := l.pending[msg.GetProperty(propSend)]
	l.mu.Unlock()
	if local == nil {
		return primitive.RollbackMessageState
	}
	return local(txMessage(msg, time.Time{})).primitive()
}

// CheckLocalTransaction answers a check-back: probes are rolled back, the
// rest goes to the CheckFunc. After Close the answer is unknown.
func (l *txListener) CheckLocalTransaction(msg *primitive.MessageExt) primitive.LocalTransactionState {
	if msg.GetProperty(propProbe) != "" {
		return primitive.RollbackMessageState
	}
	if l.tp.closed.Load() {
		return primitive.UnknowState
	}
	var born time.Time
	if msg.BornTimestamp > 0 {
		born = time.UnixMilli(msg.BornTimestamp)
	}
	m := txMessage(&msg.Message, born)
	if m.MessageID == "" {
		m.MessageID = msg.MsgId
	}
	return l.check(m).primitive()
}

func txMessage(msg *primitive.Message, born time.Time) TxMessage {
	props := msg.GetProperties()
	m := TxMessage{
		Topic:         msg.Topic,
		Keys:          msg.GetKeys(),
		Tag:           msg.GetTags(),
		Body:          msg.Body,
		Properties:    props,
		MessageID:     msg.GetProperty(primitive.PropertyUniqueClientMessageIdKeyIndex),
		TransactionID: msg.TransactionId,
		BornAt:        born,
	}
	if m.TransactionID == "" {
		m.TransactionID = msg.GetProperty(primitive.PropertyTransactionID)
	}
	return m
}

// NewTxProducer creates and starts a transactional producer of group (not
// empty: the broker checks back with the group's producers) that talks to
// the name servers in namesrv and answers check-backs with check. Call
// Register before relying on check-backs.
func NewTxProducer(namesrv, group string, check CheckFunc, opts ...ProducerOption) (*TxProducer, error) {
	if group == "" {
		return nil, errors.New("mq: transactional producer: group is empty")
	}
	if check == nil {
		return nil, errors.New("mq: transactional producer: no check-back function")
	}
	addrs, err := nameServers(namesrv)
	if err != nil {
		return nil, err
	}
	cfg := producerConfig{group: group, retries: 2, sendTimeout: 5 * time.Second}
	for _, o := range opts {
		o(&cfg)
	}
	cfg.group = group
	quietDefault()
	tp := &TxProducer{}
	tp.l = &txListener{check: check, tp: tp, pending: map[string]func(TxMessage) TxState{}}
	p, err := rocketmq.NewTransactionProducer(tp.l,
		producer.WithNsResolver(resolver(addrs)),
		producer.WithGroupName(cfg.group),
		producer.WithInstanceName(uniq.Name("orderflow-txproducer")),
		producer.WithQueueSelector(producer.NewHashQueueSelector()),
		producer.WithRetry(cfg.retries),
		producer.WithSendMsgTimeout(cfg.sendTimeout),
		producer.WithCredentials(cfg.creds),
		producer.WithTLS(cfg.tls),
	)
	if err != nil {
		return nil, fmt.Errorf("mq: create transactional producer: %w", err)
	}
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("mq: start transactional producer (name server %s): %w", namesrv, err)
	}
	tp.p = p
	return tp, nil
}

// Register makes the broker able to check back with this producer at once.
// The broker checks back only with producers that send it heartbeats, and
// the client sends heartbeats only to brokers it has routes for, which it
// learns by sending. So a producer started after a crash, that has sent
// nothing yet, would never be asked about the half messages its
// predecessor left pending. Register sends one half message to topic,
// marked as a probe, and rolls it back; consumers never see it. The client
// then heartbeats to the topic's brokers within its heartbeat period (30 s;
// the first heartbeat, one second after the start, already counts if the
// probe is sent by then).
func (p *TxProducer) Register(ctx context.Context, topic string) error {
	m := Message{Topic: topic, Body: []byte("orderflow transactional producer registration probe"),
		Properties: map[string]string{propProbe: "1"}}
	_, _, err := p.Send(ctx, m, func(TxMessage) TxState { return TxRollback })
	if err != nil {
		return fmt.Errorf("mq: register transactional producer on %s: %w", topic, err)
	}
	return nil
}

// Send stores m as a half message, then runs local, which gets the stored
// half message and says whether to commit it, roll it back or leave it to
// the broker's check-back; Send ends the transaction accordingly and
// returns the half message's receipt and local's answer. The end of the
// transaction is one-way: if it is lost, the broker checks back.
//
// When the broker did not store the half message, local does not run and
// Send returns an error (wrapping ErrNotStored when the broker answered with
// another status than SEND_OK; the client then rolls the half message back
// or leaves it to the check-back).
func (p *TxProducer) Send(ctx context.Context, m Message, local func(TxMessage) TxState) (Receipt, TxState, error) {
	if m.Topic == "" {
		return Receipt{}, TxUnknown, errors.New("mq: transactional send: topic is empty")
	}
	l := p.l
	ran := false
	l.mu.Lock()
	l.next++
	key := strconv.FormatUint(l.next, 10)
	l.pending[key] = func(tm TxMessage) TxState {
		ran = true
		return local(tm)
	}
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		delete(l.pending, key)
		l.mu.Unlock()
	}()

	msg := m.primitive()
	msg.WithProperty(propSend, key)
	res, err := p.p.SendMessageInTransaction(ctx, msg)
	if err != nil {
		return Receipt{}, TxUnknown, fmt.Errorf("mq: transactional send to %s: %w", m.Topic, err)
	}
	if res.SendResult == nil || res.Status != primitive.SendOK || !ran {
		status := -1
		if res.SendResult != nil {
			status = int(res.Status)
		}
		return Receipt{}, TxUnknown, fmt.Errorf("mq: transactional send to %s: status %d: %w", m.Topic, status, ErrNotStored)
	}
	return receipt(res.SendResult), txStateOf(res.State), nil
}

func txStateOf(s primitive.LocalTransactionState) TxState {
	switch s {
	case primitive.CommitMessageState:
		return TxCommit
	case primitive.RollbackMessageState:
		return TxRollback
	default:
		return TxUnknown
	}
}

// Close shuts the producer down. Check-backs that still arrive are answered
// "unknown" (the broker asks another producer of the group, or again later).
// Like the client's, it does not wait for a check-back being answered.
func (p *TxProducer) Close() error {
	p.closed.Store(true)
	if err := p.p.Shutdown(); err != nil {
		return fmt.Errorf("mq: shut transactional producer down: %w", err)
	}
	return nil
}
