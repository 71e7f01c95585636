package dedup

import (
	"context"
	"sync"

	"github.com/orderflow/orderflow/fsm"
)

// Delivery is an event (business key and content hash) this process is
// delivering right now: an entry of the filter's in-flight table, from the
// Admit that made its caller the event's deliverer until Done. Messages
// carrying the same event meanwhile wait for its outcome instead of
// signalling it again. It is safe for concurrent use.
type Delivery struct {
	table *inflight
	key   fsm.Key
	hash  string
	once  sync.Once
	done  chan struct{}
	// delivered is the outcome, written before done is closed.
	delivered bool
}

// Done records the outcome of the delivery, removes it from the in-flight
// table and wakes those waiting for it. delivered must be true only when
// the event is durably signalled (SignalWithStart returned, and Delivered
// was called) or a tier confirmed that it was. Only the first call counts.
func (d *Delivery) Done(delivered bool) {
	d.once.Do(func() {
		d.delivered = delivered
		d.table.remove(d)
		close(d.done)
	})
}

// Wait waits for the delivery's outcome and returns it: true when the event
// is durably signalled. It returns false when ctx is done first.
func (d *Delivery) Wait(ctx context.Context) bool {
	select {
	case <-d.done:
		return d.delivered
	case <-ctx.Done():
		select {
		case <-d.done: // done at the same moment: the outcome is known
			return d.delivered
		default:
			return false
		}
	}
}

// inflight is the table of the events this process is delivering, one per
// business key.
type inflight struct {
	mu sync.Mutex
	m  map[fsm.Key]*Delivery
}

// claim makes the caller the deliverer of (k, hash) when no delivery of k
// is in flight (own). Otherwise it returns the delivery in flight: follow
// when it carries the same content hash, other when it carries another one.
func (t *inflight) claim(k fsm.Key, hash string) (own, follow, other *Delivery) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if d, ok := t.m[k]; ok {
		if d.hash == hash {
			return nil, d, nil
		}
		return nil, nil, d
	}
	if t.m == nil {
		t.m = map[fsm.Key]*Delivery{}
	}
	d := &Delivery{table: t, key: k, hash: hash, done: make(chan struct{})}
	t.m[k] = d
	return d, nil, nil
}

// find returns the delivery of k in flight: follow when it carries hash,
// other when it carries another content hash.
func (t *inflight) find(k fsm.Key, hash string) (follow, other *Delivery) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch d, ok := t.m[k]; {
	case !ok:
		return nil, nil
	case d.hash == hash:
		return d, nil
	default:
		return nil, d
	}
}

// remove takes d out of the table.
func (t *inflight) remove(d *Delivery) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m[d.key] == d {
		delete(t.m, d.key)
	}
}

// size is the number of deliveries in flight.
func (t *inflight) size() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}
