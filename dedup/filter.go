// Package dedup is the bridge's duplicate filter: seed 004's three tiers in
// front of Temporal, so that a message whose event was already delivered is
// acked without another SignalWithStart, and in front of them a table of
// the events this process is delivering right now.
//
//  0. In flight: the (business key, content hash) pairs whose delivery this
//     process has begun and not finished, one per key. A message carrying
//     a pair in flight follows that delivery: it waits for its outcome and
//     is a duplicate only when the delivery succeeded, that is when the
//     pair is durably signalled; otherwise it is delivered itself.
//  1. Bloom: an in-process Bloom filter of the (business key, content hash)
//     pairs this bridge knows were durably signalled or recorded. It never
//     forgets a recent pair but may claim one it never saw (a false
//     positive), so a hit is only a "maybe".
//  2. Redis, shared by all bridges: business key → content hash of an event
//     durably signalled, with a TTL longer than the broker's redelivery
//     horizon. A hit confirms.
//  3. The ledger, order_events in PostgreSQL (store.RecordedEvent): the
//     authority. A row with the same content hash confirms.
//
// Check asks tiers 1 to 3 and says Duplicate only when Redis or the ledger
// confirms that the same business key with the same content hash was
// durably signalled or recorded; a Bloom hit alone never drops a message,
// and a different content hash is a conflict that goes on to the workflow,
// which parks it. Redis is asked for every message (another bridge may
// have delivered it); the ledger, a database query, only when the Bloom
// filter says maybe and Redis did not confirm. Without a confirmation the
// message is signalled, and the workflow and the ledger absorb whatever
// duplicate got through: the filter only saves work, it is never needed
// for correctness. Every failure of Redis or of the ledger (an error, a
// timeout) counts as "not confirmed".
//
// Admit asks the in-flight table, then Check, and enters an event found
// new in the table (a Delivery its caller ends with Done). The in-flight
// tier keeps the rule: a follower is acked without a signal only once the
// delivery it followed is durably signalled, the same confirmation Redis
// gives for an earlier one; a conflicting content in flight goes on to the
// workflow.
//
// Delivered records a pair after its SignalWithStart succeeded: in the
// Bloom filter, and in Redis unless the key already has a value there.
package dedup

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/store"
)

// Tiers, the values of the "tier" label.
const (
	TierInFlight = "inflight"
	TierBloom    = "bloom"
	TierRedis    = "redis"
	TierLedger   = "ledger"
)

// Lookup results, the values of the "result" label.
const (
	// ResultHit: Bloom says maybe; Redis or the ledger holds the key with
	// the same content hash; the in-flight table holds a delivery of the
	// key with the same content hash.
	ResultHit = "hit"
	// ResultMiss: the tier does not hold the key.
	ResultMiss = "miss"
	// ResultConflict: Redis, the ledger or the in-flight table holds the
	// key with another content hash.
	ResultConflict = "conflict"
	// ResultError: the lookup failed or timed out.
	ResultError = "error"
	// ResultSkipped: Redis failed a moment ago and is not asked until its
	// cool-down has passed.
	ResultSkipped = "skipped"
)

// Cache is the shared middle tier (Redis): business key → content hash of
// an event durably signalled.
type Cache interface {
	// Get returns the content hash stored for k; found is false when there
	// is none.
	Get(ctx context.Context, k fsm.Key) (hash string, found bool, err error)
	// Remember stores hash for k unless k has a value already.
	Remember(ctx context.Context, k fsm.Key, hash string) error
}

// Ledger is the authority: what order_events recorded for a business key.
// *store.Store is one.
type Ledger interface {
	RecordedEvent(ctx context.Context, k fsm.Key) (store.Recorded, bool, error)
}

// Default bounds of the lookups.
const (
	DefaultCacheTimeout  = 100 * time.Millisecond
	DefaultCacheCooldown = time.Second
	DefaultLedgerTimeout = time.Second
)

// Options configure a Filter. Each tier is optional: a nil one is left out.
type Options struct {
	Bloom  *Bloom
	Cache  Cache
	Ledger Ledger
	// CacheTimeout bounds one Redis call (default DefaultCacheTimeout).
	CacheTimeout time.Duration
	// CacheCooldown is how long Redis is left alone after a failed call
	// (default DefaultCacheCooldown), so that an unreachable Redis costs
	// one timeout per cool-down rather than one per message.
	CacheCooldown time.Duration
	// LedgerTimeout bounds one ledger lookup (default DefaultLedgerTimeout).
	LedgerTimeout time.Duration
	// Metrics count lookups; nil counts into unregistered metrics.
	Metrics *Metrics
	// Log receives Redis's comings and goings; nil discards them.
	Log *slog.Logger
}

