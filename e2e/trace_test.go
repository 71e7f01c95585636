package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"

	"github.com/orderflow/orderflow/api"
	"github.com/orderflow/orderflow/fsm"
	"github.com/orderflow/orderflow/internal/procs"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
	"github.com/orderflow/orderflow/producer"
)

// TestOneTracePerMessage runs the real worker and bridge binaries with
// tracing on, exporting to an OTLP receiver in the test (the worker over
// gRPC, the bridge over HTTP), publishes one event with the producer
// package inside a span of the test's own, and checks that the message's
// trace holds, connected: the producer's send, the bridge's message span
// and its steps, Temporal's SignalWithStart, the workflow run, the local
// activities and their SQL statements, with the order ID and the outcomes
// as attributes.
func TestOneTracePerMessage(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binaries on the local stack; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tc := testenv.RequireTemporal(t)
	gdb, dsn := testenv.NewDatabase(t)
	namesrv := testenv.RocketMQNamesrv(t)
	rcv := startOTLPReceiver(t)

	pl := newPipeline(t, "trace", dsn, namesrv)
	// The binaries see only the test's OpenTelemetry settings: the
	// processes inherit the test's environment.
	for _, kv := range os.Environ() {
		if k, v, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "OTEL_") {
			_ = os.Unsetenv(k)
			t.Cleanup(func() { _ = os.Setenv(k, v) })
		}
	}
	// Export soon after each span ends.
	otelEnv := []string{"OTEL_BSP_SCHEDULE_DELAY=100"}
	worker, bridge := pl.procs(t,
		pl.with(append(otelEnv, "OTEL_EXPORTER_OTLP_ENDPOINT=http://"+rcv.GRPCAddr, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc")...),
		pl.with(append(otelEnv, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://"+rcv.HTTPAddr+"/v1/traces",
			// The workflow completes soon after the event, so that its
			// run's span ends and is exported.
			"ORDERFLOW_WORKFLOW_IDLE_TIMEOUT=2s")...))
	for _, p := range []*procs.Proc{worker, bridge} {
		if err := p.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// The test's own tracer, exporting to the receiver too; the producer
	// package traces with the global one.
	exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(rcv.GRPCAddr), otlptracegrpc.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName("orderflow-e2e-test"))))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})

	p, err := producer.New(gdb, producer.Config{NameServer: namesrv, Topic: pl.topic, ProducerID: uniq.Name("trace-producer")})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	orderID := pl.prefix + "-1"
	e := fsm.Event{EventID: uniq.Name("e"), OrderID: orderID, UserID: 42, Status: fsm.Paid, Version: 2,
		AmountCents: 12990, OccurredAt: time.Now().UTC().Truncate(time.Microsecond)}
	sctx, root := tp.Tracer("e2e").Start(ctx, "publish one event")
	traceID := root.SpanContext().TraceID().String()
	sent, err := p.Send(sctx, e)
	root.End()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("published %s v%d %s as message %s in trace %s", orderID, e.Version, e.Status, sent.MessageID, traceID)

	// Applied, and the workflow completed (idle), so every span has ended.
	testenv.WaitFor(t, time.Minute, func() error {
		var outcome string
		err := gdb.Raw(`SELECT outcome FROM order_events WHERE order_id = ? AND version = ?`, orderID, e.Version).Scan(&outcome).Error
		if err == nil && outcome == "" {
			err = errors.New("event not recorded yet")
		}
		return err
	})
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	defer wcancel()
	if err := tc.GetWorkflow(wctx, api.WorkflowID(orderID), "").Get(wctx, nil); err != nil {
		t.Fatalf("workflow of %s: %v", orderID, err)
	}

	var spans []otlpSpan
	var missing error
	deadline := time.Now().Add(30 * time.Second)
	for {
		spans = rcv.Trace(traceID)
		if missing = checkTrace(spans, orderID, pl.topic); missing == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("trace %s, %d spans:\n%s", traceID, len(spans), spanTree(spans))
	if missing != nil {
		t.Fatal(missing)
	}
	if rcv.Exports("grpc") == 0 || rcv.Exports("http") == 0 {
		t.Errorf("exports: %d over gRPC, %d over HTTP; want both", rcv.Exports("grpc"), rcv.Exports("http"))
	}
}

