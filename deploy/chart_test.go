package deploy

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/orderflow/orderflow/internal/procs"
)

// chartDir is the Helm chart, relative to this package.
const chartDir = "helm/orderflow"

// TestChartSetsOnlyRealSettings checks every environment variable the Helm
// chart sets, in its values files and its templates, against the settings
// the programs list in their usage text (`worker -h`, `starter -h`,
// `orderflow migrate -h`): a misspelt or retired variable would be ignored
// silently by the program, so it fails here.
func TestChartSetsOnlyRealSettings(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and links three programs (about 30 s); run without -short")
	}
	ctx := context.Background()
	dir := t.TempDir()
	known := map[string]map[string]bool{}
	// The migration Job runs `orderflow migrate`; the operator Job
	// (ops-job.yaml) any subcommand, recover above all: the orderflow
	// command reads what any of these reads.
	for prog, usages := range map[string][][]string{"worker": {{"-h"}}, "starter": {{"-h"}},
		"orderflow": {{"migrate", "-h"}, {"recover", "-h"}, {"rewind", "-h"}, {"why", "-h"}}} {
		pkg := "github.com/orderflow/orderflow/" + prog
		if prog == "orderflow" {
			pkg = "github.com/orderflow/orderflow/cmd/orderflow"
		}
		bin, err := procs.Build(ctx, pkg, dir)
		if err != nil {
			t.Fatal(err)
		}
		known[prog] = map[string]bool{}
		for _, usage := range usages {
			code, out, err := procs.Run(ctx, procs.Spec{Name: prog, Path: bin, Args: usage})
			if err != nil || code != 0 {
				t.Fatalf("%s %v: exit %d, %v\n%s", prog, usage, code, err, out)
			}
			n := len(known[prog])
			for _, m := range regexp.MustCompile(`env ([A-Z][A-Z0-9_]*)`).FindAllStringSubmatch(out, -1) {
				known[prog][m[1]] = true
			}
			if len(known[prog]) == n && n == 0 {
				t.Fatalf("%s %v lists no variables:\n%s", prog, usage, out)
			}
		}
	}
	check := func(where, name string, progs ...string) {
		t.Helper()
		if goRuntime[name] {
			return
		}
		for _, p := range progs {
			if !known[p][name] {
				t.Errorf("%s sets %s, which %s does not read (it reads %s)", where, name, p, sortedKeys(known[p]))
			}
		}
	}

	// The values files: config goes to both processes, worker.env to the
	// worker, bridge.env to the bridge.
	valuesFiles, err := filepath.Glob(filepath.Join(chartDir, "ci", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	valuesFiles = append([]string{filepath.Join(chartDir, "values.yaml"), filepath.Join(chartDir, "values-production.yaml")}, valuesFiles...)
	for _, f := range valuesFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			Config map[string]any `yaml:"config"`
			Worker struct {
				Env map[string]any `yaml:"env"`
			} `yaml:"worker"`
			Bridge struct {
				Env map[string]any `yaml:"env"`
			} `yaml:"bridge"`
		}
		if err := yaml.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for name := range v.Config {
			check(f+" config", name, "worker", "starter")
		}
		for name := range v.Worker.Env {
			check(f+" worker.env", name, "worker")
		}
		for name := range v.Bridge.Env {
			check(f+" bridge.env", name, "starter")
		}
	}

	// The templates: the variables they name, for the processes that get
	// them.
	names := regexp.MustCompile(`(?:- name: |"name" ")([A-Z][A-Z0-9_]+)`)
	for file, progs := range map[string][]string{
		"_helpers.tpl":       {"worker", "starter"},
		"worker.yaml":        {"worker"},
		"bridge.yaml":        {"starter"},
		"migration-job.yaml": {"orderflow"},
		"ops-job.yaml":       {"orderflow"},
	} {
		b, err := os.ReadFile(filepath.Join(chartDir, "templates", file))
		if err != nil {
			t.Fatal(err)
		}
		found := names.FindAllStringSubmatch(string(b), -1)
		if len(found) == 0 {
			t.Errorf("templates/%s names no variable; the pattern is stale", file)
		}
		for _, m := range found {
			check("templates/"+file, m[1], progs...)
		}
	}
}

// goRuntime are the variables Go's runtime reads in every program.
var goRuntime = map[string]bool{"GOMAXPROCS": true}

func sortedKeys(m map[string]bool) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
