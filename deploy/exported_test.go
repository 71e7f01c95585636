package deploy

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// targetLabels are added by Prometheus to every series of a scrape target
// (job and instance) or by Kubernetes service discovery through the
// chart's ServiceMonitor; they are never on /metrics itself.
var targetLabels = []string{"job", "instance", "namespace", "pod", "service", "container", "endpoint"}

// synthesized are the series Prometheus makes for every scrape target
// without reading them from /metrics: up is 1 when the scrape succeeded.
var synthesized = map[string]bool{"up": true}

// family is one metric family as a process exports it.
type family struct {
	Name, Type string
	// Labels are the label names its series carry (le for a histogram's
	// buckets, quantile for a summary's quantiles).
	Labels map[string]bool
	// Values are the values each label takes.
	Values map[string]map[string]bool
	// Process names the processes that export it.
	Process []string
}

// exported is the union of the metric families of several processes.
type exported map[string]*family

// scrape reads the text exposition of a /metrics URL.
func scrape(ctx context.Context, url string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	return fams, nil
}

// add records the families one process exports.
func (e exported) add(process string, fams map[string]*dto.MetricFamily) {
	for name, mf := range fams {
		f := e[name]
		if f == nil {
			f = &family{Name: name, Type: strings.ToLower(mf.GetType().String()), Labels: map[string]bool{}, Values: map[string]map[string]bool{}}
			e[name] = f
		}
		if !slices.Contains(f.Process, process) {
			f.Process = append(f.Process, process)
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				f.Labels[lp.GetName()] = true
				if f.Values[lp.GetName()] == nil {
					f.Values[lp.GetName()] = map[string]bool{}
				}
				f.Values[lp.GetName()][lp.GetValue()] = true
			}
		}
		switch mf.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			f.Labels["le"] = true
		case dto.MetricType_SUMMARY:
			f.Labels["quantile"] = true
		}
	}
}

// lookup returns the family a series name belongs to: the name itself, or
// for a histogram's _bucket, _sum and _count series (a summary's _sum and
// _count) the family of the base name.
func (e exported) lookup(name string) (*family, bool) {
	if f, ok := e[name]; ok {
		return f, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		f, ok := e[base]
		if !ok {
			continue
		}
		switch {
		case f.Type == "histogram" || f.Type == "gaugehistogram":
			return f, true
		case f.Type == "summary" && suffix != "_bucket":
			return f, true
		}
	}
	return nil, false
}

// finding is what one query names of one metric and whether it is
// exported.
type finding struct {
	Source, Metric, Where string
	// Labels are the labels and label values the query names.
	Labels   string
	Problems []string
}

// check returns a finding per metric each query names: where the metric is
// exported, or what is missing (the metric, a label, a label value).
func (e exported) check(qs []query) []finding {
	var out []finding
	for _, q := range qs {
		for _, u := range uses(q.Parsed) {
			fd := finding{Source: q.Source, Metric: u.Metric, Labels: u.describe()}
			if synthesized[u.Metric] {
				fd.Where = "Prometheus (scrape status)"
				out = append(out, fd)
				continue
			}
			f, ok := e.lookup(u.Metric)
			if !ok {
				fd.Problems = append(fd.Problems, "no process exports "+u.Metric)
				out = append(out, fd)
				continue
			}
			fd.Where = strings.Join(f.Process, ", ")
			for _, l := range u.Labels {
				if slices.Contains(targetLabels, l) {
					continue
				}
				if !f.Labels[l] {
					fd.Problems = append(fd.Problems, fmt.Sprintf("%s has no label %q (it has %s)", f.Name, l, keys(f.Labels)))
				}
			}
			for l, vals := range u.Values {
				if slices.Contains(targetLabels, l) || !f.Labels[l] {
					continue
				}
				for _, v := range vals {
					if !f.Values[l][v] {
						fd.Problems = append(fd.Problems, fmt.Sprintf("%s has no series with %s=%q (values: %s)", f.Name, l, v, keys(f.Values[l])))
					}
				}
			}
			out = append(out, fd)
		}
	}
	return out
}

func keys(m map[string]bool) string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, ", ")
}