// Verdict is the filter's answer for one event.
type Verdict struct {
	// Duplicate is true when Tier confirmed that the event's business key
	// with its content hash was durably signalled (redis) or recorded
	// (ledger): the message may be acked without a signal.
	Duplicate bool
	// Conflict is true when Tier holds the business key with another
	// content hash: the event goes on to the workflow, which parks it.
	Conflict bool
	// Tier is the tier that confirmed or saw the conflict, or inflight for
	// an event in flight (Admission.Follow); empty otherwise.
	Tier string
}

// Filter is the duplicate filter. Make one with New; it is safe for
// concurrent use.
type Filter struct {
	o       Options
	m       *Metrics
	log     *slog.Logger
	cacheUp breaker
	flights inflight
}

// Admission is the filter's answer for one event, the in-flight table's
// included.
type Admission struct {
	// Verdict is the durable tiers' verdict (Bloom, Redis, ledger); with
	// Follow set it is Verdict{Tier: TierInFlight}. A key in flight with
	// another content hash that no durable tier saw is a conflict of tier
	// inflight.
	Verdict
	// Follow, when set, is this process's delivery of the same business key
	// with the same content hash, under way. The caller waits for its
	// outcome (Follow.Wait), never before its own deliveries are done or
	// at least under way, and acks the message without a signal only when
	// that outcome is true; otherwise it delivers the event itself.
	Follow *Delivery
	// Lead, when set, is the caller's own entry in the in-flight table: the
	// event is to be delivered (neither Duplicate nor Conflict), and the
	// caller must call Lead.Done with the outcome of its delivery.
	Lead *Delivery
}

// Admit is Check preceded and followed by the in-flight table of this
// process's deliveries. When a delivery of the same business key with the
// same content hash is under way, it answers Follow and asks no other
// tier. Otherwise it asks Check, and enters an event found new in the table
// (Lead) unless a delivery of its key entered it meanwhile (then Follow, or
// a conflict). The table holds deliveries only: a duplicate or a conflict
// the durable tiers saw is not entered, and a copy of a conflict goes on
// to the workflow like the conflict itself. With ctx done it asks nothing,
// confirms nothing and enters nothing.
func (f *Filter) Admit(ctx context.Context, e fsm.Event) Admission {
	if ctx.Err() != nil {
		return Admission{}
	}
	k, hash := e.Key(), e.ContentHash()
	follow, other := f.flights.find(k, hash)
	if follow != nil {
		f.m.lookup(TierInFlight, ResultHit)
		return Admission{Verdict: Verdict{Tier: TierInFlight}, Follow: follow}
	}
	v := f.Check(ctx, e)
	if other == nil && !v.Duplicate && !v.Conflict {
		var own *Delivery
		if own, follow, other = f.flights.claim(k, hash); own != nil {
			f.m.lookup(TierInFlight, ResultMiss)
			return Admission{Verdict: v, Lead: own}
		}
		if follow != nil {
			// Entered while the durable tiers were asked.
			f.m.lookup(TierInFlight, ResultHit)
			return Admission{Verdict: Verdict{Tier: TierInFlight}, Follow: follow}
		}
	}
	if other == nil {
		f.m.lookup(TierInFlight, ResultMiss)
		return Admission{Verdict: v}
	}
	f.m.lookup(TierInFlight, ResultConflict)
	if !v.Duplicate && !v.Conflict {
		v = Verdict{Conflict: true, Tier: TierInFlight}
	}
	return Admission{Verdict: v}
}

