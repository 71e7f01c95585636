package deploy

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

// Files under test, relative to this package.
const (
	rulesFile     = "prometheus/orderflow-rules.yml"
	dashboardFile = "grafana/orderflow.json"
)

// query is one PromQL expression of the rules or the dashboard.
type query struct {
	// Source names it: "rule OrderflowBacklogGrowing" or
	// `panel "Messages by result" (A)`.
	Source string
	// Expr is the expression as written; Parsed is what the parser made of
	// it (with Grafana's interval variables replaced).
	Expr   string
	Parsed parser.Expr
}

// promql is Prometheus' PromQL parser with its default options.
var promql = parser.NewParser(parser.Options{})

// loadRules parses the alert rules file with Prometheus' rule parser (the
// one `promtool check rules` and the server use: unknown fields, bad
// durations, templates and expressions are errors) and returns each rule's
// expression.
func loadRules(path string) ([]query, error) {
	groups, errs := rulefmt.ParseFile(path, false, model.UTF8Validation, promql, slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s: %w", path, joinErrs(errs))
	}
	var qs []query
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			name := r.Alert
			kind := "rule"
			if name == "" {
				name, kind = r.Record, "recording rule"
			}
			e, err := promql.ParseExpr(r.Expr)
			if err != nil {
				return nil, fmt.Errorf("%s: %s %s: %w", path, kind, name, err)
			}
			qs = append(qs, query{Source: kind + " " + name, Expr: r.Expr, Parsed: e})
		}
	}
	return qs, nil
}

func joinErrs(errs []error) error {
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return fmt.Errorf("%s", strings.Join(msgs, "; "))
}

// dashboard is the part of a Grafana dashboard the tests read.
type dashboard struct {
	Title      string  `json:"title"`
	UID        string  `json:"uid"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int    `json:"id"`
	Title      string `json:"title"`
	Type       string `json:"type"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	// Panels are a collapsed row's panels.
	Panels []panel `json:"panels"`
}

// allPanels returns the dashboard's panels, those of collapsed rows
// included.
func (d *dashboard) allPanels() []panel {
	var out []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			out = append(out, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

func readDashboard(path string) (*dashboard, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &d, nil
}

// grafanaIntervals are Grafana's built-in interval variables, which
// Grafana replaces before it sends a query; the tests put a duration in
// their place. Other variables ($job) appear only inside label values,
// where PromQL takes them as text.
var grafanaIntervals = regexp.MustCompile(`\$\{?__(rate_interval|interval|range)\}?`)

// loadDashboard returns the PromQL expression of every target of every
// panel of the dashboard.
func loadDashboard(path string) ([]query, error) {
	d, err := readDashboard(path)
	if err != nil {
		return nil, err
	}
	var qs []query
	for _, p := range d.allPanels() {
		for _, t := range p.Targets {
			src := fmt.Sprintf("panel %q (%s)", p.Title, t.RefID)
			if strings.TrimSpace(t.Expr) == "" {
				return nil, fmt.Errorf("%s: %s has no expression", path, src)
			}
			e, err := promql.ParseExpr(grafanaIntervals.ReplaceAllString(t.Expr, "5m"))
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %w", path, src, err)
			}
			qs = append(qs, query{Source: src, Expr: t.Expr, Parsed: e})
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, err := variableQuery(v.Name, v.Query)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		qs = append(qs, q)
	}
	return qs, nil
}

// labelValues is Grafana's label_values(selector, label) variable query.
var labelValues = regexp.MustCompile(`^\s*label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)\s*$`)

// variableQuery turns a dashboard variable's label_values(selector, label)
// into the PromQL query "count by (label) (selector)", which names the same
// metric and label.
func variableQuery(name string, raw any) (query, error) {
	var text string
	switch v := raw.(type) {
	case string:
		text = v
	case map[string]any:
		text, _ = v["query"].(string)
	}
	m := labelValues.FindStringSubmatch(text)
	if m == nil {
		return query{}, fmt.Errorf("variable %s: query %q is not label_values(selector, label)", name, text)
	}
	expr := fmt.Sprintf("count by (%s) (%s)", m[2], m[1])
	e, err := promql.ParseExpr(expr)
	if err != nil {
		return query{}, fmt.Errorf("variable %s: %w", name, err)
	}
	return query{Source: "variable $" + name, Expr: text, Parsed: e}, nil
}

// use is what one query names of one metric: the metric, the label names
// its selectors and enclosing aggregations use, and the label values its
// equality matchers ask for.
type use struct {
	Metric string
	Labels []string
	// Values maps a label name to the values equality matchers ask for
	// (not those holding a dashboard variable).
	Values map[string][]string
}

// uses returns what q names, one entry per metric, sorted by metric.
// Labels of an aggregation's by clause are attributed to every metric
// selected inside it.
func uses(q parser.Expr) []use {
	byMetric := map[string]*use{}
	get := func(name string) *use {
		u := byMetric[name]
		if u == nil {
			u = &use{Metric: name, Values: map[string][]string{}}
			byMetric[name] = u
		}
		return u
	}
	addLabel := func(u *use, l string) {
		if !slices.Contains(u.Labels, l) {
			u.Labels = append(u.Labels, l)
		}
	}
	var walk func(n parser.Node, grouping []string)
	walk = func(n parser.Node, grouping []string) {
		switch n := n.(type) {
		case *parser.VectorSelector:
			name := n.Name
			for _, m := range n.LabelMatchers {
				if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
					name = m.Value
				}
			}
			u := get(name)
			for _, m := range n.LabelMatchers {
				if m.Name == model.MetricNameLabel {
					continue
				}
				addLabel(u, m.Name)
				if m.Type == labels.MatchEqual && !strings.Contains(m.Value, "$") {
					if !slices.Contains(u.Values[m.Name], m.Value) {
						u.Values[m.Name] = append(u.Values[m.Name], m.Value)
					}
				}
			}
			for _, l := range grouping {
				addLabel(u, l)
			}
			return
		case *parser.AggregateExpr:
			if !n.Without {
				grouping = append(slices.Clone(grouping), n.Grouping...)
			}
		}
		for _, c := range parser.Children(n) {
			walk(c, grouping)
		}
	}
	walk(q, nil)
	out := make([]use, 0, len(byMetric))
	for _, u := range byMetric {
		sort.Strings(u.Labels)
		out = append(out, *u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Metric < out[j].Metric })
	return out
}

// describe lists the labels u names, with the values asked for:
// `job, outcome="conflict"`.
func (u use) describe() string {
	parts := make([]string, 0, len(u.Labels))
	for _, l := range u.Labels {
		if len(u.Values[l]) == 0 {
			parts = append(parts, l)
			continue
		}
		for _, v := range u.Values[l] {
			parts = append(parts, fmt.Sprintf("%s=%q", l, v))
		}
	}
	return strings.Join(parts, ", ")
}
