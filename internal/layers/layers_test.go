package layers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Package paths below are relative to the module path.

// leaves import no package of the module.
var leaves = []string{"fsm", "wire", "api", "config"}

// flow is the path of a message through the service, upstream first:
// the decoder, the bridge that consumes and delivers, the workflow, its
// activities, the store.
var flow = []string{"message", "bridge", "workflows", "activities", "store"}

// flowImports are the packages of the flow each one may import, directly
// or through other packages of the module: those after it in the flow,
// except the decoder, which only the bridge imports (it decodes what it
// consumes; every later stage carries wire types, never the decoder).
var flowImports = map[string][]string{
	"message":    {},
	"bridge":     {"message", "workflows", "activities", "store"},
	"workflows":  {"activities", "store"},
	"activities": {"store"},
	"store":      {},
}

// oracle packages judge the pipeline and import none of it.
var oracle = []string{"check", "scenario"}

// pipeline is what the oracle must not import: the code it judges.
var pipeline = []string{"fsm", "wire", "api", "message", "bridge", "workflows", "activities", "store",
	"dedup", "producer"}

// pkg is a package as go list describes it.
type pkg struct {
	ImportPath string
	Imports    []string
	Standard   bool
}

// graph is the module's import graph: for each package (relative path, ""
// for the module's root), the packages of the module it imports.
type graph map[string][]string

// loadGraph runs go list over every package of the module and what they
// depend on.
func loadGraph(t *testing.T) (graph, string) {
	t.Helper()
	root := run(t, ".", "go", "env", "GOMOD")
	if root == "" || root == "/dev/null" {
		t.Fatal("not in a module")
	}
	dir := filepath.Dir(root)
	module := run(t, dir, "go", "list", "-m")
	out := run(t, dir, "go", "list", "-deps", "-json=ImportPath,Imports,Standard", "./...")
	g := graph{}
	dec := json.NewDecoder(strings.NewReader(out))
	for {
		var p pkg
		err := dec.Decode(&p)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		from, ok := relative(module, p.ImportPath)
		if p.Standard || !ok {
			continue
		}
		g[from] = nil
		for _, imp := range p.Imports {
			if to, ok := relative(module, imp); ok {
				g[from] = append(g[from], to)
			}
		}
	}
	if len(g) == 0 {
		t.Fatal("go list found no package of the module")
	}
	return g, module
}

func relative(module, path string) (string, bool) {
	if path == module {
		return "", true
	}
	rest, ok := strings.CutPrefix(path, module+"/")
	return rest, ok
}

func run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// paths returns, for every package reachable from "from", one import path
// that reaches it ("from -> a -> b").
func (g graph) paths(from string) map[string]string {
	seen := map[string]string{}
	queue := []string{from}
	via := map[string]string{from: from}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, q := range g[p] {
			if _, ok := via[q]; ok {
				continue
			}
			via[q] = via[p] + " -> " + q
			seen[q] = via[q]
			queue = append(queue, q)
		}
	}
	return seen
}

// violations checks g against the layers.
func violations(g graph) []string {
	var bad []string
	for _, l := range leaves {
		for to, path := range g.paths(l) {
			bad = append(bad, fmt.Sprintf("leaf %s imports %s of the module (%s)", l, to, path))
		}
	}
	for _, f := range flow {
		reach := g.paths(f)
		for _, to := range flow {
			if path, ok := reach[to]; ok && !slices.Contains(flowImports[f], to) {
				bad = append(bad, fmt.Sprintf("%s imports %s, against the flow (%s)", f, to, path))
			}
		}
	}
	for _, o := range oracle {
		reach := g.paths(o)
		for _, p := range pipeline {
			if path, ok := reach[p]; ok {
				bad = append(bad, fmt.Sprintf("oracle %s imports %s, which it judges (%s)", o, p, path))
			}
		}
	}
	slices.Sort(bad)
	return bad
}

// TestLayers fails on any import against the layers (see the package
// documentation).
func TestLayers(t *testing.T) {
	g, module := loadGraph(t)
	for _, p := range slices.Concat(leaves, flow, oracle) {
		if _, ok := g[p]; !ok {
			t.Errorf("package %s/%s is not in the module: update the layers", module, p)
		}
	}
	for _, v := range violations(g) {
		t.Error(v)
	}
}

// TestViolationsSeesUpwardAndIndirectImports checks the rules on small
// graphs: a direct upward import, one through a package outside the flow,
// a leaf that imports, and an oracle that reaches fsm.
func TestViolationsSeesUpwardAndIndirectImports(t *testing.T) {
	clean := graph{
		"message": {"fsm", "wire"}, "bridge": {"message", "dedup"}, "dedup": {"store"},
		"workflows": {"activities", "api"}, "activities": {"store", "api"}, "store": {"fsm", "wire"},
		"check": {"scenario"}, "scenario": {"internal/mq"},
	}
	if v := violations(clean); len(v) > 0 {
		t.Fatalf("a graph that keeps the layers has violations: %v", v)
	}
	for _, c := range []struct {
		name      string
		from, to  string
		violation string
	}{
		{"upward", "activities", "workflows", "activities imports workflows, against the flow (activities -> workflows)"},
		{"the decoder after the bridge", "workflows", "message", "workflows imports message, against the flow"},
		{"indirect", "store", "bridge", "store imports message, against the flow (store -> bridge -> message)"},
		{"through a helper", "dedup", "bridge", "store imports bridge, against the flow (store -> dedup -> bridge)"},
		{"leaf", "fsm", "wire", "leaf fsm imports wire"},
		{"oracle", "scenario", "fsm", "oracle check imports fsm, which it judges (check -> scenario -> fsm)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := graph{}
			for k, v := range clean {
				g[k] = slices.Clone(v)
			}
			if c.name == "through a helper" {
				g["store"] = append(g["store"], "dedup")
				delete(g, "dedup") // dedup -> store would be a cycle
			}
			g[c.from] = append(g[c.from], c.to)
			v := violations(g)
			if !slices.ContainsFunc(v, func(s string) bool { return strings.Contains(s, c.violation) }) {
				t.Errorf("want a violation with %q, got %v", c.violation, v)
			}
		})
	}
}
