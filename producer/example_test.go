package producer_test

import (
	"context"
	"errors"
	"time"

	"gorm.io/gorm"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/producer"
)

var errOrderChanged = errors.New("the order changed meanwhile")

// An upstream order service pays an order: its own order row and the
// order's event commit together, or neither (docs/design.md §2.8 points here).
func ExampleNewTx() {
	ctx := context.Background()
	var db *gorm.DB // the service's own PostgreSQL database
	instance, eventID := "a", "e-1"
	_ = func() error {
		// At start-up: producer_sequences and producer_outbox, idempotent.
		if err := producer.CreateSchema(ctx, db); err != nil {
			return err
		}
		p, err := producer.NewTx(ctx, db, producer.Config{
			NameServer: "127.0.0.1:9876",
			ProducerID: "checkout-" + instance, // one sequence per instance, stable across restarts
			Group:      "checkout",             // all instances; they answer check-backs for each other
		})
		if err != nil {
			return err
		}
		defer p.Close()

		e := fsm.Event{EventID: eventID, OrderID: "o-42", UserID: 7, Status: fsm.Paid,
			Version: 2, AmountCents: 12990, OccurredAt: time.Now()}
		_, err = p.Send(ctx, e, func(tx *gorm.DB) error {
			res := tx.Exec(`UPDATE shop_orders SET status = 'PAID', version = 2
				WHERE id = 'o-42' AND version = 1`)
			if res.Error == nil && res.RowsAffected == 0 {
				return errOrderChanged // rolls back; nothing is published
			}
			return res.Error
		})
		return err
	}
}
