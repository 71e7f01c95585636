package activities_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/orderflow/orderflow/activities"
	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/store"
)

const (
	// benchCallers is the number of concurrent callers.
	benchCallers = 8
	// benchChunk is how many events each workload runs before the other
	// takes its turn.
	benchChunk = 400
)

// benchLifecycle is the path every benchmark order follows: five events,
// one purchase.
var benchLifecycle = []fsm.Status{fsm.Created, fsm.Paid, fsm.Shipped, fsm.Delivered, fsm.Completed}

// runChunk runs op n times from benchCallers goroutines and returns the
// wall time. caller is the goroutine's index.
func runChunk(n int, op func(ctx context.Context, caller int) error) (time.Duration, error) {
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	start := time.Now()
	for c := range benchCallers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				if err := op(ctx, c); err != nil {
					failed.CompareAndSwap(nil, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err, _ := failed.Load().(error); err != nil {
		return 0, err
	}
	return elapsed, nil
}

// BenchmarkApplyEvent measures ApplyEvent plus AwardPoints where an event
// moves points (what OrderWorkflow does per event) with 8 concurrent
// callers, each delivering its own orders' events in lifecycle order (five
// events, one purchase per order), without and with 30% duplicate
// deliveries (a repeat of the caller's previous event).
//
// The baseline is the cheapest idempotent write there is: a transaction of
// one INSERT ... ON CONFLICT DO NOTHING, from the same 8 callers on the same
// database. The two workloads alternate in chunks of 400 events, so that
// both see the same machine load; each runs b.N events in total. Metrics:
// events/s (ApplyEvent + points), baseline-events/s, and ratio (the first
// over the second). Both warm up with one chunk first.
func BenchmarkApplyEvent(b *testing.B) {
	db, _ := testenv.NewDatabase(b)
	a := &activities.Activities{Store: store.New(db)}
	if err := db.Exec(`CREATE TABLE bench_baseline (order_id text, version bigint, PRIMARY KEY (order_id, version))`).Error; err != nil {
		b.Fatal(err)
	}
	var run atomic.Int64
	for _, dupShare := range []float64{0, 0.3} {
		b.Run(fmt.Sprintf("duplicates=%.0f%%", dupShare*100), func(b *testing.B) {
			r := run.Add(1)
			type caller struct {
				rng      *rand.Rand
				n        int // new events delivered
				last     fsm.Event
				baseline int
			}
			callers := make([]*caller, benchCallers)
			for c := range callers {
				callers[c] = &caller{rng: rand.New(rand.NewPCG(uint64(r), uint64(c)))}
			}
			apply := func(ctx context.Context, c int) error {
				s := callers[c]
				e := s.last
				if s.n == 0 || s.rng.Float64() >= dupShare {
					id := fmt.Sprintf("bench-%d-%d-%d", r, c, s.n/len(benchLifecycle))
					v := s.n % len(benchLifecycle)
					e = event(id, int64(v+1), benchLifecycle[v], 12_300)
					s.n++
					s.last = e
				}
				_, err := deliverErr(ctx, a, e)
				return err
			}
			baseline := func(ctx context.Context, c int) error {
				s := callers[c]
				id := fmt.Sprintf("base-%d-%d-%d", r, c, s.baseline/len(benchLifecycle))
				v := s.baseline%len(benchLifecycle) + 1
				s.baseline++
				return db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
					return tx.Exec(`INSERT INTO bench_baseline (order_id, version) VALUES (?, ?) ON CONFLICT DO NOTHING`, id, v).Error
				})
			}

			// Warm up: open the pool's connections and prepare both
			// workloads' statements before measuring.
			for _, op := range []func(context.Context, int) error{baseline, apply} {
				if _, err := runChunk(benchChunk, op); err != nil {
					b.Fatal(err)
				}
			}
			var tApply, tBase time.Duration
			b.ResetTimer()
			for done := 0; done < b.N; done += benchChunk {
				n := min(benchChunk, b.N-done)
				d, err := runChunk(n, baseline)
				if err != nil {
					b.Fatal(err)
				}
				tBase += d
				if d, err = runChunk(n, apply); err != nil {
					b.Fatal(err)
				}
				tApply += d
			}
			b.StopTimer()
			rate, base := float64(b.N)/tApply.Seconds(), float64(b.N)/tBase.Seconds()
			b.ReportMetric(rate, "events/s")
			b.ReportMetric(base, "baseline-events/s")
			b.ReportMetric(rate/base, "ratio")
		})
	}
}
