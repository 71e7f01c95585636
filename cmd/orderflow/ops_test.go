package main

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"gorm.io/gorm"

	"github.com/orderflow/orderflow/api"
	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/internal/workflowtest"
	"github.com/orderflow/orderflow/message"
	"github.com/orderflow/orderflow/store"
	"github.com/orderflow/orderflow/wire"
	"github.com/orderflow/orderflow/workflows"
)

// pipeline is the real Temporal server and a fresh database with an
// in-process worker on a task queue of its own: what the bridge delivers
// to, for the operator commands to look at.
type pipeline struct {
	t      *testing.T
	c      client.Client
	db     *gorm.DB
	s      *store.Store
	dsn    string
	tq     string
	params workflows.Params
	ids    []string
}

func newPipeline(t *testing.T) *pipeline {
	t.Helper()
	c := testenv.RequireTemporal(t)
	db, dsn := testenv.NewDatabase(t)
	p := &pipeline{t: t, c: c, db: db, s: store.New(db), dsn: dsn, tq: uniq.Name("ops-tq"),
		params: workflows.Params{GracePeriod: 2 * time.Second, IdleTimeout: time.Minute}}
	workflowtest.StartWorker(t, c, p.tq, db)
	t.Cleanup(func() {
		for _, id := range p.ids {
			_ = c.TerminateWorkflow(context.Background(), api.WorkflowID(id), "", "test finished")
		}
	})
	return p
}

// env returns the command-line settings that point a command at the
// pipeline.
func (p *pipeline) env() []string {
	return []string{"-database-url", p.dsn, "-temporal-address", testenv.TemporalAddress(),
		"-temporal-namespace", testenv.TemporalNamespace(), "-task-queue", p.tq}
}

// event is an event of order id at version v.
func event(id string, v int64, st fsm.Status, amount int64) fsm.Event {
	return fsm.Event{EventID: fmt.Sprintf("%s-v%d", id, v), OrderID: id, UserID: 42, Status: st, Version: v,
		AmountCents: amount, OccurredAt: time.Date(2026, 4, 1, 9, 0, 0, 0, time.UTC).Add(time.Duration(v) * time.Minute)}
}

// envelope is the message a bridge would have received for e.
func envelope(e fsm.Event) wire.Envelope {
	body, err := message.Encode(e)
	if err != nil {
		panic(err)
	}
	return wire.NewEnvelope("ORDER_EVENTS", uniq.Name("MSG"), e.OrderID, string(e.Status), body, time.Time{}, false)
}

// deliver hands the events to their workflows as the bridge does.
func (p *pipeline) deliver(events ...fsm.Event) {
	p.t.Helper()
	for _, e := range events {
		if !containsString(p.ids, e.OrderID) {
			p.ids = append(p.ids, e.OrderID)
		}
		src := envelope(e)
		if err := workflows.Deliver(context.Background(), p.c, p.tq, p.params, e, &src); err != nil {
			p.t.Fatalf("deliver %s: %v", e.Key(), err)
		}
	}
}

// waitRecorded waits until order_events holds n business keys of order id
// and the dead letters hold parked ones.
func (p *pipeline) waitRecorded(id string, n, parked int) {
	p.t.Helper()
	testenv.WaitFor(p.t, 60*time.Second, func() error {
		h, err := p.s.OrderHistory(context.Background(), id)
		if err != nil {
			return err
		}
		if len(h.Events) != n || len(h.DeadLetters) != parked {
			return fmt.Errorf("order %s: %d keys, %d dead letters; want %d and %d", id, len(h.Events), len(h.DeadLetters), n, parked)
		}
		return nil
	})
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// runCmd runs the orderflow command and returns its exit status, standard
// output and standard error.
func runCmd(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// downDatabase is a database URL whose server is cut off: a proxy in
// front of the real server, cut, with a planted password. It returns the
// proxy's address, which errors must name.
func downDatabase(t *testing.T) (dsn, addr string) {
	t.Helper()
	testenv.SkipShort(t, "PostgreSQL")
	u, err := url.Parse(testenv.DatabaseURL())
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.StartProxy(t, u.Host)
	proxy.Cut()
	return fmt.Sprintf("postgres://orderflow:planted-pw@%s/nothing?sslmode=disable&connect_timeout=3", proxy.Addr()), proxy.Addr()
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }
