package mq

import (
	"context"
	"errors"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// sender answers SendSync with errs in turn, then success.
type sender struct {
	rocketmq.Producer
	errs  []error
	calls int
}

func (s *sender) SendSync(context.Context, ...*primitive.Message) (*primitive.SendResult, error) {
	s.calls++
	if s.calls <= len(s.errs) {
		return nil, s.errs[s.calls-1]
	}
	return &primitive.SendResult{Status: primitive.SendOK, MsgID: "m", MessageQueue: &primitive.MessageQueue{QueueId: 3}}, nil
}

// A broker that is busy has not stored the message: Publish sends again,
// a bounded number of times. Any other error is the caller's at once.
func TestPublishRetriesABusyBroker(t *testing.T) {
	busy := errors.New("CODE: 2, DESC: [TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, period in queue: 208ms, size of queue: 0")
	m := Message{Topic: "t", Body: []byte("{}")}
	ctx := context.Background()

	s := &sender{errs: []error{busy, primitive.MQBrokerErr{ResponseCode: 2, ErrorMessage: "[PC_SYNCHRONIZED]broker busy"}}}
	if r, err := (&Producer{p: s}).Publish(ctx, m); err != nil || s.calls != 3 || r.QueueID != 3 {
		t.Errorf("busy twice: receipt %+v, %v after %d sends; want stored on the third", r, err, s.calls)
	}

	s = &sender{errs: []error{busy, busy, busy, busy, busy, busy, busy}}
	if _, err := (&Producer{p: s}).Publish(ctx, m); !errors.Is(err, busy) || s.calls != busyRetries+1 {
		t.Errorf("busy for good: %v after %d sends, want the broker's answer after %d", err, s.calls, busyRetries+1)
	}

	other := errors.New("CODE: 13, DESC: the message is illegal")
	s = &sender{errs: []error{other}}
	if _, err := (&Producer{p: s}).Publish(ctx, m); !errors.Is(err, other) || s.calls != 1 {
		t.Errorf("another refusal: %v after %d sends, want it at once", err, s.calls)
	}

	s = &sender{errs: []error{busy, busy}}
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if _, err := (&Producer{p: s}).Publish(short, m); !errors.Is(err, busy) || !errors.Is(err, context.DeadlineExceeded) || s.calls != 1 {
		t.Errorf("busy past the caller's deadline: %v after %d sends, want both errors after one", err, s.calls)
	}
}
