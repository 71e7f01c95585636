package doccheck

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// root is the repository's root, from this package.
var root = filepath.Join("..", "..")

// pages are the prose pages checked.
func pages(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join(root, "README.md"), filepath.Join(root, "BENCHMARKS.md"), filepath.Join(root, "CHANGELOG.md"))
	out := map[string]string{}
	for _, f := range files {
		if filepath.Base(f) == "configuration.md" {
			continue // generated from the code
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		out[rel] = string(b)
	}
	return out
}

// corpus is the text of the repository's code (tests included: they read
// variables of their own), scripts, configuration and generated
// reference, in which a name the pages use must occur.
func corpus(t *testing.T) string {
	t.Helper()
	var b strings.Builder
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
		case strings.HasSuffix(name, ".md") && name != "configuration.md":
			return nil
		case strings.HasSuffix(name, ".go"), strings.HasSuffix(name, ".sh"), strings.HasSuffix(name, ".yaml"),
			strings.HasSuffix(name, ".yml"), strings.HasSuffix(name, ".json"), strings.HasSuffix(name, ".conf"),
			strings.HasSuffix(name, ".sql"), name == "Makefile", name == "Dockerfile", name == "run", name == "configuration.md":
			c, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			b.Write(c)
			b.WriteByte('\n')
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

var variable = regexp.MustCompile(`\b(?:ORDERFLOW|TEMPORAL|ROCKETMQ|OTEL)_[A-Z0-9_]*[A-Z0-9]_?\b|\b(?:REDIS|DATABASE)_URL\b`)

// Every variable a page names is read somewhere: the generated reference,
// the code, the scripts or the deployment files. A name ending in "_" (as
// in ORDERFLOW_WORKFLOW_*) is a prefix of one.
func TestVariablesExist(t *testing.T) {
	text := corpus(t)
	n := 0
	defer func() { atLeast(t, "variables", n, 50) }()
	for page, body := range pages(t) {
		for _, v := range uniq(variable.FindAllString(body, -1)) {
			n++
			if !strings.Contains(text, v) {
				t.Errorf("%s names %s, which no program, script or deployment file reads", page, v)
			}
		}
	}
}

var makeTarget = regexp.MustCompile("`make ([a-z][a-z0-9-]*)")

// Every `make TARGET` a page shows is a target of the Makefile.
func TestMakeTargetsExist(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([a-z][a-z0-9-]*):`).FindAllStringSubmatch(string(b), -1) {
		targets[m[1]] = true
	}
	n := 0
	defer func() { atLeast(t, "make targets", n, 10) }()
	for page, body := range pages(t) {
		for _, m := range makeTarget.FindAllStringSubmatch(body, -1) {
			n++
			if !targets[m[1]] {
				t.Errorf("%s shows `make %s`, which the Makefile does not define", page, m[1])
			}
		}
	}
}

var metric = regexp.MustCompile(`\borderflow_[a-z0-9_]*[a-z0-9]\b`)

// Every metric a page names is registered by the code (a histogram's
// _bucket, _sum and _count series by its name).
func TestMetricsExist(t *testing.T) {
	text := corpus(t)
	n := 0
	defer func() { atLeast(t, "metrics", n, 20) }()
	for page, body := range pages(t) {
		for _, m := range uniq(metric.FindAllString(body, -1)) {
			n++
			if strings.HasPrefix(m, "orderflow_bench") || m == "orderflow_app" || m == "orderflow_schema" {
				continue // a database, a role, a table
			}
			name := m
			for _, suffix := range []string{"_bucket", "_sum", "_count", "_total"} {
				name = strings.TrimSuffix(name, suffix)
			}
			if !strings.Contains(text, name) {
				t.Errorf("%s names the metric %s, which no code registers", page, m)
			}
		}
	}
}

var path = regexp.MustCompile("`((?:api|activities|bench|bridge|check|cmd|config|dedup|deploy|docs|e2e|fsm|internal|interop|message|migrations|producer|scenario|scripts|starter|store|third_party|wire|worker|workflows)/[A-Za-z0-9_./-]*)`")

// Every repository path a page names in code font exists.
func TestPathsExist(t *testing.T) {
	n := 0
	defer func() { atLeast(t, "paths", n, 40) }()
	for page, body := range pages(t) {
		for _, m := range path.FindAllStringSubmatch(body, -1) {
			n++
			p := strings.TrimSuffix(m[1], "/")
			if strings.ContainsAny(p, "*") {
				continue
			}
			if _, err := os.Stat(filepath.Join(root, p)); err != nil {
				t.Errorf("%s names %s, which does not exist", page, m[1])
			}
		}
	}
}

// atLeast fails when the pages named fewer than min names of a kind: the
// check would pass on nothing.
func atLeast(t *testing.T, what string, n, min int) {
	if n < min {
		t.Errorf("the pages name %d %s, fewer than %d: does the pattern still match them?", n, what, min)
	}
}

func uniq(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}