// checkTrace returns what the trace of the message of order orderID on
// topic lacks, or nil.
func checkTrace(spans []otlpSpan, orderID, topic string) error {
	byID := map[string]otlpSpan{}
	for _, s := range spans {
		byID[s.SpanID] = s
	}
	var problems []string
	// find returns the spans named name of service whose attributes hold want.
	find := func(name, service string, want map[string]string) []otlpSpan {
		var out []otlpSpan
	next:
		for _, s := range spans {
			if s.Name != name || s.Service != service {
				continue
			}
			for k, v := range want {
				if s.Attrs[k] != v {
					continue next
				}
			}
			out = append(out, s)
		}
		return out
	}
	// one returns the only span find returns, noting a problem otherwise.
	one := func(name, service string, want map[string]string) (otlpSpan, bool) {
		got := find(name, service, want)
		if len(got) != 1 {
			problems = append(problems, fmt.Sprintf("%d spans %q of %s with %v, want 1", len(got), name, service, want))
			return otlpSpan{}, false
		}
		return got[0], true
	}
	// under notes a problem unless s descends from ancestor.
	under := func(s, ancestor otlpSpan) {
		for p, ok := byID[s.ParentID]; ok; p, ok = byID[p.ParentID] {
			if p.SpanID == ancestor.SpanID {
				return
			}
		}
		problems = append(problems, fmt.Sprintf("span %q of %s is not under %q of %s", s.Name, s.Service, ancestor.Name, ancestor.Service))
	}
	const test, bridge, worker = "orderflow-e2e-test", "orderflow-bridge", "orderflow-worker"
	order := map[string]string{"orderflow.order_id": orderID}

	root, okRoot := one("publish one event", test, nil)
	send, okSend := one("send "+topic, test, order)
	msg, okMsg := one("process "+topic, bridge, map[string]string{"orderflow.order_id": orderID,
		"orderflow.version": "2", "orderflow.status": "PAID", "orderflow.outcome": "signalled",
		"messaging.system": "rocketmq", "messaging.destination.name": topic})
	if okRoot && okSend {
		under(send, root)
	}
	if okSend && okMsg {
		under(msg, send)
		if msg.Kind != "CONSUMER" {
			problems = append(problems, "the bridge's message span is of kind "+msg.Kind+", want CONSUMER")
		}
	}
	for _, step := range []string{"decode", "dedup", "deliver"} {
		if s, ok := one(step, bridge, nil); ok && okMsg {
			under(s, msg)
		}
	}
	sws, okSWS := one("SignalWithStartWorkflow:"+api.WorkflowType, bridge, nil)
	if okSWS && okMsg {
		under(sws, msg)
	}
	run, okRun := one("RunWorkflow:"+api.WorkflowType, worker, nil)
	if okRun && okSWS {
		under(run, sws)
	}
	// A fresh run's first event: loading the order, the event's decision
	// and its points are one local activity (workflows'
	// ChangeLocalActivities version 7), whose span carries the attributes
	// of all three; no load of its own.
	apply, okApply := one("RunActivity:"+api.ActivityLoadOrderAndApply, worker, map[string]string{"orderflow.order_id": orderID,
		"orderflow.outcome": string(fsm.Applied), "orderflow.points.kind": string(fsm.Purchase), "orderflow.points.inserted": "true"})
	if okApply && okRun {
		under(apply, run)
	}
	if n := len(find("RunActivity:"+api.ActivityLoadOrder, worker, order)); n != 0 {
		problems = append(problems, fmt.Sprintf("%d spans of a LoadOrder step of their own, want none: the first event's step loads the order", n))
	}
	// SQL statements: under the event's application in the worker, and
	// under the message in the bridge (its sequence number).
	sql := map[string]int{}
	for _, s := range spans {
		if s.Attrs["db.system.name"] != "postgresql" || s.Kind != "CLIENT" {
			continue
		}
		// A statement names its text; opening a connection (the pool
		// may open one for this message, or not) has none.
		if s.Name != "connect" && s.Attrs["db.query.text"] == "" {
			problems = append(problems, fmt.Sprintf("SQL span %q of %s has no db.query.text", s.Name, s.Service))
		}
		switch {
		case okApply && s.ParentID == apply.SpanID:
			sql["ApplyEvent"]++
		case okMsg && s.Service == bridge:
			under(s, msg)
			sql["bridge"]++
		}
	}
	if sql["ApplyEvent"] == 0 || sql["bridge"] == 0 {
		problems = append(problems, fmt.Sprintf("SQL spans: %d under ApplyEvent, %d in the bridge; want some of each",
			sql["ApplyEvent"], sql["bridge"]))
	}
	for _, s := range spans {
		if s.ParentID != "" {
			if _, ok := byID[s.ParentID]; !ok {
				problems = append(problems, fmt.Sprintf("span %q of %s: parent %s not in the trace", s.Name, s.Service, s.ParentID))
			}
		}
		if s.Error != "" {
			problems = append(problems, fmt.Sprintf("span %q of %s failed: %s", s.Name, s.Service, s.Error))
		}
	}
	if len(problems) > 0 {
		return errors.New("the message's trace is incomplete:\n  " + strings.Join(problems, "\n  "))
	}
	return nil
}
