package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/store"
	"github.com/orderflow/orderflow/wire"
)

// poolerWork runs the store's hot path from 8 goroutines at once, each on
// orders of its own: the lookups and writes of an event's handling, three
// lifecycle events per order, and the record of their sequence numbers. It
// returns the first error.
func poolerWork(ctx context.Context, s *store.Store, prefix string) error {
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 10 {
				id := fmt.Sprintf("%s-%d-%d", prefix, g, i)
				for v, st := range []fsm.Status{fsm.Created, fsm.Paid, fsm.Shipped} {
					e := fsm.Event{EventID: fmt.Sprintf("%s-v%d", id, v+1), OrderID: id, UserID: 7, Status: st,
						Version: int64(v + 1), AmountCents: 1000, OccurredAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
					if _, _, err := s.RecordedEvent(ctx, e.Key()); err != nil {
						errs <- err
						return
					}
					if _, err := s.ApplyEvent(ctx, e, wire.Envelope{Topic: "T", MessageID: e.EventID}); err != nil {
						errs <- err
						return
					}
				}
				if _, err := s.LoadOrder(ctx, id); err != nil {
					errs <- err
					return
				}
				// The bridge's record of the three events' numbers, in one commit.
				p := fmt.Sprintf("%s-p%d", prefix, g)
				nums := []store.SeqNum{{ProducerID: p, Seq: int64(3*i + 2)}, {ProducerID: p, Seq: int64(3*i + 1)}, {ProducerID: p, Seq: int64(3*i + 3)}}
				if err := s.RecordSeqs(ctx, nums); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// Behind PgBouncer in transaction mode (one server connection, then four),
// store.Open with the URL a user writes finds the pooler and the hot path
// runs from many connections without an error; every order reaches
// SHIPPED, as the test wrote them. Directly, Open finds no pooler. With
// named statements forced (the driver's default), the same work through
// the pooler fails: the pooler is what the probe says it is.
func TestOpenThroughATransactionPooler(t *testing.T) {
	_, dsn := testenv.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	direct, err := store.Open(ctx, dsn, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	if direct.Pooler() {
		t.Fatal("a direct connection was taken for a pooler")
	}
	for _, conns := range []int{1, 4} {
		pgb := testenv.StartPgBouncer(t, conns)
		s, err := store.Open(ctx, pgb.URL(t, dsn), 16)
		if err != nil {
			t.Fatalf("open through PgBouncer (%d server connections): %v", conns, err)
		}
		if !s.Pooler() {
			t.Errorf("PgBouncer in transaction mode with %d server connections was not found", conns)
		}
		prefix := uniq.Name(fmt.Sprintf("pooler%d", conns))
		if err := poolerWork(ctx, s, prefix); err != nil {
			t.Errorf("through PgBouncer (%d server connections): %v", conns, err)
		}
		_ = s.Close()
		var shipped int
		if err := direct.DB().Raw(`SELECT count(*) FROM orders WHERE order_id LIKE ? AND status = 'SHIPPED' AND version = 3`,
			prefix+"-%").Scan(&shipped).Error; err != nil || shipped != 80 {
			t.Errorf("through PgBouncer (%d server connections): %d orders SHIPPED at v3, %v; want the 80 written", conns, shipped, err)
		}
		var ranges []struct{ Lo, Hi int64 }
		if err := direct.DB().Raw(`SELECT lo, hi FROM received_seq_ranges WHERE producer_id LIKE ? ORDER BY producer_id`,
			prefix+"-p%").Scan(&ranges).Error; err != nil || len(ranges) != 8 || slices.ContainsFunc(ranges, func(r struct{ Lo, Hi int64 }) bool { return r.Lo != 1 || r.Hi != 30 }) {
			t.Errorf("through PgBouncer (%d server connections): sequence ranges %v, %v; want 1..30 for each of the 8 producers", conns, ranges, err)
		}
	}

	// The control: named statements through the same kind of pooler.
	pgb := testenv.StartPgBouncer(t, 4)
	gdb, err := gorm.Open(postgres.Open(pgb.URL(t, dsn)+"&"+store.ExecModeParam+"=cache_statement"), &gorm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	sqlDB, _ := gdb.DB()
	defer sqlDB.Close()
	sqlDB.SetMaxOpenConns(16)
	err = poolerWork(ctx, store.New(gdb), uniq.Name("named"))
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || (pgErr.Code != "42P05" && pgErr.Code != "26000") {
		t.Errorf("named statements through PgBouncer in transaction mode: %v; want a prepared statement that exists already or not at all", err)
	}
}

// TestPoolerFoundUnderLoad: while other clients keep PgBouncer's two server
// connections busy with short transactions, every one of 24 concurrent
// OpenDB calls finds the pooler: a server connection that happens to be
// free must not make it look like PostgreSQL.
func TestPoolerFoundUnderLoad(t *testing.T) {
	_, dsn := testenv.NewDatabase(t)
	pgb := testenv.StartPgBouncer(t, 2)
	url := pgb.URL(t, dsn)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	load, stopLoad := context.WithCancel(ctx)
	var busy sync.WaitGroup
	for range 1 {
		busy.Go(func() {
			db, err := sql.Open("pgx", url+"&"+store.ExecModeParam+"=simple_protocol")
			if err != nil {
				t.Error(err)
				return
			}
			defer db.Close()
			for load.Err() == nil {
				_, _ = db.ExecContext(load, "SELECT 1")
				time.Sleep(time.Millisecond)
			}
		})
	}
	var wg sync.WaitGroup
	missed := make(chan string, 8)
	for i := range 8 {
		wg.Go(func() {
			db, pooler, err := store.OpenDB(ctx, url, nil)
			if err != nil {
				missed <- fmt.Sprintf("call %d: %v", i, err)
				return
			}
			_ = db.Close()
			if !pooler {
				missed <- fmt.Sprintf("call %d took PgBouncer for PostgreSQL", i)
			}
		})
	}
	wg.Wait()
	stopLoad()
	busy.Wait()
	close(missed)
	for m := range missed {
		t.Error(m)
	}
}
