package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/errclass"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/store"
	"github.com/orderflow/orderflow/wire"
)

// loseEveryRace makes every write of order id's row a no-op (a trigger
// that skips it), as if another writer moved the order between each read
// and write of ApplyEvent, and returns a count of the writes tried.
func loseEveryRace(t *testing.T, db *gorm.DB, id string) (attempts func() int) {
	t.Helper()
	for _, q := range []string{
		`CREATE TABLE lost_races (n integer NOT NULL)`,
		`INSERT INTO lost_races VALUES (0)`,
		`CREATE FUNCTION lose_race() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN UPDATE lost_races SET n = n + 1; RETURN NULL; END $$`,
		fmt.Sprintf(`CREATE TRIGGER lose_race BEFORE INSERT OR UPDATE ON orders FOR EACH ROW
			WHEN (NEW.order_id = '%s') EXECUTE FUNCTION lose_race()`, id),
	} {
		if err := db.Exec(q).Error; err != nil {
			t.Fatal(err)
		}
	}
	return func() int {
		t.Helper()
		var n int
		if err := db.Raw(`SELECT n FROM lost_races`).Scan(&n).Error; err != nil {
			t.Fatal(err)
		}
		return n
	}
}

// rowsOf counts order id's rows in orders and order_events.
func rowsOf(t *testing.T, db *gorm.DB, id string) (orders, events int64) {
	t.Helper()
	if err := db.Raw(`SELECT (SELECT count(*) FROM orders WHERE order_id = ?), (SELECT count(*) FROM order_events WHERE order_id = ?)`,
		id, id).Row().Scan(&orders, &events); err != nil {
		t.Fatal(err)
	}
	return orders, events
}

// An event whose order another writer moves before every one of its writes
// is tried 50 times, then given up with a transient error (the caller
// retries later; the input is fine), having written nothing.
func TestApplyEventGivesUpAfterItsRetryBudget(t *testing.T) {
	s := newStore(t)
	id := uniq.Name("race")
	attempts := loseEveryRace(t, s.DB(), id)
	e := fsm.Event{EventID: "e-1", OrderID: id, UserID: 3, Status: fsm.Paid, Version: 2, AmountCents: 500,
		OccurredAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	_, err := s.ApplyEvent(context.Background(), e, wire.Envelope{})
	if err == nil || !strings.Contains(err.Error(), "changed concurrently 50 times in a row") {
		t.Fatalf("ApplyEvent = %v, want it to give up after 50 attempts", err)
	}
	if errors.Is(err, store.ErrInvalid) || errclass.Of(err) != errclass.Transient {
		t.Errorf("ApplyEvent = %v: class %s, want transient and not invalid", err, errclass.Of(err))
	}
	if n := attempts(); n != 50 {
		t.Errorf("%d writes tried, want 50", n)
	}
	if orders, events := rowsOf(t, s.DB(), id); orders != 0 || events != 0 {
		t.Errorf("%d orders and %d order_events rows written, want none", orders, events)
	}
}

// A cancellation between two attempts ends the retries at once: the error
// says the context was cancelled, after the attempt under way.
func TestApplyEventStopsRetryingWhenCancelled(t *testing.T) {
	s := newStore(t)
	id := uniq.Name("race")
	attempts := loseEveryRace(t, s.DB(), id)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Cancel once the third write has been tried (and lost).
	writes := 0
	if err := s.DB().Callback().Raw().After("gorm:raw").Register("test:cancel_after_third_write", func(tx *gorm.DB) {
		if strings.Contains(tx.Statement.SQL.String(), "INSERT INTO orders") {
			if writes++; writes == 3 {
				cancel()
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	e := fsm.Event{EventID: "e-1", OrderID: id, UserID: 3, Status: fsm.Created, Version: 1, AmountCents: 500,
		OccurredAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	_, err := s.ApplyEvent(ctx, e, wire.Envelope{})
	if !errors.Is(err, context.Canceled) || errclass.Of(err) != errclass.Transient {
		t.Fatalf("ApplyEvent = %v, want a transient error wrapping context.Canceled", err)
	}
	if n := attempts(); n != 3 {
		t.Errorf("%d writes tried, want 3: the retries went on after the cancellation", n)
	}
	if orders, events := rowsOf(t, s.DB(), id); orders != 0 || events != 0 {
		t.Errorf("%d orders and %d order_events rows written, want none", orders, events)
	}
}
