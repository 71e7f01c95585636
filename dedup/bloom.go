package dedup

import (
	"strconv"
	"sync"

	"github.com/bits-and-blooms/bloom/v3"

	"github.com/orderflow/orderflow/fsm"
)

// Default sizing of the Bloom filter: a generation holds a million pairs at
// a false-positive rate of 0.1% in about 1.8 MB; two generations are kept.
const (
	DefaultBloomCapacity = 1_000_000
	DefaultBloomFPRate   = 0.001
)

// Bloom is the in-process tier: a Bloom filter of (business key, content
// hash) pairs. Test never answers false for one of the last capacity pairs
// added, and answers true for a pair never added at about the configured
// rate (a false positive).
//
// It keeps two generations of capacity pairs each: when the current one is
// full it becomes the previous one and the one before is dropped, so memory
// and the false-positive rate stay bounded however long the bridge runs.
// Forgetting an old pair costs at most a signal. Make one with NewBloom; it
// is safe for concurrent use.
type Bloom struct {
	capacity uint
	fpRate   float64

	mu        sync.RWMutex
	cur, prev *bloom.BloomFilter
	n         uint // pairs added to cur
}

// NewBloom returns an empty filter whose generations hold capacity pairs at
// the false-positive rate fpRate (0 < fpRate < 1).
func NewBloom(capacity uint, fpRate float64) *Bloom {
	capacity = max(capacity, 1)
	return &Bloom{capacity: capacity, fpRate: fpRate, cur: bloom.NewWithEstimates(capacity, fpRate)}
}

// Test reports whether the pair may have been added.
func (b *Bloom) Test(k fsm.Key, hash string) bool {
	p := pair(k, hash)
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.cur.Test(p) || (b.prev != nil && b.prev.Test(p))
}

// Add adds the pair, starting a new generation when the current one is
// full.
func (b *Bloom) Add(k fsm.Key, hash string) {
	p := pair(k, hash)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n >= b.capacity {
		b.prev, b.cur, b.n = b.cur, bloom.NewWithEstimates(b.capacity, b.fpRate), 0
	}
	b.cur.Add(p)
	b.n++
}

// pair encodes a business key and a content hash unambiguously: an order
// ID holds no '@' and no '/'.
func pair(k fsm.Key, hash string) []byte {
	p := make([]byte, 0, len(k.OrderID)+len(hash)+22)
	p = append(p, k.OrderID...)
	p = append(p, '@')
	p = strconv.AppendInt(p, k.Version, 10)
	p = append(p, '/')
	return append(p, hash...)
}
