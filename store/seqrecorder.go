package store

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// maxSeqBatch bounds the numbers one commit of a SeqRecorder carries.
const maxSeqBatch = 512

// SeqRecorder records sequence numbers as RecordSeq does, committing the
// numbers of concurrent calls together (group commit): while one commit is
// under way, the numbers that arrive wait and go into the next, in one
// call that locks each producer's row once. A commit that would start on
// an idle recorder first lingers, so that a steady trickle of numbers
// shares commits too: a number is committed at most the linger later.
type SeqRecorder struct {
	s       *Store
	timeout time.Duration
	linger  time.Duration

	mu      sync.Mutex
	queue   []seqCall
	running bool
}

// seqCall is a Record call waiting for its number's commit; ctx is the
// call's, whose values (its trace) the commit takes when it carries the
// call first.
type seqCall struct {
	ctx  context.Context
	num  SeqNum
	done chan error
}

// NewSeqRecorder returns a SeqRecorder writing to s; timeout bounds each
// commit, and linger is how long a commit that would start on an idle
// recorder waits for more numbers (0: none).
func (s *Store) NewSeqRecorder(timeout, linger time.Duration) *SeqRecorder {
	return &SeqRecorder{s: s, timeout: timeout, linger: linger}
}

// Record records that the message numbered seq in producerID's sequence was
// received, returning once that is committed. A number RecordSeq would
// refuse is refused with ErrInvalid before it joins a commit; a commit that
// fails fails every call it carried. A commit shows in the trace of the
// first call it carries. When ctx ends first, Record returns its error and
// the number may still be recorded (recording is idempotent).
func (r *SeqRecorder) Record(ctx context.Context, producerID string, seq int64) error {
	n := SeqNum{ProducerID: producerID, Seq: seq}
	if err := validSeq(n); err != nil {
		return fmt.Errorf("record seq %d of producer %q: %w", seq, producerID, err)
	}
	c := seqCall{ctx: ctx, num: n, done: make(chan error, 1)}
	r.mu.Lock()
	r.queue = append(r.queue, c)
	if !r.running {
		r.running = true
		go r.commitAll()
	}
	r.mu.Unlock()
	select {
	case err := <-c.done:
		if err != nil {
			return fmt.Errorf("record seq %d of producer %q: %w", seq, producerID, err)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// commitAll commits the queued numbers, a batch at a time, until the queue
// is empty, after the linger; one runs at a time.
func (r *SeqRecorder) commitAll() {
	if r.linger > 0 {
		time.Sleep(r.linger)
	}
	for {
		r.mu.Lock()
		batch := r.queue[:min(len(r.queue), maxSeqBatch)]
		r.queue = r.queue[len(batch):]
		if len(batch) == 0 {
			r.queue, r.running = nil, false
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		nums := make([]SeqNum, len(batch))
		for i, c := range batch {
			nums[i] = c.num
		}
		// The commit runs under the first call's trace, never its cancellation.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(batch[0].ctx), r.timeout)
		err := r.s.RecordSeqs(ctx, nums)
		cancel()
		for _, c := range batch {
			c.done <- err
		}
	}
}
