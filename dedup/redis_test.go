package dedup

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
)

func openTestRedis(t *testing.T, rawURL string, o RedisOptions) *Redis {
	t.Helper()
	if o.KeyPrefix == "" {
		o.KeyPrefix = uniq.Name("dedup-test") + ":"
	}
	r, err := OpenRedis(rawURL, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// On a real server: a miss, then the first content remembered with the TTL
// and kept against a conflicting copy; keys of another prefix apart.
func TestRedisGetRemember(t *testing.T) {
	url := testenv.RedisURL(t)
	r := openTestRedis(t, url, RedisOptions{TTL: time.Hour})
	ctx := context.Background()
	k := fsm.Key{OrderID: "o-1", Version: 3}
	if _, found, err := r.Get(ctx, k); err != nil || found {
		t.Fatalf("Get before Remember: found %v, err %v", found, err)
	}
	if err := r.Remember(ctx, k, "first"); err != nil {
		t.Fatal(err)
	}
	if err := r.Remember(ctx, k, "second"); err != nil {
		t.Fatal(err)
	}
	if h, found, err := r.Get(ctx, k); err != nil || !found || h != "first" {
		t.Fatalf("Get = %q, %v, %v; want the first content's hash", h, found, err)
	}
	ttl, err := r.c.TTL(ctx, r.Key(k)).Result()
	if err != nil || ttl <= 59*time.Minute || ttl > time.Hour {
		t.Fatalf("TTL of %s = %s, %v; want about an hour", r.Key(k), ttl, err)
	}
	if !strings.HasSuffix(r.Key(k), ":o-1@3") {
		t.Errorf("key %q, want it to end with the business key", r.Key(k))
	}
	other := openTestRedis(t, url, RedisOptions{})
	if _, found, err := other.Get(ctx, k); err != nil || found {
		t.Fatalf("another prefix sees the key: found %v, err %v", found, err)
	}
	if other.TTL() != DefaultRedisTTL {
		t.Errorf("default TTL %s, want %s", other.TTL(), DefaultRedisTTL)
	}
}

// A Redis cut off the network fails each call within its timeout; once it
// is back, calls succeed again.
func TestRedisUnreachableFailsFast(t *testing.T) {
	url := testenv.RedisURL(t)
	proxy := testenv.StartProxy(t, testenv.RedisHostPort(t, url))
	r := openTestRedis(t, testenv.RedisURLVia(t, url, proxy.Addr()), RedisOptions{Timeout: time.Second})
	ctx := context.Background()
	k := fsm.Key{OrderID: "o-2", Version: 1}
	if err := r.Remember(ctx, k, "h"); err != nil {
		t.Fatal(err)
	}
	proxy.Cut()
	for i := 0; i < 3; i++ {
		start := time.Now()
		if _, _, err := r.Get(ctx, k); err == nil {
			t.Fatal("Get succeeded through a cut proxy")
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("a failed Get took %s through a cut connection", d)
		}
	}
	proxy.Restore()
	deadline := time.Now().Add(5 * time.Second)
	for {
		h, found, err := r.Get(ctx, k)
		if err == nil && found && h == "h" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after Restore: %q, %v, %v", h, found, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A server that accepts connections and never answers (a black hole)
// costs a call its timeout, not more.
func TestRedisSilentServerTimesOut(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var held []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c) // never read, never answered
		}
	}()
	r := openTestRedis(t, "redis://"+ln.Addr().String()+"/0", RedisOptions{Timeout: 100 * time.Millisecond})
	start := time.Now()
	if _, _, err := r.Get(context.Background(), fsm.Key{OrderID: "o-3", Version: 1}); err == nil {
		t.Fatal("Get succeeded against a silent server")
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("a Get against a silent server took %s with a 100ms timeout", d)
	}
	ln.Close()
	<-done
	for _, c := range held {
		c.Close()
	}
}

// A URL that does not parse is refused without repeating its password.
func TestOpenRedisHidesThePassword(t *testing.T) {
	for _, u := range []string{"redis://:planted-pw@host:port/0", "redis://:planted-pw@host:6379/zero", "http://:planted-pw@host:6379"} {
		_, err := OpenRedis(u, RedisOptions{})
		if err == nil {
			t.Errorf("OpenRedis(%s) succeeded", u)
			continue
		}
		if strings.Contains(err.Error(), "planted-pw") {
			t.Errorf("OpenRedis error shows the password: %v", err)
		}
	}
}

// Forget counts, then deletes, the keys of its own prefix, among them one
// whose prefix holds a glob character, and leaves another prefix's keys.
func TestRedisForget(t *testing.T) {
	url := testenv.RedisURL(t)
	ctx := context.Background()
	r := openTestRedis(t, url, RedisOptions{KeyPrefix: uniq.Name("forget*[x]") + ":", TTL: time.Hour})
	// A prefix that the glob of r's would match if it were not escaped.
	lookalike := openTestRedis(t, url, RedisOptions{KeyPrefix: strings.Replace(r.prefix, "*", "-more-", 1), TTL: time.Hour})
	const n = 2500 // more than one SCAN and UNLINK batch
	for i := range n {
		if err := r.Remember(ctx, fsm.Key{OrderID: fmt.Sprintf("o-%d", i), Version: 1}, "h"); err != nil {
			t.Fatal(err)
		}
	}
	kept := fsm.Key{OrderID: "o-1", Version: 1}
	if err := lookalike.Remember(ctx, kept, "h"); err != nil {
		t.Fatal(err)
	}
	if got, err := r.Forget(ctx, true); err != nil || got != n {
		t.Fatalf("dry run counted %d, %v; want %d", got, err, n)
	}
	if _, found, _ := r.Get(ctx, kept); !found {
		t.Fatal("the dry run deleted a key")
	}
	if got, err := r.Forget(ctx, false); err != nil || got != n {
		t.Fatalf("Forget deleted %d, %v; want %d", got, err, n)
	}
	if _, found, _ := r.Get(ctx, kept); found {
		t.Error("a key of the prefix survived Forget")
	}
	if _, found, _ := lookalike.Get(ctx, kept); !found {
		t.Error("Forget deleted a key of another prefix")
	}
	if got, err := r.Forget(ctx, true); err != nil || got != 0 {
		t.Errorf("after Forget, %d keys, %v", got, err)
	}
}
