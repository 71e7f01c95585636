package mq

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"

	"github.com/apache/rocketmq-client-go/v2/admin"
	rmqerrors "github.com/apache/rocketmq-client-go/v2/errors"
)

// ErrNoTopic is wrapped when the name servers do not know a topic.
var ErrNoTopic = errors.New("no such topic")

// QueueOffsets are one message queue's offsets as its master broker reports
// them.
type QueueOffsets struct {
	Topic string
	// Broker is the broker name; BrokerAddr the master that answered.
	Broker, BrokerAddr string
	QueueID            int
	// Min is the offset of the first message still stored; Max the offset
	// the next message will get.
	Min, Max int64
	// Committed is the group's committed offset, the next message it will
	// consume; -1 when the group has committed none for the queue.
	Committed int64
}

// offsetsAdmin is the part of the client's admin that OffsetReader uses.
type offsetsAdmin interface {
	ConsumeOffsets(ctx context.Context, group, topic string) ([]admin.QueueOffsets, error)
	Close() error
}

// OffsetReader reads consumer groups' committed offsets and queues' offsets
// from the brokers, without consuming (the client's admin API, patched:
// third_party/rocketmq-client-go/ORDERFLOW.md, change 3). It is safe for
// concurrent use; reads are serialized.
type OffsetReader struct {
	namesrv string
	mu      sync.Mutex
	admin   offsetsAdmin
}

// NewOffsetReader returns a reader that resolves routes from the
// comma-separated name servers, with ACL credentials when the keys are set,
// over TLS with tlsConf when it is not nil.
// It connects only when read. Close it when done.
func NewOffsetReader(namesrv, accessKey, secretKey string, tlsConf *tls.Config) (*OffsetReader, error) {
	a, err := newAdmin(namesrv, accessKey, secretKey, tlsConf)
	if err != nil {
		return nil, err
	}
	return &OffsetReader{namesrv: namesrv, admin: a}, nil
}

// newAdmin returns the client's admin for the comma-separated name
// servers, with ACL credentials when the keys are set and TLS with tlsConf
// when it is not nil, as the requests of the patch's changes 3 and 5 use it.
// It connects only when used.
func newAdmin(namesrv, accessKey, secretKey string, tlsConf *tls.Config) (rewindAdmin, error) {
	addrs, err := nameServers(namesrv)
	if err != nil {
		return nil, err
	}
	quietDefault()
	a, err := admin.NewAdmin(admin.WithResolver(resolver(addrs)), admin.WithCredentials(credentials(accessKey, secretKey)),
		admin.WithTLS(tlsConf))
	if err != nil {
		return nil, fmt.Errorf("mq: RocketMQ admin client for name server %s: %w", namesrv, err)
	}
	return a, nil
}

// Offsets returns the offsets of every readable queue of topic, with
// group's committed offsets, ordered by broker and queue. A topic the name
// servers do not know wraps ErrNoTopic; an unreachable name server or
// broker is named in the error.
func (r *OffsetReader) Offsets(ctx context.Context, group, topic string) ([]QueueOffsets, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.admin == nil {
		return nil, errors.New("mq: offset reader is closed")
	}
	qs, err := r.admin.ConsumeOffsets(ctx, group, topic)
	if errors.Is(err, rmqerrors.ErrTopicNotExist) {
		return nil, fmt.Errorf("mq: topic %s: %w (name server %s)", topic, ErrNoTopic, r.namesrv)
	}
	if err != nil {
		return nil, fmt.Errorf("mq: offsets of group %s on topic %s (name server %s): %w", group, topic, r.namesrv, err)
	}
	out := make([]QueueOffsets, len(qs))
	for i, q := range qs {
		out[i] = QueueOffsets{Topic: topic, Broker: q.Queue.BrokerName, BrokerAddr: q.BrokerAddr, QueueID: q.Queue.QueueId,
			Min: q.Min, Max: q.Max, Committed: q.Committed}
	}
	return out, nil
}

// Close releases the client.
func (r *OffsetReader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.admin == nil {
		return nil
	}
	err := r.admin.Close()
	r.admin = nil
	return err
}
