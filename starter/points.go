package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/internal/recovery"
	"github.com/orderflow/orderflow/store"
)

// Bounds of the seeding at start: the first start of a topic must record
// its points, and waits for the broker; later starts only look for queues
// added since, and go on without them when the broker does not answer.
const (
	firstSeedTimeout = time.Minute
	laterSeedTimeout = 5 * time.Second
)

// seedRecoveryPoints records, before the bridge consumes, the recovery
// point of every queue of the topic and of the group's retry topic that
// has none yet: the group's committed offset (docs/design.md, recovery
// points). Queues with a point keep it. When the database holds no point
// of the topic yet, a failure stops the start; otherwise it is logged (a
// queue added since stays without a point until a later start).
func seedRecoveryPoints(ctx context.Context, cfg bridgeConfig, db *store.Store, log *slog.Logger) error {
	seeded, err := db.HasRecoveryPoints(ctx, cfg.Topic)
	if err != nil {
		return err
	}
	first, timeout := !seeded, firstSeedTimeout
	if seeded {
		timeout = laterSeedTimeout
	}
	n, queues, err := seedPoints(ctx, cfg, db, timeout)
	switch {
	case err != nil && first:
		return err
	case err != nil:
		log.Warn("recovery points of queues added since the last start not recorded; the broker did not answer", "err", err)
	default:
		log.Info("recovery points", "queues", queues, "recorded_now", n)
	}
	return nil
}

// seedPoints reads the group's offsets from the broker and records the
// points of the queues that have none, within timeout.
func seedPoints(ctx context.Context, cfg bridgeConfig, db *store.Store, timeout time.Duration) (recorded int64, queues int, err error) {
	rw, err := mq.NewRewinder(cfg.RocketMQNamesrv, cfg.RocketMQAccessKey, cfg.RocketMQSecretKey, cfg.RocketMQTLSConf)
	if err != nil {
		return 0, 0, fmt.Errorf("recovery points: %w", err)
	}
	defer rw.Close()
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	qs, err := recovery.SeedPoints(sctx, rw, cfg.ConsumerGroup, cfg.Topic)
	if err != nil {
		return 0, 0, err
	}
	n, err := db.SeedRecoveryPoints(sctx, qs)
	if err != nil {
		return n, len(qs), fmt.Errorf("recovery points: %w", err)
	}
	return n, len(qs), nil
}

// pointsEvery is how often the bridge moves the recovery points over the
// receipts recorded since.
const pointsEvery = 30 * time.Second

// movePoints moves the recovery points every pointsEvery until the
// returned function is called (which waits for a move under way). A
// failure is logged and tried again at the next tick: the receipts wait.
func movePoints(db *store.Store, log *slog.Logger) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(pointsEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			mctx, mcancel := context.WithTimeout(ctx, pointsEvery)
			if _, err := db.MoveRecoveryPoints(mctx); err != nil && ctx.Err() == nil {
				log.Warn("recovery points not moved; trying again later", "err", err)
			}
			mcancel()
		}
	}()
	return func() { cancel(); <-done }
}
