package dedup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/orderflow/orderflow/fsm"
)

// DefaultRedisTTL is how long Redis keeps a business key: 7 days. The
// broker redelivers a message the bridge handed back up to 100,000 times,
// at most a minute apart (starter's -max-retry-delay-level 5), so a copy
// of an event may come back for as long as an outage lasts; a week covers
// any outage an operator lets run. A key that expired or was evicted only
// costs a signal: the TTL bounds memory, never correctness.
const DefaultRedisTTL = 7 * 24 * time.Hour

// RedisOptions configure the Redis tier.
type RedisOptions struct {
	// KeyPrefix starts every key, so that deployments sharing a server
	// keep apart ("orderflow:dedup:<namespace>:", say).
	KeyPrefix string
	// TTL is how long a key lives (default DefaultRedisTTL).
	TTL time.Duration
	// Timeout bounds dialling and each read and write (default
	// DefaultCacheTimeout).
	Timeout time.Duration
	// PoolSize is the most connections kept (0: go-redis's default).
	PoolSize int
}

// Redis is the shared tier on a Redis server: one string key per business
// key, KeyPrefix + "<order_id>@<version>", holding the content hash of the
// event first signalled under it, with a TTL. It is a Cache.
type Redis struct {
	c      *redis.Client
	prefix string
	ttl    time.Duration
}

// OpenRedis returns the tier on the server rawURL names (redis://, or
// rediss:// for TLS; a password in the URL is used and never shown). It
// does not dial: the first call does, and a failed call is retried by
// nobody (the filter moves on). Close it when done.
func OpenRedis(rawURL string, o RedisOptions) (*Redis, error) {
	opts, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	if o.TTL <= 0 {
		o.TTL = DefaultRedisTTL
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultCacheTimeout
	}
	// One attempt per call, bounded: the filter falls through on failure.
	opts.MaxRetries = -1
	opts.DialerRetries = 1
	opts.DialTimeout = o.Timeout
	opts.ReadTimeout = o.Timeout
	opts.WriteTimeout = o.Timeout
	opts.PoolTimeout = o.Timeout
	opts.ContextTimeoutEnabled = true
	opts.DisableIdentity = true
	opts.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	if o.PoolSize > 0 {
		opts.PoolSize = o.PoolSize
	}
	return &Redis{c: redis.NewClient(opts), prefix: o.KeyPrefix, ttl: o.TTL}, nil
}

// CheckRedisURL returns an error, without the URL's password, when rawURL
// is not a Redis URL OpenRedis takes.
func CheckRedisURL(rawURL string) error {
	_, err := parseURL(rawURL)
	return err
}

func parseURL(rawURL string) (*redis.Options, error) {
	if _, err := url.Parse(rawURL); err != nil {
		// url.Error repeats the whole URL, password included.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("redis URL: %w", err)
	}
	opts, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("redis URL: %w", err)
	}
	return opts, nil
}

// Addr is the server's host:port (no credentials), for logs.
func (r *Redis) Addr() string { return r.c.Options().Addr }

// TTL is how long a key lives.
func (r *Redis) TTL() time.Duration { return r.ttl }

// Key is the Redis key of a business key.
func (r *Redis) Key(k fsm.Key) string { return r.prefix + k.String() }

// Get returns the content hash stored for k.
func (r *Redis) Get(ctx context.Context, k fsm.Key) (string, bool, error) {
	h, err := r.c.Get(ctx, r.Key(k)).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("redis GET %s: %w", k, err)
	}
	return h, true, nil
}

// Remember stores hash for k with the TTL unless k has a value already
// (SET NX): the first content signalled under a key stays, a conflicting
// copy does not replace it.
func (r *Redis) Remember(ctx context.Context, k fsm.Key, hash string) error {
	if err := r.c.SetNX(ctx, r.Key(k), hash, r.ttl).Err(); err != nil {
		return fmt.Errorf("redis SET NX %s: %w", k, err)
	}
	return nil
}

// KeyPrefix is the prefix of the tier's keys for the Temporal namespace
// namespace: deployments sharing a Redis server keep apart by namespace.
func KeyPrefix(namespace string) string { return "orderflow:dedup:" + namespace + ":" }

// forgetBatch is how many keys one SCAN step asks for and one UNLINK
// deletes.
const forgetBatch = 1000

// Forget deletes every key of the tier (all keys under its KeyPrefix) and
// returns how many it deleted, or with dryRun only counts them. After a
// database restore, the keys of events signalled since the backup would
// confirm, as duplicates, the redelivered messages the database lost.
// Keys written meanwhile by running bridges may be deleted too: that only
// costs a lookup in the ledger.
func (r *Redis) Forget(ctx context.Context, dryRun bool) (int64, error) {
	var n int64
	iter := r.c.Scan(ctx, 0, globEscape(r.prefix)+"*", forgetBatch).Iterator()
	batch := make([]string, 0, forgetBatch)
	flush := func() error {
		if len(batch) == 0 || dryRun {
			n += int64(len(batch))
			batch = batch[:0]
			return nil
		}
		deleted, err := r.c.Unlink(ctx, batch...).Result()
		n += deleted
		batch = batch[:0]
		if err != nil {
			return fmt.Errorf("redis UNLINK: %w", err)
		}
		return nil
	}
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == forgetBatch {
			if err := flush(); err != nil {
				return n, err
			}
		}
	}
	if err := iter.Err(); err != nil {
		return n, fmt.Errorf("redis SCAN %s*: %w", r.prefix, err)
	}
	return n, flush()
}

// globEscape escapes the characters that Redis's MATCH patterns treat
// specially.
func globEscape(s string) string {
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`*?[]\^`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// Ping checks that the server answers.
func (r *Redis) Ping(ctx context.Context) error { return r.c.Ping(ctx).Err() }

// Close closes the connections.
func (r *Redis) Close() error { return r.c.Close() }

// UseSlog sends go-redis's own log lines (a failed dial, pool trouble) to
// log at debug level: the filter reports Redis failing and answering again
// itself, once each, and counts every failed call; go-redis would repeat a
// line per failed dial while Redis is away. It is process-wide.
func UseSlog(log *slog.Logger) { redis.SetLogger(slogPrintf{log}) }

type slogPrintf struct{ log *slog.Logger }

func (l slogPrintf) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, "redis client: "+fmt.Sprintf(format, v...))
}
