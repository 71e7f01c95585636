package producer

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/mq"
	"github.com/orderflow/orderflow/internal/procs"
	"github.com/orderflow/orderflow/internal/uniq"
)

// The helper process is this test binary run again with these variables.
const (
	envHelper  = "ORDERFLOW_PRODUCER_HELPER" // "committed" or "open"
	envDSN     = "ORDERFLOW_PRODUCER_HELPER_DSN"
	envNamesrv = "ORDERFLOW_PRODUCER_HELPER_NAMESRV"
	envTopic   = "ORDERFLOW_PRODUCER_HELPER_TOPIC"
	envGroup   = "ORDERFLOW_PRODUCER_HELPER_GROUP"
	envPID     = "ORDERFLOW_PRODUCER_HELPER_PRODUCER_ID"
	envOrder   = "ORDERFLOW_PRODUCER_HELPER_ORDER"
)

// killMe is what the helper prints when it waits for its SIGKILL.
const killMe = "KILL-ME"

// killedEventID is the event ID of the message the helper is killed in the
// middle of sending.
func killedEventID(order string) string { return order + "-killed" }

// TestTxHelperProcess is the producer TestTxSIGKILL kills: it sends seq 1
// normally, then seq 2 and waits to be killed, with the half message
// stored and the local transaction either committed ("committed": before
// the half message's commit reaches the broker) or still open ("open").
func TestTxHelperProcess(t *testing.T) {
	mode := os.Getenv(envHelper)
	if mode == "" {
		t.Skip("the helper process of TestTxSIGKILL")
	}
	ctx := context.Background()
	db, err := gorm.Open(postgres.Open(os.Getenv(envDSN)), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	var block atomic.Bool
	cfg := Config{NameServer: os.Getenv(envNamesrv), Topic: os.Getenv(envTopic), Group: os.Getenv(envGroup),
		ProducerID: os.Getenv(envPID)}
	cfg.hooks = &hooks{endState: func(s mq.TxState) mq.TxState {
		if block.Load() && s == mq.TxCommit {
			fmt.Println(killMe + ": local transaction committed, half message not")
			time.Sleep(time.Hour)
		}
		return s
	}}
	p, err := NewTx(ctx, db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	order := os.Getenv(envOrder)
	e1 := event(order, 1)
	if _, err := p.Send(ctx, e1, writeShopOrder(e1)); err != nil {
		t.Fatal(err)
	}
	e2 := event(order, 2)
	e2.EventID = killedEventID(order)
	block.Store(true)
	local := writeShopOrder(e2)
	if mode == "open" {
		local = func(tx *gorm.DB) error {
			if err := writeShopOrder(e2)(tx); err != nil {
				return err
			}
			fmt.Println(killMe + ": inside the local transaction")
			time.Sleep(time.Hour)
			return nil
		}
	}
	_, err = p.Send(ctx, e2, local)
	t.Fatalf("not killed (send returned %v)", err)
}

// TestTxSIGKILL kills a producer between its half message and the half
// message's commit, with its local transaction committed and with it still
// open, then starts another producer of the same group: the broker checks
// back with it, and the message is delivered exactly when the local
// transaction committed. The sequence goes on without a hole either way.
func TestTxSIGKILL(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"committed", "open"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			b := newBroker(t, 2)
			r := newReader(t, b)
			ctx := context.Background()
			pid, group, order := uniq.Name("killed"), uniq.Name("killed-group"), uniq.Name("o")
			proc := procs.New(procs.Spec{
				Name: "producer helper (" + mode + ")",
				Path: os.Args[0],
				Args: []string{"-test.run=^TestTxHelperProcess$", "-test.count=1"},
				Env: []string{envHelper + "=" + mode, envDSN + "=" + b.dsn, envNamesrv + "=" + b.namesrv,
					envTopic + "=" + b.topic, envGroup + "=" + group, envPID + "=" + pid, envOrder + "=" + order},
				ReadyOutput:  killMe,
				ReadyTimeout: 90 * time.Second,
			})
			if err := proc.Start(ctx); err != nil {
				t.Fatalf("%v\n%s", err, proc.Output())
			}
			if err := proc.Kill(); err != nil {
				t.Fatal(err)
			}
			killedAt := time.Now()
			t.Logf("helper killed: %s", proc.Output())

			killed := fsm.Event{OrderID: order, Version: 2}
			committed := mode == "committed"
			if got := shopOrderExists(t, b.db, killed); got != committed {
				t.Fatalf("local write of the killed send committed: %v, want %v", got, committed)
			}
			wantNext := int64(2)
			if committed {
				wantNext = 3
			}
			if n, _ := NextSeq(ctx, b.db, pid); n != wantNext {
				t.Fatalf("after the kill, next seq %d, want %d", n, wantNext)
			}

			var c checks
			cfg := b.config(pid)
			cfg.Group = group
			cfg.hooks = &hooks{checked: c.hook}
			p, err := NewTx(ctx, b.db, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if committed {
				id, _ := outboxID(t, b.db, pid, 2)
				c.waitAnswer(t, id, nil, mq.TxCommit)
			} else {
				c.waitAnswer(t, "", nil, mq.TxRollback)
			}
			t.Logf("the new producer answered the check-back %s after the kill", time.Since(killedAt).Round(time.Second))

			e3 := event(order, 3)
			s3, err := p.Send(ctx, e3, writeShopOrder(e3))
			if err != nil {
				t.Fatal(err)
			}
			if s3.Event.Seq != wantNext {
				t.Fatalf("the next send got seq %d, want %d", s3.Event.Seq, wantNext)
			}
			want := 0
			if committed {
				want = 1
			}
			// A transactional message reaches its queue when the broker
			// handles its commit, which neither the check-back's answer
			// nor the send waits for: the committed ones first, then a
			// sentinel behind everything stored in the order's queue.
			r.waitFor(t, 60*time.Second, "the committed messages", func(got []received) bool {
				return withEvent(got, e3.EventID) > 0 && withEvent(got, killedEventID(order)) >= want
			})
			got := b.consumedThrough(t, r, order)
			if n := withEvent(got, killedEventID(order)); n != want {
				t.Fatalf("the killed send's message was delivered %d time(s), want %d: %s", n, want, describe(got))
			}
			for i, m := range got {
				if m.event.Seq != int64(i+1) {
					t.Fatalf("sequence with a hole or a repeat: %s", describe(got))
				}
			}
			if len(got) != int(wantNext) {
				t.Fatalf("consumed %s; want %d messages", describe(got), wantNext)
			}
		})
	}
}
