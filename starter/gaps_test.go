package main

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orderflow/orderflow/config"
	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/internal/obs"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/message"
	"github.com/orderflow/orderflow/store"
	"github.com/orderflow/orderflow/wire"
)

// TestGapsTwoBridgesShuffled: two bridges of one consumer group record the
// sequence numbers of a producer whose messages arrive shuffled over four
// queues, some twice, one only in an invalid message, some never. The
// holes are exactly the numbers never sent in a valid event (an invalid
// message is parked and records nothing), the metrics count them once they
// are open longer than the window, and late arrivals (the invalid one's
// valid copy among them) close them.
func TestGapsTwoBridgesShuffled(t *testing.T) {
	namesrv := testenv.RocketMQNamesrv(t)
	db, dsn := testenv.NewDatabase(t)
	st := store.New(db)
	topic, group := uniq.Name("gaps"), uniq.Name("gaps-g")
	testenv.CreateTopic(t, topic, 4)
	testenv.CreateTopic(t, "%RETRY%"+group, 1)

	c := config.Defaults()
	c.DatabaseURL, c.RocketMQNamesrv, c.Topic, c.ConsumerGroup = dsn, namesrv, topic, group
	c.GapWindow = 2 * time.Second
	cfg := bridgeConfig{Config: c, MetricsAddr: "127.0.0.1:0", Concurrency: 4, BatchSize: 1,
		GracePeriod: 10 * time.Second, RetryFor: 2 * time.Second, AttemptTimeout: time.Second,
		MaxRetryDelayLevel: 1, Workflow: testParams}
	// No Temporal: this test is about the numbers, so delivery succeeds at once.
	deliver := func(context.Context, fsm.Event, wire.Envelope) error { return nil }
	var bridges []*Bridge
	for i := 0; i < 2; i++ {
		log := obs.NewLogger(testWriter(t), slog.LevelWarn, "bridge")
		b, err := newBridge(cfg, bridgeDeps{Log: log, Registry: prometheus.NewRegistry(), Deliver: deliver,
			Park: storePark(st), Record: storeRecord(st.NewSeqRecorder(cfg.AttemptTimeout, cfg.SeqLinger), log), Gaps: storeGaps(st, cfg.GapWindow)})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Stop() })
		bridges = append(bridges, b)
	}
	p, err := mq.NewProducer(namesrv)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	pid := uniq.Name("gaps-producer")
	// The two share the queues once each has handled a message: publish
	// unnumbered events of other orders until both counters move.
	signalled := `orderflow_bridge_messages_total{result="signalled"}`
	warm := make([]float64, len(bridges))
	testenv.WaitFor(t, 90*time.Second, func() error {
		if _, err := p.PublishEvent(context.Background(), topic, fsm.Event{EventID: uniq.Name("warm"), OrderID: uniq.Name(pid + "-warm"),
			UserID: 1, Status: fsm.Created, Version: 1, AmountCents: 100, OccurredAt: time.Now().UTC()}); err != nil {
			return err
		}
		for i, b := range bridges {
			if warm[i] = metric(t, b.Addr(), signalled); warm[i] <= 0 {
				return fmt.Errorf("bridge %d has handled no message yet", i)
			}
		}
		return nil
	})
	const n = 80
	lost := map[int64]bool{7: true, 20: true, 21: true, 22: true, 45: true}
	badSeq := int64(50)
	send := func(seq int64, valid bool) {
		t.Helper()
		body, err := message.Encode(fsm.Event{EventID: fmt.Sprintf("e-%d", seq), OrderID: fmt.Sprintf("%s-%d", pid, seq),
			UserID: 1, Status: fsm.Created, Version: 1, AmountCents: 100, OccurredAt: time.Now().UTC(),
			ProducerID: pid, Seq: seq})
		if err != nil {
			t.Fatal(err)
		}
		m, err := mq.EventMessage(topic, body)
		if err != nil {
			t.Fatal(err)
		}
		if !valid { // still numbered, but invalid: parked, its number not recorded
			m.Body = []byte(fmt.Sprintf(`{"event_id":"e-%d","order_id":"%s-%d","user_id":1,"status":"REFUNDED","version":1,"amount_cents":100,"occurred_at":"2025-01-01T00:00:00Z","producer_id":%q,"seq":%d}`,
				seq, pid, seq, pid, seq))
		}
		if _, err := p.Publish(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	var seqs []int64
	for s := int64(1); s <= n; s++ {
		if !lost[s] {
			seqs = append(seqs, s)
			if s%6 == 0 {
				seqs = append(seqs, s) // a producer retry
			}
		}
	}
	rand.Shuffle(len(seqs), func(a, b int) { seqs[a], seqs[b] = seqs[b], seqs[a] })
	for _, s := range seqs {
		send(s, s != badSeq)
	}

	// The holes are right once every number sent valid arrived once; a
	// producer retry's second copy may still be on its way, so the count
	// is waited for too. The invalid message's number is a hole.
	waitGaps(t, st, pid, n, int64(len(seqs)-1), [][2]int64{{7, 7}, {20, 22}, {45, 45}, {badSeq, badSeq}})
	for i, b := range bridges {
		if v := metric(t, b.Addr(), signalled); v <= warm[i] {
			t.Errorf("bridge %d handled none of the numbered messages: the two did not share the queues", i)
		}
	}
	// Suspected once open longer than the window, on either bridge.
	series := fmt.Sprintf(`orderflow_sequence_gaps{producer_id=%q}`, pid)
	missing := fmt.Sprintf(`orderflow_sequence_missing_messages{producer_id=%q}`, pid)
	waitMetric(t, bridges[0].Addr(), series, float64(3+1))
	// Each bridge reads the gaps in the background: bridge 1's reading may
	// lag bridge 0's by an interval.
	waitMetric(t, bridges[1].Addr(), missing, float64(len(lost)+1))
	waitMetric(t, bridges[1].Addr(), "orderflow_sequence_watched_missing_messages", float64(len(lost)+1))

	// Late arrivals close the holes: the lost numbers, and a valid copy
	// of the invalid one.
	for s := range lost {
		send(s, true)
	}
	send(badSeq, true)
	waitGaps(t, st, pid, n, int64(len(seqs)+len(lost)), nil)
	// A producer without suspected losses has no series (-1: absent).
	waitMetric(t, bridges[1].Addr(), series, -1)
	waitMetric(t, bridges[1].Addr(), "orderflow_sequence_watched_missing_messages", 0)
}

// waitGaps waits until producer pid's numbers reach highest with exactly
// the holes want and at least received numbers recorded, and returns what
// the store says of it.
func waitGaps(t *testing.T, st *store.Store, pid string, highest, received int64, want [][2]int64) store.SeqProducer {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ps, err := st.SequenceGaps(context.Background(), pid)
		if err != nil {
			t.Fatal(err)
		}
		var gaps [][2]int64
		if len(ps) == 1 {
			for _, g := range ps[0].Gaps {
				gaps = append(gaps, [2]int64{g.From, g.To})
			}
			if ps[0].Highest == highest && ps[0].Received >= received && reflect.DeepEqual(gaps, want) {
				return ps[0]
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60 s: %+v (gaps %v), want highest %d, at least %d received and gaps %v", ps, gaps, highest, received, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
