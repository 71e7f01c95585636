package doccheck

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// root is the repository's root, from this package.
var root = filepath.Join("..", "..")

// deliberatelyWrong are names the pages show as examples of wrong input.
var deliberatelyWrong = []struct{ page, contains string }{
	// "values.schema.json makes Helm refuse a misspelt value (`worker.replica`)".
	{"docs/deploying.md", "values.yaml has no worker.replica"},
}

// report fails the test for each finding, but those listed above.
func report(t *testing.T, findings []Finding) {
	t.Helper()
	for _, f := range findings {
		if listed(deliberatelyWrong, f) {
			continue
		}
		t.Error(f)
	}
}

func listed(list []struct{ page, contains string }, f Finding) bool {
	for _, e := range list {
		if e.page == f.Page && strings.Contains(f.Msg, e.contains) {
			return true
		}
	}
	return false
}

// TestAllowlistsMatch logs the entries of the lists above that no longer
// match a finding, so that they get dropped.
func TestAllowlistsMatch(t *testing.T) {
	var all []Finding
	check := allChecks(t)
	for _, p := range pages(t) {
		all = append(all, check(p)...)
	}
	for _, v := range []string{"deploy/helm/orderflow/values.yaml"} {
		all = append(all, CheckRefuted(Page{Name: v, Body: read(t, v)}, refuted)...)
	}
	for _, e := range deliberatelyWrong {
		if !slices.ContainsFunc(all, func(f Finding) bool { return listed([]struct{ page, contains string }{e}, f) }) {
			t.Logf("stale allowlist entry (the text is fixed: drop it): %s %q", e.page, e.contains)
		}
	}
}

func read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// pages are the prose pages checked: README.md, BENCHMARKS.md,
// CHANGELOG.md and docs/*.md but the generated configuration.md.
func pages(t *testing.T) []Page {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	rels := []string{"README.md", "BENCHMARKS.md", "CHANGELOG.md"}
	for _, f := range files {
		rel, _ := filepath.Rel(root, f)
		rels = append(rels, rel)
	}
	var out []Page
	for _, rel := range rels {
		if rel == filepath.Join("docs", "configuration.md") {
			continue // generated from the code
		}
		out = append(out, Page{Name: filepath.ToSlash(rel), Body: read(t, rel)})
	}
	return out
}

// source is the text of the repository's code, tests left out (a name
// only a test uses is not one the programs read), scripts, configuration
// and the generated reference, by path.
func source(t *testing.T) Source { return sources(t, false) }

