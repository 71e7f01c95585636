package dedup

import (
	"fmt"
	"testing"

	"github.com/orderflow/orderflow/fsm"
)

// The last capacity pairs added are always found; pairs never added are
// found at about the configured rate; the same key with another hash is
// another pair.
func TestBloom(t *testing.T) {
	const capacity = 10_000
	b := NewBloom(capacity, 0.01)
	key := func(i int) fsm.Key { return fsm.Key{OrderID: fmt.Sprintf("o-%d", i), Version: int64(1 + i%5)} }
	for i := 0; i < 3*capacity; i++ {
		b.Add(key(i), "h")
	}
	for i := 2 * capacity; i < 3*capacity; i++ {
		if !b.Test(key(i), "h") {
			t.Fatalf("pair %d of the last %d added not found", i, capacity)
		}
	}
	fp := 0
	for i := 3 * capacity; i < 4*capacity; i++ {
		if b.Test(key(i), "h") {
			fp++
		}
	}
	// Two generations are tested: at most about twice the rate.
	if rate := float64(fp) / capacity; rate > 0.03 {
		t.Errorf("false-positive rate %.4f over pairs never added, want about 0.01-0.02", rate)
	}
	forgotten := 0
	for i := 0; i < capacity; i++ {
		if !b.Test(key(i), "h") {
			forgotten++
		}
	}
	if forgotten < capacity/2 {
		t.Errorf("only %d of the oldest generation's %d pairs forgotten after two rotations", forgotten, capacity)
	}
	if b.Test(key(2*capacity), "other") && b.Test(key(2*capacity+1), "other") && b.Test(key(2*capacity+2), "other") {
		t.Error("a pair with another content hash is found three times in a row")
	}
}

// A filter of one bit claims every pair once anything was added: the
// tests use it to force false positives.
func TestTinyBloomClaimsEverything(t *testing.T) {
	b := NewBloom(1, 0.99)
	if b.Test(fsm.Key{OrderID: "a", Version: 1}, "h") {
		t.Fatal("an empty filter claims a pair")
	}
	b.Add(fsm.Key{OrderID: "a", Version: 1}, "h")
	for i := 0; i < 10; i++ {
		if !b.Test(fsm.Key{OrderID: fmt.Sprintf("z-%d", i), Version: 9}, "x") {
			t.Fatal("a one-bit filter should claim every pair")
		}
	}
}
