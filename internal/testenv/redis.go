package testenv

import (
	"context"
	"net/url"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/orderflow/orderflow/config"
)

// RedisURL returns the Redis server the tests use — REDIS_URL, or config's
// default (the local stack's, redis://127.0.0.1:6379/0) — after checking
// that it answers PING; otherwise the test fails, telling the user to run
// `make up`. Tests share the server and keep apart by key prefixes of their
// own (uniq.Name).
func RedisURL(t testing.TB) string {
	t.Helper()
	SkipShort(t, "the Redis server")
	raw := config.FromEnv().RedisURL
	if raw == "" {
		raw = config.DefaultRedisURL
	}
	opts, err := redis.ParseURL(raw)
	if err != nil {
		t.Fatalf("testenv: REDIS_URL %s: %v", config.Redact(raw), err)
	}
	opts.MaxRetries = -1
	c := redis.NewClient(opts)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), serviceWait)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("testenv: Redis at %s does not answer PING: %v; %s", config.Redact(raw), err, runMakeUp)
	}
	return raw
}

// RedisHostPort is the host:port of a Redis URL, for a Proxy in front of it.
func RedisHostPort(t testing.TB, rawURL string) string {
	t.Helper()
	opts, err := redis.ParseURL(rawURL)
	if err != nil {
		t.Fatalf("testenv: Redis URL %s: %v", config.Redact(rawURL), err)
	}
	return opts.Addr
}

// RedisURLVia is rawURL with its host and port replaced by hostPort (a
// Proxy's address), keeping the password, the database and the scheme.
func RedisURLVia(t testing.TB, rawURL, hostPort string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatalf("testenv: Redis URL %s does not parse", config.Redact(rawURL))
	}
	u.Host = hostPort
	return u.String()
}
