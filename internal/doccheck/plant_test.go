package doccheck

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Each test below plants one wrong claim of a kind in a page (a copy of a
// real page, or a line) and shows that its check reports it, and that
// the same page without the plant passes.

// expectOne fails unless the planted page gives a finding containing want
// and the clean one gives none containing it.
func expectOne(t *testing.T, clean, planted []Finding, want string) {
	t.Helper()
	for _, f := range clean {
		if strings.Contains(f.Msg, want) {
			t.Fatalf("the page without the plant already reports %q: %s", want, f)
		}
	}
	for _, f := range planted {
		if strings.Contains(f.Msg, want) {
			return
		}
	}
	t.Fatalf("the planted claim was not reported (want %q); findings: %v", want, planted)
}

// plant returns the page with old replaced by new, failing when old is
// not on it.
func plant(t *testing.T, p Page, old, new string) Page {
	t.Helper()
	if !strings.Contains(p.Body, old) {
		t.Fatalf("%s no longer says %q: plant elsewhere", p.Name, old)
	}
	return Page{Name: p.Name, Body: strings.Replace(p.Body, old, new, 1)}
}

func page(t *testing.T, name string) Page {
	t.Helper()
	return Page{Name: name, Body: read(t, name)}
}

func TestPlantedFlag(t *testing.T) {
	f := flags(t)
	clean := page(t, "docs/operating.md")
	planted := plant(t, clean, "`orderflow gaps -producer ID`", "`orderflow gaps -producer-id ID`")
	expectOne(t, f.CheckCommands(clean), f.CheckCommands(planted), "orderflow gaps has no flag -producer-id")

	line := Page{Name: "x.md", Body: "Run `orderflow dlq list -summary` or `prune -yes` or `worker -workflow-versions 5`.\n"}
	expectOne(t, nil, f.CheckCommands(line), "worker has no flag -workflow-versions")
	bare := Page{Name: "x.md", Body: "Then `-include-unreplayed` and `-no-such-flag`.\n"}
	expectOne(t, nil, f.CheckCommands(bare), "the flag -no-such-flag")
}

func TestPlantedSubcommand(t *testing.T) {
	f := flags(t)
	p := Page{Name: "x.md", Body: "```sh\ngo run ./cmd/orderflow dlq purge -yes\n/app/orderflow repair\n```\n"}
	findings := f.CheckCommands(p)
	expectOne(t, nil, findings, `no subcommand "dlq purge"`)
	expectOne(t, nil, findings, `no subcommand "repair"`)
}

func TestPlantedDefault(t *testing.T) {
	f := flags(t)
	clean := page(t, "docs/operating.md")
	// dlq list's -limit is 100 and dlq replay's 1,000: the paragraph
	// decides which the page means.
	planted := plant(t, clean, "`-limit N` (default 100, at least 1)", "`-limit N` (default 1,000, at least 1)")
	expectOne(t, f.CheckDefaults(clean), f.CheckDefaults(planted), "-limit: the page gives the default 1,000, the program's is 100")

	for _, c := range []struct{ text, want string }{
		{"the window (`ORDERFLOW_GAP_WINDOW`, 10 min) closes", "ORDERFLOW_GAP_WINDOW: the page gives the default 10 min"},
		{"`-margin`, 2 minutes by default", "-margin: the page gives the default 2 minutes"},
		{"the topic (`ORDERFLOW_TOPIC`, default `ORDERS`)", "ORDERFLOW_TOPIC: the page gives the default `ORDERS`"},
	} {
		expectOne(t, nil, f.CheckDefaults(Page{Name: "x.md", Body: c.text}), c.want)
	}
	for _, right := range []string{"(`ORDERFLOW_GAP_WINDOW`, 5 min)", "`-margin`, 5 minutes by default", "(`ORDERFLOW_TOPIC`, default `ORDER_EVENTS`)"} {
		if got := f.CheckDefaults(Page{Name: "x.md", Body: right}); len(got) > 0 {
			t.Errorf("%s: %v", right, got)
		}
	}
}

func TestPlantedComposeService(t *testing.T) {
	c, err := ParseCompose(read(t, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	clean := page(t, "docs/deploying.md")
	planted := plant(t, clean, "docker compose run --rm starter ./orderflow", "docker compose run --rm bridge ./orderflow")
	expectOne(t, c.CheckCompose(clean), c.CheckCompose(planted), "docker-compose.yml has no service bridge")

	for _, text := range []string{
		"`docker compose --profile tracing up -d jaeger worker bridge`",
		"`OTEL_EXPORTER_OTLP_ENDPOINT=http://tempo:4318 docker compose up -d`",
		"`docker compose --profile metrics up -d`",
	} {
		if len(c.CheckCompose(Page{Name: "x.md", Body: text})) != 1 {
			t.Errorf("%s: want one finding, got %v", text, c.CheckCompose(Page{Name: "x.md", Body: text}))
		}
	}
}

func TestPlantedValueKey(t *testing.T) {
	v, err := ParseValues(read(t, "deploy/helm/orderflow/values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	clean := page(t, "docs/deploying.md")
	planted := plant(t, clean, "--set secrets.databaseURL=", "--set secrets.databaseUrl=")
	expectOne(t, v.CheckValues(clean), v.CheckValues(planted), "values.yaml has no secrets.databaseUrl")

	for _, c := range []struct{ text, want string }{
		{"`worker.versioning.unversion`", "no worker.versioning.unversion"},
		{"`bridge.autoscaling.*`", "no bridge.autoscaling.*"},
		{"`--set-json 'worker.versioning.build=[]'`", "no worker.versioning.build"},
	} {
		expectOne(t, nil, v.CheckValues(Page{Name: "x.md", Body: c.text}), c.want)
	}
	for _, right := range []string{"`worker.versioning.unversioned`", "`worker.autoscaling.*`", "`config.ORDERFLOW_TOPIC`", "`*.podLabels`"} {
		if got := v.CheckValues(Page{Name: "x.md", Body: right}); len(got) > 0 {
			t.Errorf("%s: %v", right, got)
		}
	}
}

func TestPlantedFigure(t *testing.T) {
	all, names := runs(t)
	record, err := RunsOfRecord(read(t, "BENCHMARKS.md"), names)
	if err != nil {
		t.Fatal(err)
	}
	clean := page(t, "BENCHMARKS.md")
	var hot Figure
	for _, f := range figures(record) {
		if f.Name == "hot order" {
			hot = f
		}
	}
	if got := CheckFigure(hot, clean, all); len(got) > 0 {
		t.Fatalf("the clean page: %v", got)
	}
	m := hot.Pattern.FindStringSubmatch(strings.Join(strings.Fields(clean.Body), " "))
	wrong := strings.Replace(m[1], "(", "(1", 1)
	planted := plant(t, clean, m[1], wrong)
	expectOne(t, nil, CheckFigure(hot, planted, all), "the page says "+wrong+", its result files")

	// A figure taken from other files than those cited fails too.
	old := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return !strings.Contains(n, "2026-11-25T2") })
	hot.Files = old
	expectOne(t, nil, CheckFigure(hot, clean, all), "its result files")
	// So does a figure whose sentence is gone.
	hot.Pattern = regexp.MustCompile(`a sentence no page has ([0-9])`)
	expectOne(t, nil, CheckFigure(hot, clean, all), "its sentence is not on the page")
}

func TestPlantedTemporalCommand(t *testing.T) {
	cli := pinnedCLI(t)
	for _, c := range []struct{ text, want string }{
		{"`temporal worker deployment set-current --deployment-name x --build-id y`", "has no command temporal worker deployment set-current"},
		{"`temporal worker deployment describe --deployment x`", "has no option --deployment"},
		{"```sh\ntemporal workflow query -w order:1 --query-type state\n```\n", "has no option --query-type"},
	} {
		expectOne(t, nil, cli.CheckTemporal(Page{Name: "x.md", Body: c.text}), c.want)
	}
	right := "`temporal worker deployment set-current-version --deployment-name orderflow --build-id NEW` and `temporal workflow query -w order:1 --type state`"
	if got := cli.CheckTemporal(Page{Name: "x.md", Body: right}); len(got) > 0 {
		t.Errorf("%v", got)
	}
}

func TestPlantedAnchor(t *testing.T) {
	pagesByName := map[string]string{"a.md": "# A\n\n## 2.8 Producer: sequence numbers, and the `outbox`\n\n## Twice\n\n## Twice\n"}
	tree := Tree{
		Exists: func(rel string) bool { _, ok := pagesByName[rel]; return ok },
		Read:   func(rel string) (string, bool) { s, ok := pagesByName[rel]; return s, ok },
	}
	good := Page{Name: "b.md", Body: "[x](a.md#28-producer-sequence-numbers-and-the-outbox) [y](a.md#twice-1) [z](a.md)"}
	if got := tree.CheckLinks(good); len(got) > 0 {
		t.Fatalf("%v", got)
	}
	bad := Page{Name: "b.md", Body: "[x](a.md#28-producer-sequence-numbers) [y](c.md) [z](a.md#b)"}
	got := tree.CheckLinks(bad)
	if len(got) != 3 {
		t.Fatalf("want 3 findings, got %v", got)
	}
}

func TestPlantedTestOnlyName(t *testing.T) {
	tokens := Source{"worker/main.go": `os.Getenv("ORDERFLOW_WORKER_FOO_BAR")`}.Tokens()
	withTests := Source{"worker/main.go": `os.Getenv("ORDERFLOW_WORKER_FOO_BAR")`, "worker/x_test.go": `os.Getenv("ORDERFLOW_TEST_ONLY")`}.Tokens()
	p := Page{Name: "x.md", Body: "`ORDERFLOW_TEST_ONLY` and `ORDERFLOW_WORKER_FOO`, and `ORDERFLOW_WORKER_FOO_BAR`.\n"}
	got := checkVariables([]Page{p}, tokens, func(int) {})
	var names []string
	for _, f := range got {
		names = append(names, f.Msg)
	}
	if len(got) != 2 || !strings.Contains(names[0], "ORDERFLOW_TEST_ONLY") || !strings.Contains(names[1], "ORDERFLOW_WORKER_FOO,") {
		t.Fatalf("want the test-only name and the prefix of a longer name reported, got %v", names)
	}
	if got := checkVariables([]Page{p}, withTests, func(int) {}); len(got) != 1 {
		t.Fatalf("with the tests' code, want only the prefix reported, got %v", got)
	}
	m := checkMetrics([]Page{{Name: "x.md", Body: "`orderflow_events` and `orderflow_events_total`, `orderflow_lat_seconds_bucket`"}},
		Source{"a.go": `"orderflow_events_total" "orderflow_lat_seconds"`}.Tokens(), func(int) {})
	if len(m) != 1 || !strings.Contains(m[0].Msg, "orderflow_events,") && !strings.Contains(m[0].Msg, "metric orderflow_events ") {
		t.Fatalf("want the counter without its _total reported, got %v", m)
	}
}

func TestPlantedSubcommandClaims(t *testing.T) {
	ref := flags(t).Ref
	clean := page(t, "docs/operating.md")
	for _, c := range []struct {
		name     string
		check    func(Page) ([]Finding, int)
		old, new string
		want     string
	}{
		{"json", ref.CheckJSONClaim, "`check`, whose", "`audit`, whose", "whose -json prints no JSON"},
		{"schema", ref.CheckDatabaseClaims, "`lag` and `rewind` do not open it", "`lag` does not open it", "never open the database: rewind"},
		{"consents", ref.CheckConsentsClaim, "`recover -yes`, ", "", "the flag-only consents are"},
		{"rule", ref.CheckVariableRuleClaim, "share `ORDERFLOW_DLQ_*`", "share theirs", "(ORDERFLOW_DLQ_"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before, n := c.check(clean)
			if n == 0 {
				t.Fatal("the claim is not on the page")
			}
			after, _ := c.check(plant(t, clean, c.old, c.new))
			expectOne(t, before, after, c.want)
		})
	}
	src := Source{"internal/mq/a.go": "producer.WithTLS(x)\nconsumer.WithTLS(y)\nfunc WithTLS() {}\n"}
	for n, want := range map[string]int{"two": 0, "three": 1} {
		got, _ := src.CheckCountedClaims(Page{Name: "x.md", Body: fmt.Sprintf("port the %s `WithTLS` uses of `internal/mq` to", n)})
		if len(got) != want {
			t.Errorf("%s uses: want %d findings, got %v", n, want, got)
		}
	}
}

func TestPlantedRefutedAndMarkdownNames(t *testing.T) {
	p := Page{Name: "values.yaml", Body: "    # /readyz runs its checks one after the other\n"}
	if len(CheckRefuted(p, refuted)) != 1 {
		t.Errorf("the refuted statement was not reported")
	}
	got := CheckMarkdownNames("fsm/x.go", "// the lifecycle of DESIGN.md and docs/design.md\n", map[string]bool{"design.md": true})
	if len(got) != 1 || !strings.Contains(got[0].Msg, "DESIGN.md") {
		t.Errorf("want DESIGN.md reported once, got %v", got)
	}
}
