package deploy

import (
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
)

// TestRules parses the alert rules with Prometheus' rule parser and checks
// what every alert carries: a severity and the annotations a page needs.
func TestRules(t *testing.T) {
	qs, err := loadRules(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	groups, errs := rulefmt.ParseFile(rulesFile, false, model.UTF8Validation, promql, slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		t.Fatal(joinErrs(errs))
	}
	seen := map[string]bool{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			if seen[r.Alert] {
				t.Errorf("alert %s is defined twice", r.Alert)
			}
			seen[r.Alert] = true
			if !strings.HasPrefix(r.Alert, "Orderflow") {
				t.Errorf("alert %s: name does not start with Orderflow", r.Alert)
			}
			if s := r.Labels["severity"]; s != "critical" && s != "warning" {
				t.Errorf("alert %s: severity %q, want critical or warning", r.Alert, s)
			}
			for _, a := range []string{"summary", "description"} {
				if strings.TrimSpace(r.Annotations[a]) == "" {
					t.Errorf("alert %s: no %s annotation", r.Alert, a)
				}
			}
		}
	}
	// The alerts issue 14 asks for.
	for _, want := range []string{"OrderflowDown", "OrderflowNotReady", "OrderflowBacklogGrowing",
		"OrderflowDeadLetterRateHigh", "OrderflowConflicts", "OrderflowWorkflowTaskFailures"} {
		if !seen[want] {
			t.Errorf("no alert %s", want)
		}
	}
	// Any suspected loss (holes in a producer's sequence) alerts.
	if !seen["OrderflowSuspectedLoss"] {
		t.Error("no alert OrderflowSuspectedLoss")
	}
	t.Logf("%d rules in %s", len(qs), rulesFile)
}

// TestDashboard parses every query of the dashboard as PromQL and checks
// its structure: unique panel IDs, the data source variable on every
// panel, the job variable in every selector, panels within the grid.
func TestDashboard(t *testing.T) {
	qs, err := loadDashboard(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	d, err := readDashboard(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("dashboard uid %q, title %q: want both", d.UID, d.Title)
	}
	var vars []string
	for _, v := range d.Templating.List {
		vars = append(vars, v.Name)
	}
	if !slices.Contains(vars, "datasource") || !slices.Contains(vars, "job") {
		t.Errorf("dashboard variables %v, want datasource and job", vars)
	}
	ids := map[int]string{}
	for _, p := range d.allPanels() {
		if prev, ok := ids[p.ID]; ok {
			t.Errorf("panels %q and %q share id %d", prev, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: datasource %+v, want the ${datasource} variable", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if !strings.Contains(tg.Expr, `job=~"$job"`) {
				t.Errorf("panel %q (%s): %s does not select job=~\"$job\"", p.Title, tg.RefID, tg.Expr)
			}
		}
	}
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "DS_PROMETHEUS") {
		t.Error("the dashboard names an import-time data source input; use the ${datasource} variable")
	}
	t.Logf("%d queries in %d panels of %s", len(qs), len(ids), dashboardFile)
}

// TestCheckFindsWhatIsMissing shows that the comparison with /metrics
// catches a metric nobody exports, a label a metric lacks and a label value
// no series has, and maps a histogram's _bucket, _sum and _count series to
// the histogram.
func TestCheckFindsWhatIsMissing(t *testing.T) {
	e := exported{
		"orderflow_events_total": {Name: "orderflow_events_total", Type: "counter", Process: []string{"worker"},
			Labels: map[string]bool{"outcome": true}, Values: map[string]map[string]bool{"outcome": {"applied": true, "conflict": true}}},
		"lat_seconds": {Name: "lat_seconds", Type: "histogram", Process: []string{"bridge"},
			Labels: map[string]bool{"le": true}, Values: map[string]map[string]bool{}},
	}
	for expr, wantProblems := range map[string]int{
		`sum by (outcome) (rate(orderflow_events_total{job=~"$job", outcome="conflict"}[5m]))`: 0,
		`histogram_quantile(0.9, sum by (le) (rate(lat_seconds_bucket[5m])))`:                  0,
		`rate(lat_seconds_sum[5m]) / rate(lat_seconds_count[5m])`:                              0,
		`up == 0`:                         0,
		`rate(orderflow_event_total[5m])`: 1, // a typo
		`sum by (kind) (rate(orderflow_events_total[5m]))`:                               1, // no such label
		`orderflow_events_total{outcome="conflicts"}`:                                    1, // no such value
		`orderflow_events_total{outcome="conflicts", reason="x"} + lat_seconds_total`:    3,
		`histogram_quantile(0.9, sum by (le) (rate(orderflow_events_total_bucket[5m])))`: 1, // not a histogram
	} {
		q, err := promql.ParseExpr(expr)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		fs := e.check([]query{{Source: "test", Expr: expr, Parsed: q}})
		if got := problems(fs); got != wantProblems {
			t.Errorf("%s: %d problem(s) %+v, want %d", expr, got, fs, wantProblems)
		}
	}
}