// New returns a Filter with the tiers o names.
func New(o Options) *Filter {
	if o.CacheTimeout <= 0 {
		o.CacheTimeout = DefaultCacheTimeout
	}
	if o.CacheCooldown <= 0 {
		o.CacheCooldown = DefaultCacheCooldown
	}
	if o.LedgerTimeout <= 0 {
		o.LedgerTimeout = DefaultLedgerTimeout
	}
	m := o.Metrics
	if m == nil {
		m = newMetrics()
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Filter{o: o, m: m, log: log, cacheUp: breaker{cooldown: o.CacheCooldown}}
}

// Check asks the tiers whether e was already durably signalled or recorded
// with the same content. It never fails: a tier that cannot answer counts
// as not confirming. With ctx done (the bridge is stopping) it asks
// nothing and confirms nothing.
func (f *Filter) Check(ctx context.Context, e fsm.Event) Verdict {
	if ctx.Err() != nil {
		return Verdict{}
	}
	k, hash := e.Key(), e.ContentHash()
	maybe := false
	if f.o.Bloom != nil {
		maybe = f.o.Bloom.Test(k, hash)
		f.m.lookup(TierBloom, hitOrMiss(maybe))
	}
	var v Verdict
	if f.o.Cache != nil {
		v = f.askCache(ctx, k, hash)
		if v.Duplicate {
			f.remember(k, hash)
			return v
		}
	}
	if maybe && f.o.Ledger != nil {
		lv := f.askLedger(ctx, k, hash)
		if lv.Duplicate {
			f.remember(k, hash)
			f.rememberShared(ctx, k, hash)
			return lv
		}
		if lv.Conflict {
			v = lv
		}
	}
	if maybe {
		f.m.bloomFalsePositives.Inc()
	}
	return v
}

// Delivered records that e was durably signalled: in the Bloom filter and,
// unless the key has a value there already, in Redis. Call it only after
// SignalWithStart succeeded. It outlives the cancellation of ctx (the
// signal is in, so the record is worth keeping) but not its timeout.
func (f *Filter) Delivered(ctx context.Context, e fsm.Event) {
	k, hash := e.Key(), e.ContentHash()
	f.remember(k, hash)
	f.rememberShared(context.WithoutCancel(ctx), k, hash)
}

// remember adds the pair to the Bloom filter.
func (f *Filter) remember(k fsm.Key, hash string) {
	if f.o.Bloom != nil {
		f.o.Bloom.Add(k, hash)
	}
}

// rememberShared stores the pair in Redis, unless Redis is cooling down.
func (f *Filter) rememberShared(ctx context.Context, k fsm.Key, hash string) {
	if f.o.Cache == nil || f.cacheUp.cooling(time.Now()) {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, f.o.CacheTimeout)
	defer cancel()
	if err := f.o.Cache.Remember(ctx, k, hash); err != nil {
		f.m.redisErrors.WithLabelValues(opSet).Inc()
		f.cacheFailed(k, err)
		return
	}
	f.cacheAnswered()
}

func (f *Filter) askCache(parent context.Context, k fsm.Key, hash string) Verdict {
	if f.cacheUp.cooling(time.Now()) {
		f.m.lookup(TierRedis, ResultSkipped)
		return Verdict{}
	}
	ctx, cancel := context.WithTimeout(parent, f.o.CacheTimeout)
	defer cancel()
	got, found, err := f.o.Cache.Get(ctx, k)
	if err != nil && parent.Err() != nil {
		return Verdict{} // the caller gave up, not Redis
	}
	if err != nil {
		f.m.lookup(TierRedis, ResultError)
		f.m.redisErrors.WithLabelValues(opGet).Inc()
		f.cacheFailed(k, err)
		return Verdict{}
	}
	f.cacheAnswered()
	return f.judge(TierRedis, found, got == hash)
}

func (f *Filter) askLedger(ctx context.Context, k fsm.Key, hash string) Verdict {
	ctx, cancel := context.WithTimeout(ctx, f.o.LedgerTimeout)
	defer cancel()
	r, found, err := f.o.Ledger.RecordedEvent(ctx, k)
	if err != nil {
		f.m.lookup(TierLedger, ResultError)
		f.log.Debug("duplicate filter: ledger lookup failed; the event is signalled", "key", k.String(), "err", err)
		return Verdict{}
	}
	return f.judge(TierLedger, found, r.ContentHash == hash)
}

// judge turns a tier's answer into a verdict and counts it.
func (f *Filter) judge(tier string, found, same bool) Verdict {
	switch {
	case !found:
		f.m.lookup(tier, ResultMiss)
		return Verdict{}
	case same:
		f.m.lookup(tier, ResultHit)
		return Verdict{Duplicate: true, Tier: tier}
	default:
		f.m.lookup(tier, ResultConflict)
		return Verdict{Conflict: true, Tier: tier}
	}
}

// cacheFailed starts Redis's cool-down, logging the first failure of a
// series.
func (f *Filter) cacheFailed(k fsm.Key, err error) {
	if f.cacheUp.trip(time.Now()) {
		f.log.Warn("duplicate filter: Redis failed; it is left alone for the cool-down, and the ledger answers for Bloom hits",
			"key", k.String(), "cooldown", f.o.CacheCooldown.String(), "err", err)
	}
}

// cacheAnswered ends a series of failures.
func (f *Filter) cacheAnswered() {
	if f.cacheUp.reset() {
		f.log.Info("duplicate filter: Redis answers again")
	}
}

func hitOrMiss(hit bool) string {
	if hit {
		return ResultHit
	}
	return ResultMiss
}

// breaker remembers when a tier last failed, to leave it alone for a
// cool-down.
type breaker struct {
	cooldown time.Duration
	// until is the end of the cool-down in Unix nanoseconds; 0 when the
	// tier answered last.
	until atomic.Int64
}

// cooling reports whether now is within the cool-down.
func (b *breaker) cooling(now time.Time) bool { return now.UnixNano() < b.until.Load() }

// trip starts a cool-down; it reports whether the tier was answering
// before (the first failure of a series).
func (b *breaker) trip(now time.Time) bool {
	return b.until.Swap(now.Add(b.cooldown).UnixNano()) == 0
}

// reset ends a series of failures; it reports whether there was one.
func (b *breaker) reset() bool {
	if b.until.Load() == 0 {
		return false
	}
	return b.until.Swap(0) != 0
}
