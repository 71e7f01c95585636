// Package backlog reports a consumer group's backlog as the RocketMQ brokers
// see it: per message queue of the topic and of the group's retry topic,
// how many stored messages the group has not consumed, from the offsets the
// group committed. It needs no running consumer, so it is right while no
// bridge runs. `orderflow lag` prints it; Collector exports it to
// Prometheus.
//
// The lag of a queue is max − committed, where max is the offset the next
// message will get and committed the group's committed offset (the next
// message it will consume). A queue where the group has committed nothing
// counts from its first stored message, max − min, because the bridge's
// consumer starts a new group at the first offset
// (ConsumeFromFirstOffset); a committed offset below min (messages deleted
// by retention) also counts from min. A lag is never negative.
package backlog

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/orderflow/orderflow/internal/mq"
)

// RetryTopic is the topic the broker redelivers group's failed messages
// through.
func RetryTopic(group string) string { return "%RETRY%" + group }

// Queue is the backlog of one message queue.
type Queue struct {
	Topic  string `json:"topic"`
	Broker string `json:"broker"`
	Queue  int    `json:"queue"`
	// Min is the offset of the first stored message, Max the offset the
	// next message will get.
	Min int64 `json:"min"`
	Max int64 `json:"max"`
	// Committed is the group's committed offset; nil when it has none.
	Committed *int64 `json:"committed"`
	// Lag is how many stored messages the group has not consumed.
	Lag int64 `json:"lag"`
}

// Report is a group's backlog on a topic and its retry topic.
type Report struct {
	Group string `json:"group"`
	Topic string `json:"topic"`
	// Queues are ordered: the topic's, then the retry topic's, each by
	// broker and queue.
	Queues []Queue `json:"queues"`
	// Total is the sum of the queues' lags.
	Total int64 `json:"total"`
	// Missing lists topics the name servers do not know (the retry topic
	// before the group's first consumer started); they hold nothing.
	Missing []string `json:"missing,omitempty"`
	// At is when the offsets were read.
	At time.Time `json:"at"`
}

// Lag is a queue's backlog from its minimum and maximum offsets and the
// group's committed offset (negative: none), as the package doc defines it.
func Lag(min, max, committed int64) int64 {
	from := committed
	if from < min {
		from = min
	}
	if max <= from {
		return 0
	}
	return max - from
}

// Config says where to read.
type Config struct {
	// NameServer is the comma-separated list of name server host:port.
	NameServer string
	// AccessKey and SecretKey are ACL credentials (both empty: none).
	AccessKey, SecretKey string
	// TLS, when not nil, is the TLS configuration of the connections to
	// the name servers and the brokers (nil: plain TCP).
	TLS *tls.Config
	// Topic and Group are the topic of order events and the consumer
	// group whose backlog is read.
	Topic, Group string
}

// Reader reads backlog reports. It is safe for concurrent use.
type Reader struct {
	cfg Config
	off *mq.OffsetReader
}

// NewReader returns a reader for cfg; it connects when it reads. Close it
// when done.
func NewReader(cfg Config) (*Reader, error) {
	if cfg.Topic == "" || cfg.Group == "" {
		return nil, fmt.Errorf("backlog: a topic and a consumer group are needed (topic %q, group %q)", cfg.Topic, cfg.Group)
	}
	off, err := mq.NewOffsetReader(cfg.NameServer, cfg.AccessKey, cfg.SecretKey, cfg.TLS)
	if err != nil {
		return nil, fmt.Errorf("backlog: %w", err)
	}
	return &Reader{cfg: cfg, off: off}, nil
}

// Read returns the group's backlog now. The topic must exist; a missing
// retry topic is listed in Report.Missing.
func (r *Reader) Read(ctx context.Context) (Report, error) {
	rep := Report{Group: r.cfg.Group, Topic: r.cfg.Topic, Queues: []Queue{}}
	for i, topic := range []string{r.cfg.Topic, RetryTopic(r.cfg.Group)} {
		qs, err := r.off.Offsets(ctx, r.cfg.Group, topic)
		if i > 0 && errors.Is(err, mq.ErrNoTopic) {
			rep.Missing = append(rep.Missing, topic)
			continue
		}
		if err != nil {
			return Report{}, err
		}
		for _, q := range qs {
			row := Queue{Topic: q.Topic, Broker: q.Broker, Queue: q.QueueID, Min: q.Min, Max: q.Max, Lag: Lag(q.Min, q.Max, q.Committed)}
			if q.Committed >= 0 {
				c := q.Committed
				row.Committed = &c
			}
			rep.Queues = append(rep.Queues, row)
			rep.Total += row.Lag
		}
	}
	rep.At = time.Now()
	return rep, nil
}

// Close releases the reader's client.
func (r *Reader) Close() error { return r.off.Close() }
