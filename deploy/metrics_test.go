package deploy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	dto "github.com/prometheus/client_model/go"
	"go.temporal.io/sdk/client"

	"github.com/orderflow/orderflow/internal/procs"
	"github.com/orderflow/orderflow/internal/testenv"
	"github.com/orderflow/orderflow/internal/uniq"
)

// TestQueriesNameExportedMetrics runs the real worker and bridge binaries
// on a database, topic and task queue of their own, feeds them a small
// scenario (events, duplicates, a conflict, bad messages) with `orderflow
// publish`, waits with `orderflow check` until it settles, makes the worker
// fail a workflow task (a workflow type it does not know), and then scrapes
// both /metrics. Every metric an alert rule or a dashboard panel names must
// be exported by one of them, with every label its selectors and
// aggregations use and every label value its equality matchers ask for.
func TestQueriesNameExportedMetrics(t *testing.T) {
	qs := loadAll(t)
	tc := testenv.RequireTemporal(t)
	namesrv := testenv.RocketMQNamesrv(t)
	_, dsn := testenv.NewDatabase(t)
	topic, group, taskQueue, prefix := uniq.Name("deploy-events"), uniq.Name("deploy-bridge"), uniq.Name("deploy-tq"), uniq.Name("deploy")
	testenv.CreateTopic(t, topic, 4)

	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bins := map[string]string{}
	for _, pkg := range []string{"worker", "starter", "cmd/orderflow"} {
		p, err := procs.Build(ctx, "github.com/orderflow/orderflow/"+pkg, dir)
		if err != nil {
			t.Fatal(err)
		}
		bins[filepath.Base(pkg)] = p
	}
	env := []string{
		"DATABASE_URL=" + dsn,
		"ROCKETMQ_NAMESRV=" + namesrv,
		"ORDERFLOW_TOPIC=" + topic,
		"ORDERFLOW_CONSUMER_GROUP=" + group,
		"ORDERFLOW_TASK_QUEUE=" + taskQueue,
		// The scenario loses events (-gap-rate): their holes count as
		// suspected losses at once, so the per-producer loss series appear.
		"ORDERFLOW_GAP_WINDOW=1s",
	}
	worker := procs.New(procs.Spec{Name: "worker", Path: bins["worker"], Env: env,
		AddrEnv: "ORDERFLOW_WORKER_METRICS_ADDR", Ready: "/readyz", LogPath: filepath.Join(dir, "worker.log")})
	bridge := procs.New(procs.Spec{Name: "bridge", Path: bins["starter"], Env: env,
		AddrEnv: "ORDERFLOW_BRIDGE_METRICS_ADDR", Ready: "/readyz", LogPath: filepath.Join(dir, "bridge.log")})
	for _, p := range []*procs.Proc{worker, bridge} {
		if err := p.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, p := range []*procs.Proc{bridge, worker} {
			if _, _, err := p.Stop(45 * time.Second); err != nil {
				t.Log(err)
			}
		}
		if t.Failed() {
			for _, name := range []string{"worker", "bridge"} {
				b, _ := os.ReadFile(filepath.Join(dir, name+".log"))
				t.Logf("%s log (tail):\n%s", name, tail(string(b), 4000))
			}
		}
	})

	// A scenario with every kind of message, then the wait until the
	// database holds what it should.
	expected := filepath.Join(dir, "expected.json")
	run := func(args ...string) {
		t.Helper()
		code, out, err := procs.Run(ctx, procs.Spec{Name: "orderflow " + args[0], Path: bins["orderflow"], Args: args, Env: env})
		if err != nil || code != 0 {
			t.Fatalf("orderflow %s: exit %d, %v\n%s", strings.Join(args, " "), code, err, out)
		}
		t.Logf("orderflow %s:\n%s", args[0], tail(out, 2000))
	}
	run("publish", "-orders", "8", "-seed", "14", "-prefix", prefix, "-dup-rate", "0.2", "-conflicts", "1", "-bad", "2", "-gap-rate", "0.5", "-out", expected)
	run("check", "-expected", expected, "-wait", "2m")

	// A workflow type the worker does not know fails its workflow tasks:
	// the SDK's failure counter appears.
	wr, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: prefix + "-unregistered", TaskQueue: taskQueue,
		WorkflowRunTimeout: 2 * time.Minute}, "UnregisteredWorkflow")
	if err != nil {
		t.Fatalf("start a workflow of an unknown type: %v", err)
	}
	defer func() { _ = tc.TerminateWorkflow(context.Background(), wr.GetID(), wr.GetRunID(), "test over") }()

	// Scrape until every query finds what it names (metrics the SDK
	// registers on first use, and the consumer's lag, appear within
	// seconds), or a minute has passed.
	var findings []finding
	var exp exported
	deadline := time.Now().Add(time.Minute)
	for {
		exp = exported{}
		for _, p := range []*procs.Proc{worker, bridge} {
			fams, err := scrape(ctx, "http://"+p.Addr()+"/metrics")
			if err != nil {
				t.Fatalf("%s: %v", p.Addr(), err)
			}
			exp.add(nameOf(p, worker), fams)
		}
		findings = exp.check(qs)
		if problems(findings) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}

	// The report: each query's metrics and where they are exported.
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SOURCE\tMETRIC\tLABELS\tEXPORTED BY")
	for _, f := range findings {
		where := f.Where
		if len(f.Problems) > 0 {
			where = "MISSING: " + strings.Join(f.Problems, "; ")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", f.Source, f.Metric, f.Labels, where)
	}
	tw.Flush()
	t.Logf("metrics named by %s and %s:\n%s", rulesFile, dashboardFile, b.String())
	if n := problems(findings); n > 0 {
		t.Errorf("%d metric(s) named by a rule or a panel are not exported as named; exported families:\n%s", n, exportedList(exp))
	}

	// The scenario went through the processes scraped.
	for _, c := range []struct {
		fams, metric, label, value string
	}{
		{"bridge", "orderflow_bridge_messages_total", "result", "signalled"},
		{"bridge", "orderflow_bridge_messages_total", "result", "parked"},
		{"worker", "orderflow_events_total", "outcome", "applied"},
		{"worker", "orderflow_events_total", "outcome", "conflict"},
	} {
		p := worker
		if c.fams == "bridge" {
			p = bridge
		}
		fams, err := scrape(ctx, "http://"+p.Addr()+"/metrics")
		if err != nil {
			t.Fatal(err)
		}
		if v := value(fams[c.metric], c.label, c.value); v < 1 {
			t.Errorf("%s: %s{%s=%q} = %v after the scenario, want >= 1", c.fams, c.metric, c.label, c.value, v)
		}
	}
}

// loadAll loads the queries of the rules and of the dashboard.
func loadAll(t *testing.T) []query {
	t.Helper()
	rules, err := loadRules(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	panels, err := loadDashboard(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	return append(rules, panels...)
}

func nameOf(p, worker *procs.Proc) string {
	if p == worker {
		return "worker"
	}
	return "bridge"
}

func problems(fs []finding) int {
	n := 0
	for _, f := range fs {
		n += len(f.Problems)
	}
	return n
}

func exportedList(e exported) string {
	names := make([]string, 0, len(e))
	for n, f := range e {
		names = append(names, fmt.Sprintf("%s (%s; %s; labels %s)", n, f.Type, strings.Join(f.Process, ", "), keys(f.Labels)))
	}
	sort.Strings(names)
	return strings.Join(names, "\n")
}

// value returns the sum of the counter or gauge series of mf whose label
// has the given value.
func value(mf *dto.MetricFamily, label, want string) float64 {
	var sum float64
	for _, m := range mf.GetMetric() {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == label && lp.GetValue() == want {
				sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
