package obs

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orderflow/orderflow/internal/testenv"
)

// TestScrapesTakeNoConnection: 200 concurrent scrapes of /metrics and
// /readyz, while a handler runs statements on the same small pool (the
// bridge's concurrency + 2), take no connection from it: the readiness
// check (a ping of the real PostgreSQL) runs in the background, not per
// request, the handler never waits for a connection, and requests beyond the
// in-flight cap are answered 503.
func TestScrapesTakeNoConnection(t *testing.T) {
	gdb, _ := testenv.NewDatabase(t)
	db, err := gdb.DB()
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(3)
	db.SetMaxIdleConns(3)

	var pings atomic.Int64
	s, err := NewServer("127.0.0.1:0", prometheus.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)),
		Check{Name: "postgres", Check: func(ctx context.Context) error {
			pings.Add(1)
			return db.PingContext(ctx)
		}})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	defer func() { _ = s.Shutdown(context.Background()) }()
	base := "http://" + s.Addr()
	waitReady(t, base)

	// The message handler: one statement at a time on the pool.
	ctx, cancel := context.WithCancel(context.Background())
	var handler sync.WaitGroup
	var statements atomic.Int64
	handler.Add(1)
	go func() {
		defer handler.Done()
		for ctx.Err() == nil {
			if _, err := db.ExecContext(ctx, "SELECT pg_sleep(0.005)"); err == nil {
				statements.Add(1)
			}
		}
	}()
	time.Sleep(50 * time.Millisecond)
	waitsBefore, pingsBefore := db.Stats().WaitCount, pings.Load()
	var maxInUse atomic.Int64
	sampleDone := make(chan struct{})
	go func() {
		defer close(sampleDone)
		for ctx.Err() == nil {
			if n := int64(db.Stats().InUse); n > maxInUse.Load() {
				maxInUse.Store(n)
			}
			time.Sleep(time.Millisecond)
		}
	}()

	codes := scrape(t, base, 200)
	cancel()
	handler.Wait()
	<-sampleDone

	if waits := db.Stats().WaitCount - waitsBefore; waits != 0 {
		t.Errorf("the handler waited %d times for a connection during the scrapes", waits)
	}
	// One background run may fall in the scrapes' window (5 s interval).
	if n := pings.Load() - pingsBefore; n > 1 {
		t.Errorf("200 scrapes ran the database check %d times, want at most 1 (background)", n)
	}
	if m := maxInUse.Load(); m > 2 {
		t.Errorf("%d connections in use during the scrapes, want at most 2 (handler + background check)", m)
	}
	if codes[http.StatusOK] == 0 || codes[http.StatusServiceUnavailable] == 0 || codes[http.StatusOK]+codes[http.StatusServiceUnavailable] != 200 {
		t.Errorf("answers to 200 concurrent scrapes = %v, want some 200 and some 503 (in-flight cap), nothing else", codes)
	}
	if statements.Load() == 0 {
		t.Error("the handler ran no statement")
	}
	t.Logf("answers %v, handler statements %d, max connections in use %d", codes, statements.Load(), maxInUse.Load())
}

// waitReady polls /readyz until it answers 200.
func waitReady(t *testing.T, base string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if code, _ := get(t, base+"/readyz"); code == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("/readyz never answered 200")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// scrape sends n concurrent requests, alternately to /metrics and /readyz,
// and counts the answers by status code.
func scrape(t *testing.T, base string, n int) map[int]int {
	t.Helper()
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		path := "/metrics"
		if i%2 == 1 {
			path = "/readyz"
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			resp, err := http.Get(base + path)
			code := -1
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				code = resp.StatusCode
			}
			mu.Lock()
			codes[code]++
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	return codes
}