// sources is source with the tests' code too when tests is true.
func sources(t *testing.T, tests bool) Source {
	t.Helper()
	out := Source{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || name == "third_party" || name == "testdata" || name == "results" || name == "doccheck") {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case strings.HasSuffix(name, "_test.go") && !tests, strings.HasSuffix(name, ".md") && name != "configuration.md":
			return nil
		case strings.HasSuffix(name, ".go"), strings.HasSuffix(name, ".sh"), strings.HasSuffix(name, ".yaml"),
			strings.HasSuffix(name, ".yml"), strings.HasSuffix(name, ".json"), strings.HasSuffix(name, ".conf"),
			strings.HasSuffix(name, ".sql"), name == "Makefile", name == "Dockerfile", name == "run", name == "configuration.md":
			c, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			out[filepath.ToSlash(rel)] = string(c)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var variable = regexp.MustCompile(`\b(?:ORDERFLOW|TEMPORAL|ROCKETMQ|OTEL)_[A-Z0-9_]*[A-Z0-9]_?\b|\b(?:REDIS|DATABASE)_URL\b`)

// Every variable a page names is read somewhere outside the tests: the
// generated reference, the code, the scripts or the deployment files, as
// a whole word. A name ending in "_" (as in ORDERFLOW_WORKFLOW_*) is a
// prefix of one. docs/testing.md, the page about the tests, may name the
// variables the tests read.
func TestVariablesExist(t *testing.T) {
	var ps, testing []Page
	for _, p := range pages(t) {
		if p.Name == "docs/testing.md" {
			testing = append(testing, p)
		} else {
			ps = append(ps, p)
		}
	}
	n := 0
	report(t, checkVariables(ps, source(t).Tokens(), func(c int) { n += c }))
	report(t, checkVariables(testing, sources(t, true).Tokens(), func(c int) { n += c }))
	atLeast(t, "variables", n, 50)
}

func checkVariables(ps []Page, tokens map[string]bool, count func(int)) []Finding {
	var out []Finding
	n := 0
	for _, p := range ps {
		seen := map[string]bool{}
		for _, m := range variable.FindAllStringIndex(p.Body, -1) {
			v := p.Body[m[0]:m[1]]
			if seen[v] {
				continue
			}
			seen[v] = true
			n++
			if !tokens[v] && !(strings.HasSuffix(v, "_") && hasPrefix(tokens, v)) {
				out = append(out, p.finding(m[0], "names %s, which no program, script or deployment file reads", v))
			}
		}
	}
	count(n)
	return out
}

func hasPrefix(tokens map[string]bool, prefix string) bool {
	for t := range tokens {
		if strings.HasPrefix(t, prefix) {
			return true
		}
	}
	return false
}

var makeTarget = regexp.MustCompile("`make ([a-z][a-z0-9-]*)")

// Every `make TARGET` a page shows is a target of the Makefile.
func TestMakeTargetsExist(t *testing.T) {
	targets := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([a-z][a-z0-9-]*):`).FindAllStringSubmatch(read(t, "Makefile"), -1) {
		targets[m[1]] = true
	}
	n := 0
	defer func() { atLeast(t, "make targets", n, 10) }()
	for _, p := range pages(t) {
		for _, m := range makeTarget.FindAllStringSubmatchIndex(p.Body, -1) {
			n++
			if target := p.Body[m[2]:m[3]]; !targets[target] {
				t.Errorf("%s:%d: shows `make %s`, which the Makefile does not define", p.Name, p.line(m[0]), target)
			}
		}
	}
}

var (
	metric         = regexp.MustCompile(`\borderflow_[a-z0-9_]*[a-z0-9]\b`)
	temporalMetric = regexp.MustCompile("`(temporal_[a-z0-9_]*[a-z0-9])[`{]")
)

// Every metric a page names is registered by the code under that exact
// name (a histogram's _bucket, _sum and _count series by its name; a
// counter's _total is part of its name), and every Temporal SDK metric
// in code font is named so by the alert rules or the dashboard.
func TestMetricsExist(t *testing.T) {
	report(t, checkMetrics(pages(t), source(t).Tokens(), func(n int) { atLeast(t, "metrics", n, 20) }))
}

func checkMetrics(ps []Page, tokens map[string]bool, count func(int)) []Finding {
	var out []Finding
	n := 0
	for _, p := range ps {
		for _, m := range metric.FindAllStringIndex(p.Body, -1) {
			name := p.Body[m[0]:m[1]]
			n++
			if strings.HasPrefix(name, "orderflow_bench") || name == "orderflow_app" || name == "orderflow_schema" {
				continue // a database, a role, a table
			}
			if tokens[name] {
				continue
			}
			base := name
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				base = strings.TrimSuffix(base, suffix)
			}
			if base == name || !tokens[base] {
				out = append(out, p.finding(m[0], "names the metric %s, which no code registers under that name", name))
			}
		}
		for _, m := range temporalMetric.FindAllStringSubmatchIndex(p.Body, -1) {
			if name := p.Body[m[2]:m[3]]; !tokens[name] && !tokens[name+"_bucket"] && !tokens[name+"_count"] {
				out = append(out, p.finding(m[0], "names the metric %s, which neither the alert rules nor the dashboard nor the code name so", name))
			}
		}
	}
	count(n)
	return out
}

var repoPath = regexp.MustCompile("`((?:api|activities|bench|bridge|check|cmd|config|dedup|deploy|docs|e2e|fsm|internal|interop|message|migrations|producer|scenario|scripts|starter|store|third_party|wire|worker|workflows)/[A-Za-z0-9_./-]*)`")

// Every repository path a page names in code font exists.
func TestPathsExist(t *testing.T) {
	n := 0
	defer func() { atLeast(t, "paths", n, 40) }()
	for _, p := range pages(t) {
		for _, m := range repoPath.FindAllStringSubmatch(p.Body, -1) {
			n++
			rel := strings.TrimSuffix(m[1], "/")
			if strings.ContainsAny(rel, "*") {
				continue
			}
			if _, err := os.Stat(filepath.Join(root, rel)); err != nil {
				t.Errorf("%s names %s, which does not exist", p.Name, m[1])
			}
		}
	}
}

// flags is what the flag checks know, from the generated reference and
// bench/main.go.
func flags(t *testing.T) Flags {
	t.Helper()
	ref, err := ParseReference(read(t, "docs/configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	return Flags{Ref: ref, Bench: BenchFlags(read(t, "bench/main.go")), Tools: GoTestFlags}
}

// Every orderflow, worker and starter command a page shows names a
// subcommand that exists and flags it has; every flag shown alone is
// some program's, the benchmark's or the go tool's; every default a page
// gives is the setting's.
func TestFlagsAndDefaults(t *testing.T) {
	f := flags(t)
	if len(f.Ref.Programs) < 15 || len(f.Bench) < 10 {
		t.Fatalf("read %d programs and %d benchmark flags: do the patterns still match?", len(f.Ref.Programs), len(f.Bench))
	}
	for _, p := range pages(t) {
		report(t, f.CheckCommands(p))
		report(t, f.CheckDefaults(p))
	}
}

// The claims about sets of subcommands (which print JSON, which check the
// schema, the exceptions to the variables' rule, the flag-only consents)
// agree with the reference.
func TestSubcommandClaims(t *testing.T) {
	f := flags(t)
	counts := map[string]int{}
	for _, p := range pages(t) {
		for name, check := range map[string]func(Page) ([]Finding, int){
			"-json":                         f.Ref.CheckJSONClaim,
			"schema check":                  f.Ref.CheckDatabaseClaims,
			"ORDERFLOW_<SUBCOMMAND>_<FLAG>": f.Ref.CheckVariableRuleClaim,
			"consents":                      f.Ref.CheckConsentsClaim,
			"counted uses":                  source(t).CheckCountedClaims,
		} {
			findings, n := check(p)
			counts[name] += n
			report(t, findings)
		}
	}
	orderflowMD := Page{Name: "third_party/rocketmq-client-go/ORDERFLOW.md", Body: read(t, "third_party/rocketmq-client-go/ORDERFLOW.md")}
	findings, n := source(t).CheckCountedClaims(orderflowMD)
	counts["counted uses"] += n
	report(t, findings)
	for name, min := range map[string]int{"-json": 1, "schema check": 3, "ORDERFLOW_<SUBCOMMAND>_<FLAG>": 1, "consents": 1, "counted uses": 1} {
		if counts[name] < min {
			t.Errorf("the pages make %d %s claims, fewer than %d: does the pattern still match them?", counts[name], name, min)
		}
	}
}

// Every `docker compose` command a page shows names services and
// profiles of docker-compose.yml.
func TestComposeServices(t *testing.T) {
	c, err := ParseCompose(read(t, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pages(t) {
		report(t, c.CheckCompose(p))
	}
}

// Every chart value a page names is a key of values.yaml.
func TestHelmValues(t *testing.T) {
	v, err := ParseValues(read(t, "deploy/helm/orderflow/values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pages(t) {
		report(t, v.CheckValues(p))
	}
}

// pinnedCLI is the command tree of the Temporal CLI the local stack pins
// (scripts/stack/temporal.sh).
func pinnedCLI(t *testing.T) TemporalCLI {
	t.Helper()
	version, err := PinnedTemporalVersion(read(t, "scripts/stack/temporal.sh"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cli, err := LoadTemporalCLI(ctx, version)
	if err != nil {
		t.Fatal(err)
	}
	return cli
}

// Every `temporal ...` command a page shows is a command of the pinned
// Temporal CLI, with options it takes.
func TestTemporalCommands(t *testing.T) {
	cli := pinnedCLI(t)
	for _, p := range pages(t) {
		report(t, cli.CheckTemporal(p))
	}
}

// Every relative link of every page (the generated reference and the
// patched client's notes included) names a file that exists and, for a
// Markdown file, a heading it has.
func TestLinks(t *testing.T) {
	tree := Tree{
		Exists: func(rel string) bool { _, err := os.Stat(filepath.Join(root, rel)); return err == nil },
		Read: func(rel string) (string, bool) {
			b, err := os.ReadFile(filepath.Join(root, rel))
			return string(b), err == nil
		},
	}
	ps := append(pages(t),
		Page{Name: "docs/configuration.md", Body: read(t, "docs/configuration.md")},
		Page{Name: "third_party/rocketmq-client-go/ORDERFLOW.md", Body: read(t, "third_party/rocketmq-client-go/ORDERFLOW.md")})
	n := 0
	for _, p := range ps {
		n += len(mdLink.FindAllString(p.Body, -1))
		report(t, tree.CheckLinks(p))
	}
	atLeast(t, "links", n, 50)
}

// refuted are statements the code contradicts, which the pages and the
// chart's values once made: words no generic check can weigh, kept here
// so that they do not come back.
var refuted = []Refuted{{
	Pattern: regexp.MustCompile(`/readyz\W{0,3}(?:runs its checks|\(its checks run)|(?:/metrics|/readyz)[^.\n]{0,40}\brun the readiness checks`),
	Fact:    "/readyz and /metrics serve the last result of the checks the process runs in the background (internal/obs, Server.ready); a request runs none",
}, {
	Pattern: regexp.MustCompile(`binary's\s+commit\s+by\s+default`),
	Fact:    "the image is built without .git (.dockerignore), so its worker has no commit to default to: -build-id is required with -deployment-name (worker/run.go)",
}, {
	Pattern: regexp.MustCompile(`Deployment\s+goes[^.]*\.?[^.]*then\s+the\s+bridges\s+roll`),
	Fact:    "one helm upgrade applies the worker and bridge Deployments together; nothing makes the bridges wait for the old workers to go",
}, {
	Pattern: regexp.MustCompile(`unversioned=true[^.;]*keeps\s+the\s+unversioned\s+Deployment`),
	Fact:    "the unversioned Deployment runs the chart's image.tag (the new image) with no version pin: it does not keep the old workers",
}, {
	Pattern: regexp.MustCompile(`prints\s+the\s+Redis\s+keys`),
	Fact:    "recover's dry run prints how many Redis keys it would delete, not the keys (cmd/orderflow/recover.go)",
}}

// No page, nor the chart's values, makes a statement the code refutes.
func TestRefutedStatements(t *testing.T) {
	for _, p := range pages(t) {
		report(t, CheckRefuted(p, refuted))
	}
	v := "deploy/helm/orderflow/values.yaml"
	report(t, CheckRefuted(Page{Name: v, Body: read(t, v)}, refuted))
}

// Every Markdown file a Go file names (in a comment, say) exists.
func TestMarkdownNamedInCode(t *testing.T) {
	md := map[string]bool{}
	var goFiles []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "third_party") {
			return filepath.SkipDir
		}
		switch {
		case strings.HasSuffix(p, ".md"):
			md[d.Name()] = true
		case strings.HasSuffix(p, ".go") && !strings.Contains(p, "doccheck"):
			goFiles = append(goFiles, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	md["ORDERFLOW.md"] = true // third_party/rocketmq-client-go/ORDERFLOW.md
	for _, f := range goFiles {
		rel, _ := filepath.Rel(root, f)
		report(t, CheckMarkdownNames(filepath.ToSlash(rel), read(t, rel), md))
	}
}

// runs reads every result file, by path from the root.
func runs(t *testing.T) (map[string]BenchRun, []string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "bench", "results", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]BenchRun{}
	var names []string
	for _, f := range files {
		rel, _ := filepath.Rel(root, f)
		rel = filepath.ToSlash(rel)
		r, err := ParseBenchRun([]byte(read(t, rel)))
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		out[rel] = r
		names = append(names, rel)
	}
	return out, names
}

func rate(c func(BenchEngine) BenchCell) func(BenchEngine) []float64 {
	return func(e BenchEngine) []float64 { return []float64{c(e).Rate} }
}

func cost(c func(BenchEngine) BenchCell, key string) func(BenchEngine) []float64 {
	return func(e BenchEngine) []float64 {
		if v, ok := c(e).Cost[key].(float64); ok {
			return []float64{v}
		}
		return nil
	}
}

var (
	drain   = func(e BenchEngine) BenchCell { return e.E2E }
	floor   = func(e BenchEngine) BenchCell { return e.Floor }
	steady  = func(e BenchEngine) BenchCell { return e.Sweep.At09 }
	hot     = func(e BenchEngine) BenchCell { return e.HotOrder }
	capOf   = func(e BenchEngine) []float64 { return []float64{e.Sweep.Capacity} }
	floorC  = func(e BenchEngine) []float64 { return []float64{e.FloorSweep.Capacity} }
	directC = func(e BenchEngine) []float64 { return []float64{e.DirectSweep.Capacity} }
)

// The interleaved stages' names in a result file.
const (
	stageOrderflow = "orderflow"
	stagePipeline  = "pipeline floor"
	stageDirect    = "direct floor"
)

// cpuOf is a group's CPU ms per event in a stage of the interleaved phase
// ("all": every process), none when the phase did not run.
func cpuOf(stage string, groups ...string) func(BenchEngine) []float64 {
	return func(e BenchEngine) []float64 {
		c, ok := e.Interleaved.CPU[stage]
		if !ok {
			return nil
		}
		var sum float64
		for _, g := range groups {
			sum += c[g]
		}
		return []float64{sum}
	}
}

// ratioOf is a over b, when both have a value.
func ratioOf(a, b func(BenchEngine) []float64) func(BenchEngine) []float64 {
	return func(e BenchEngine) []float64 {
		x, y := a(e), b(e)
		if len(x) != 1 || len(y) != 1 || y[0] == 0 {
			return nil
		}
		return []float64{x[0] / y[0]}
	}
}

// ms is a latency of a cell in milliseconds.
func ms(c func(BenchEngine) BenchCell, p99 bool) func(BenchEngine) []float64 {
	return func(e BenchEngine) []float64 {
		if p99 {
			return []float64{c(e).P99 / 1e6}
		}
		return []float64{c(e).P50 / 1e6}
	}
}

// ownGroups are orderflow's own processes in the CPU figures.
var ownGroups = []string{"bridge", "worker", "postgres"}

// figures are the figures the pages cite from result files.
func figures(record []string) []Figure {
	num := `[0-9](?:[0-9.,]*[0-9])?`
	mr := `(` + num + ` \(` + num + `–` + num + `\))`
	rg := `(` + num + `–` + num + `)`
	perEngine := func(v func(BenchEngine) []float64, decimals int) []Computed {
		return []Computed{{Engine("dev", v), MedianRange(decimals)}, {Engine("server", v), MedianRange(decimals)}}
	}
	// row is a table row of a median (min–max) per engine.
	row := func(label string) *regexp.Regexp {
		return regexp.MustCompile(`\| ` + label + ` \| ` + mr + ` \| ` + mr + ` \|`)
	}
	// rowN is a row of n figures per engine, separated by "; ", and its
	// groups: the dev engine's in order, then the server's.
	rowN := func(label string, decimals int, vs ...func(BenchEngine) []float64) (*regexp.Regexp, []Computed) {
		cell := strings.TrimSuffix(strings.Repeat(mr+"; ", len(vs)), "; ")
		var gs []Computed
		for _, name := range []string{"dev", "server"} {
			for _, v := range vs {
				gs = append(gs, Computed{Engine(name, v), MedianRange(decimals)})
			}
		}
		return regexp.MustCompile(`\| ` + label + ` \| ` + cell + ` \| ` + cell + ` \|`), gs
	}
	// devOnly is a row of the phases run on the first engine only.
	devOnly := func(label string) *regexp.Regexp {
		return regexp.MustCompile(`\| ` + label + ` \| ` + mr + ` \| — \|`)
	}
	engine := func(st string) func(BenchEngine) []float64 { return cpuOf(st, "temporal") }
	all := func(st string) func(BenchEngine) []float64 { return cpuOf(st, "all") }
	p50, p99 := rowN(`orderflow at 0\.9 × capacity: p50; \*\*p99\*\*`, 0, ms(steady, false), ms(steady, true))
	cpuEngine, cpuEngineG := rowN(`CPU per event, the engine: orderflow; pipeline floor; direct floor`, 1,
		engine(stageOrderflow), engine(stagePipeline), engine(stageDirect))
	cpuAll, cpuAllG := rowN(`CPU per event, every process: orderflow; pipeline floor; direct floor`, 1,
		all(stageOrderflow), all(stagePipeline), all(stageDirect))
	cpuOwn, cpuOwnG := rowN(`CPU per event, orderflow's own: bridge; worker; PostgreSQL`, 1,
		cpuOf(stageOrderflow, "bridge"), cpuOf(stageOrderflow, "worker"), cpuOf(stageOrderflow, "postgres"))
	server := func(v func(BenchEngine) []float64) Computed { return Computed{Engine("server", v), Range(1)} }
	return []Figure{
		{Name: "e2e backlog drain", Page: "BENCHMARKS.md", Files: record, Pattern: row(`\*\*e2e\*\*: orderflow, backlog drain`), Groups: perEngine(rate(drain), 1)},
		{Name: "pipeline floor backlog drain", Page: "BENCHMARKS.md", Files: record, Pattern: row(`pipeline floor, backlog drain`), Groups: perEngine(rate(floor), 1)},
		{Name: "orderflow capacity", Page: "BENCHMARKS.md", Files: record, Pattern: row(`\*\*orderflow capacity\*\*: [^|]*`), Groups: perEngine(capOf, 1)},
		{Name: "pipeline floor capacity", Page: "BENCHMARKS.md", Files: record, Pattern: row(`pipeline floor capacity, same rule`), Groups: perEngine(floorC, 1)},
		{Name: "direct floor capacity", Page: "BENCHMARKS.md", Files: record, Pattern: row(`direct floor capacity, same rule`), Groups: perEngine(directC, 1)},
		{Name: "pipeline_ratio", Page: "BENCHMARKS.md", Files: record, Pattern: row("\\*\\*`pipeline_ratio`\\*\\*: [^|]*"), Groups: perEngine(ratioOf(capOf, floorC), 2)},
		{Name: "floor_ratio", Page: "BENCHMARKS.md", Files: record, Pattern: row("`floor_ratio`: [^|]*"), Groups: perEngine(ratioOf(capOf, directC), 2)},
		{Name: "latency at 0.9 x capacity", Page: "BENCHMARKS.md", Files: record, Pattern: p50, Groups: p99},
		{Name: "CPU per event, the engine", Page: "BENCHMARKS.md", Files: record, Pattern: cpuEngine, Groups: cpuEngineG},
		{Name: "CPU per event, every process", Page: "BENCHMARKS.md", Files: record, Pattern: cpuAll, Groups: cpuAllG},
		{Name: "CPU per event, orderflow's own", Page: "BENCHMARKS.md", Files: record, Pattern: cpuOwn, Groups: cpuOwnG},
		{Name: "own_cpu_ratio", Page: "BENCHMARKS.md", Files: record, Pattern: row("\\*\\*`own_cpu_ratio`\\*\\*: [^|]*"),
			Groups: perEngine(ratioOf(cpuOf(stageOrderflow, ownGroups...), engine(stageDirect)), 2)},
		{Name: "engine_cpu_ratio", Page: "BENCHMARKS.md", Files: record, Pattern: row("\\*\\*`engine_cpu_ratio`\\*\\*: [^|]*"),
			Groups: perEngine(ratioOf(engine(stageOrderflow), engine(stagePipeline)), 2)},
		{Name: "cpu_ratio", Page: "BENCHMARKS.md", Files: record, Pattern: row("\\*\\*`cpu_ratio`\\*\\*: [^|]*"),
			Groups: perEngine(ratioOf(all(stageOrderflow), all(stagePipeline)), 2)},
		{Name: "duplicates", Page: "BENCHMARKS.md", Files: record, Pattern: devOnly(`\*\*50% duplicates / none\*\*[^|]*`),
			Groups: []Computed{{Engine("dev", func(e BenchEngine) []float64 { return []float64{e.DupRatio} }), MedianRange(2)}}},
		{Name: "duplicates by CPU", Page: "BENCHMARKS.md", Files: record,
			Pattern: devOnly(`50% duplicates / none in every process's CPU per distinct event[^|]*`),
			Groups:  []Computed{{Engine("dev", func(e BenchEngine) []float64 { return []float64{e.DupCPURatio} }), MedianRange(2)}}},
		{Name: "hot order", Page: "BENCHMARKS.md", Files: record, Pattern: devOnly(`hot order: 2,000 events of one order`), Groups: []Computed{{Engine("dev", rate(hot)), MedianRange(1)}}},
		{Name: "actions per event, engine's counter", Page: "BENCHMARKS.md", Files: record,
			Pattern: regexp.MustCompile("\\| actions \\(the engine's `action` counter\\) \\| " + rg + ` \|`),
			Groups:  []Computed{{cost(steady, "actions_per_event"), Range(2)}}},
		{Name: "actions per event, Cloud's rules", Page: "BENCHMARKS.md", Files: record,
			Pattern: regexp.MustCompile(`\| actions by Temporal Cloud's rules [^|]* \| ` + rg + ` \|`),
			Groups:  []Computed{{cost(steady, "billed_actions_per_event"), Range(2)}}},
		{Name: "history events per event", Page: "BENCHMARKS.md", Files: record,
			Pattern: regexp.MustCompile(`\| history events \| ` + rg + ` \|`),
			Groups:  []Computed{{cost(steady, "history_events_per_event"), Range(2)}}},
		{Name: "sizing: workflow tasks", Page: "docs/deploying.md", Files: record,
			Pattern: regexp.MustCompile(`\| workflow tasks \| ` + rg + ` \| ` + rg + ` \|`),
			Groups:  []Computed{{cost(drain, "workflow_tasks_per_event"), Range(2)}, {cost(steady, "workflow_tasks_per_event"), Range(2)}}},
		{Name: "sizing: history events", Page: "docs/deploying.md", Files: record,
			Pattern: regexp.MustCompile(`\| history events \| ` + rg + ` \| ` + rg + ` \|`),
			Groups:  []Computed{{cost(drain, "history_events_per_event"), Range(2)}, {cost(steady, "history_events_per_event"), Range(2)}}},
		{Name: "sizing: actions, engine's counter", Page: "docs/deploying.md", Files: record,
			Pattern: regexp.MustCompile("\\| actions \\(the engine's `action` counter\\) \\| " + rg + ` \| ` + rg + ` \|`),
			Groups:  []Computed{{cost(drain, "actions_per_event"), Range(2)}, {cost(steady, "actions_per_event"), Range(2)}}},
		{Name: "sizing: actions, Cloud's rules", Page: "docs/deploying.md", Files: record,
			Pattern: regexp.MustCompile(`\| actions by Temporal Cloud's rules \| ` + rg + ` \| ` + rg + ` \|`),
			Groups:  []Computed{{cost(drain, "billed_actions_per_event"), Range(2)}, {cost(steady, "billed_actions_per_event"), Range(2)}}},
		{Name: "sizing: PostgreSQL", Page: "docs/deploying.md", Files: record,
			Pattern: regexp.MustCompile(`\| orderflow's PostgreSQL: transactions, rows written \| ` + rg + `, ` + rg + ` \| ` + rg + `, ` + rg + ` \|`),
			Groups: []Computed{{cost(drain, "pg_transactions_per_event"), Range(2)}, {cost(drain, "pg_rows_written_per_event"), Range(2)},
				{cost(steady, "pg_transactions_per_event"), Range(2)}, {cost(steady, "pg_rows_written_per_event"), Range(2)}}},
		{Name: "sizing: drains and capacities", Page: "docs/deploying.md", Files: record,
			Pattern: regexp.MustCompile(`In the runs of record a backlog drained at ([0-9]+–[0-9]+) events/s, the pipeline floor \([^)]*\) at ([0-9]+–[0-9]+); a steady stream kept p99 under 1 s up to ([0-9]+–[0-9]+) events/s, the pipeline floor up to ([0-9]+–[0-9]+)`),
			Groups:  []Computed{{rate(drain), Range(0)}, {rate(floor), Range(0)}, {capOf, Range(0)}, {floorC, Range(0)}}},
		{Name: "sizing: history events per steady event", Page: "docs/deploying.md", Files: record,
			Pattern: regexp.MustCompile(`the store takes those and ` + rg + ` history events per event`),
			Groups:  []Computed{{cost(steady, "history_events_per_event"), Range(2)}}},
		{Name: "sizing: Temporal Cloud's actions per 100 events/s", Page: "docs/deploying.md", Files: record,
			Pattern: regexp.MustCompile(`\| Temporal Cloud \| about ([0-9,]+) actions/s \|`),
			Groups:  []Computed{{cost(steady, "billed_actions_per_event"), ScaledMedian(100, 10)}}},
		{Name: "sizing: cores per 1,000 events/s", Page: "docs/deploying.md", Files: record,
			Pattern: regexp.MustCompile(`the Temporal server with its PostgreSQL used ` + rg + ` cores, the workers ` + rg + `, the bridges ` + rg +
				`, orderflow's PostgreSQL ` + rg + `, the broker ` + rg + `: orderflow's own (` + num + `(?:–` + num + `)?) cores per core of the engine`),
			Groups: []Computed{server(engine(stageOrderflow)), server(cpuOf(stageOrderflow, "worker")), server(cpuOf(stageOrderflow, "bridge")),
				server(cpuOf(stageOrderflow, "postgres")), server(cpuOf(stageOrderflow, "rocketmq")),
				{Engine("server", ratioOf(cpuOf(stageOrderflow, ownGroups...), engine(stageOrderflow))), Span(2)}}},
		{Name: "sizing: the hot order", Page: "docs/deploying.md", Files: record,
			Pattern: regexp.MustCompile(`at ([0-9.]+–[0-9.]+) events/s in the runs of record`),
			Groups:  []Computed{{Engine("dev", rate(hot)), Range(1)}}},
	}
}

// Every figure the pages cite from result files is what those files
// hold: BENCHMARKS.md's from its runs of record, deploying.md's sizing
// from the same runs.
func TestFigures(t *testing.T) {
	all, names := runs(t)
	record, err := RunsOfRecord(read(t, "BENCHMARKS.md"), names)
	if err != nil {
		t.Fatal(err)
	}
	if len(record) != 3 {
		t.Errorf("BENCHMARKS.md names %d runs of record, the figures are medians of three", len(record))
	}
	byName := map[string]Page{}
	for _, p := range pages(t) {
		byName[p.Name] = p
	}
	for _, f := range figures(record) {
		report(t, CheckFigure(f, byName[f.Page], all))
	}
}

// allChecks returns a function that runs, on one page, every check that
// needs no file beyond the reference, the compose file and the values.
func allChecks(t *testing.T) func(Page) []Finding {
	t.Helper()
	f := flags(t)
	c, err := ParseCompose(read(t, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := ParseValues(read(t, "deploy/helm/orderflow/values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tokens := source(t).Tokens()
	return func(p Page) []Finding {
		out := append(f.CheckCommands(p), f.CheckDefaults(p)...)
		out = append(out, c.CheckCompose(p)...)
		out = append(out, v.CheckValues(p)...)
		out = append(out, CheckRefuted(p, refuted)...)
		return append(out, checkMetrics([]Page{p}, tokens, func(int) {})...)
	}
}

// atLeast fails when the pages named fewer than min names of a kind: the
// check would pass on nothing.
func atLeast(t *testing.T, what string, n, min int) {
	t.Helper()
	if n < min {
		t.Errorf("the pages name %d %s, fewer than %d: does the pattern still match them?", n, what, min)
	}
}
