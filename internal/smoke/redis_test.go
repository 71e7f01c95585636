package smoke

import (
	"context"
	"testing"
	"time"

	"github.com/orderflow/orderflow/dedup"
	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
)

// TestRedisRoundTrip talks to REDIS_URL (config's default when unset) as
// the bridge's duplicate filter does: a business key remembered with its
// content hash, read back, kept against a second write.
func TestRedisRoundTrip(t *testing.T) {
	url := testenv.RedisURL(t)
	r, err := dedup.OpenRedis(url, dedup.RedisOptions{KeyPrefix: uniq.Name("smoke") + ":", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	k := fsm.Key{OrderID: "smoke", Version: 1}
	for _, h := range []string{"first", "second"} {
		if err := r.Remember(ctx, k, h); err != nil {
			t.Fatalf("Redis (REDIS_URL) refused a write: %v; start the local stack with `make up`", err)
		}
	}
	if h, found, err := r.Get(ctx, k); err != nil || !found || h != "first" {
		t.Fatalf("read back %q, found %v, err %v; want \"first\"", h, found, err)
	}
}
