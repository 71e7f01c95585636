package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// crdFacts are the Temporal Worker Controller's CRD schemas as far as the
// chart uses them (workercontroller/crd-facts.json, read from the
// controller's CRD chart at the pinned version).
type crdFacts struct {
	AppVersion string `json:"appVersion"`
	Commit     string `json:"commit"`
	Kinds      map[string]struct {
		Group   string    `json:"group"`
		Version string    `json:"version"`
		Scope   string    `json:"scope"`
		Schema  crdSchema `json:"schema"`
	} `json:"kinds"`
}

// crdSchema is the part of an OpenAPI v3 schema the facts keep.
type crdSchema struct {
	Type        string               `json:"type"`
	Required    []string             `json:"required"`
	Properties  map[string]crdSchema `json:"properties"`
	Items       *crdSchema           `json:"items"`
	Enum        []any                `json:"enum"`
	Pattern     string               `json:"pattern"`
	Minimum     *float64             `json:"minimum"`
	Maximum     *float64             `json:"maximum"`
	MaxItems    *int                 `json:"maxItems"`
	MinLength   *int                 `json:"minLength"`
	MaxLength   *int                 `json:"maxLength"`
	Format      string               `json:"format"`
	Description string               `json:"description"`
	Preserve    bool                 `json:"x-kubernetes-preserve-unknown-fields"`
	Rules       []struct {
		Rule    string `json:"rule"`
		Message string `json:"message"`
	} `json:"x-kubernetes-validations"`
}

func loadCRDFacts(t *testing.T) crdFacts {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("workercontroller", "crd-facts.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f crdFacts
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("crd-facts.json: %v", err)
	}
	return f
}

// validate checks v against s, as the API server's structural schema
// would: types, required properties, enums, bounds, patterns and, since a
// field the schema does not know is dropped (or refused by strict field
// validation), no unknown field. CEL rules are checked by the caller.
func (s crdSchema) validate(path string, v any) []string {
	var errs []string
	bad := func(format string, a ...any) { errs = append(errs, path+": "+fmt.Sprintf(format, a...)) }
	if s.Preserve && s.Type == "" {
		return nil
	}
	switch s.Type {
	case "object":
		m, ok := v.(map[string]any)
		if !ok {
			bad("got %T, want an object", v)
			return errs
		}
		for _, r := range s.Required {
			if _, ok := m[r]; !ok {
				bad("required property %q missing", r)
			}
		}
		if s.Properties == nil {
			return errs // an object the facts do not restate (the pod template, metadata)
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			sub, ok := s.Properties[k]
			if !ok {
				bad("unknown field %q", k)
				continue
			}
			errs = append(errs, sub.validate(path+"."+k, m[k])...)
		}
	case "array":
		l, ok := v.([]any)
		if !ok {
			bad("got %T, want an array", v)
			return errs
		}
		if s.MaxItems != nil && len(l) > *s.MaxItems {
			bad("%d items, at most %d", len(l), *s.MaxItems)
		}
		for i, e := range l {
			if s.Items != nil {
				errs = append(errs, s.Items.validate(fmt.Sprintf("%s[%d]", path, i), e)...)
			}
		}
	case "string":
		str, ok := v.(string)
		if !ok {
			bad("got %T (%v), want a string", v, v)
			return errs
		}
		if s.Pattern != "" && !regexp.MustCompile(s.Pattern).MatchString(str) {
			bad("%q does not match %s", str, s.Pattern)
		}
		if s.MinLength != nil && len(str) < *s.MinLength {
			bad("%q shorter than %d", str, *s.MinLength)
		}
		if s.MaxLength != nil && len(str) > *s.MaxLength {
			bad("%q longer than %d", str, *s.MaxLength)
		}
	case "integer", "number":
		var n float64
		switch x := v.(type) {
		case int:
			n = float64(x)
		case float64:
			if s.Type == "integer" && x != float64(int64(x)) {
				bad("%v is not an integer", x)
			}
			n = x
		default:
			bad("got %T (%v), want an %s", v, v, s.Type)
			return errs
		}
		if s.Minimum != nil && n < *s.Minimum {
			bad("%v below the minimum %v", n, *s.Minimum)
		}
		if s.Maximum != nil && n > *s.Maximum {
			bad("%v above the maximum %v", n, *s.Maximum)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			bad("got %T (%v), want a boolean", v, v)
		}
	}
	if len(s.Enum) > 0 {
		found := false
		for _, e := range s.Enum {
			if fmt.Sprint(e) == fmt.Sprint(v) {
				found = true
			}
		}
		if !found {
			bad("%v is not one of %v", v, s.Enum)
		}
	}
	return errs
}

// TestChartWorkerControllerResources renders ci/worker-controller-values.yaml
// as an upgrade from 0.2.0 and checks its WorkerDeployment and Connection
// against the controller's CRD schemas (workercontroller/crd-facts.json,
// app version 1.8.1): group and version, every field known, of its type,
// within its bounds and patterns, every required property present, and the
// CEL rules the chart could break (a Progressive rollout has steps, each
// pause at least 30s; mTLS or an API key, not both; a name of at most 63
// characters). The worker gets its deployment name and build ID from the
// controller's variables, and writes what 0.2.0 replays.
func TestChartWorkerControllerResources(t *testing.T) {
	facts := loadCRDFacts(t)
	if facts.AppVersion != "1.8.1" {
		t.Fatalf("crd-facts.json is of app version %s; the chart's comments name 1.8.1", facts.AppVersion)
	}
	for _, args := range [][]string{
		{"--is-upgrade", "-f", filepath.Join(chartDir, "ci", "worker-controller-values.yaml")},
		{"-f", filepath.Join(chartDir, "ci", "worker-controller-values.yaml"), "--set", "temporalTLS.secretName=",
			"--set", "secrets.temporalAPIKey=key", "--set", "workerController.rollout.strategy=AllAtOnce"},
	} {
		objs, err := render(t, args...)
		if err != nil {
			t.Fatal(err)
		}
		checked := 0
		for _, o := range objs {
			k, ok := facts.Kinds[fmt.Sprint(o["kind"])]
			if !ok {
				continue
			}
			checked++
			if want := k.Group + "/" + k.Version; o["apiVersion"] != want {
				t.Errorf("%s: apiVersion %v, want %s", o["kind"], o["apiVersion"], want)
			}
			for _, e := range k.Schema.validate(fmt.Sprint(o["kind"]), o) {
				t.Error(e)
			}
			if name := fmt.Sprint(dig(o, "metadata", "name")); len(name) > 63 {
				t.Errorf("%s: name %q longer than 63", o["kind"], name)
			}
		}
		if checked != 2 {
			t.Fatalf("%v: checked %d resources, want a WorkerDeployment and a Connection", args, checked)
		}
		wd := findKind(objs, "WorkerDeployment", "orderflow-worker")[0]
		conn := findKind(objs, "Connection", "orderflow")[0]
		if dig(wd, "spec", "workerOptions", "connectionRef", "name") != dig(conn, "metadata", "name") {
			t.Errorf("the WorkerDeployment names Connection %v, the chart renders %v", dig(wd, "spec", "workerOptions", "connectionRef", "name"), dig(conn, "metadata", "name"))
		}
		if dig(conn, "spec", "mutualTLSSecretRef") != nil && dig(conn, "spec", "apiKeySecretRef") != nil {
			t.Error("the Connection has both mTLS and an API key")
		}
		if s := dig(wd, "spec", "rollout", "strategy"); s == "Progressive" {
			steps, _ := dig(wd, "spec", "rollout", "steps").([]any)
			if len(steps) == 0 {
				t.Error("a Progressive rollout without steps")
			}
			for _, st := range steps {
				d, err := time.ParseDuration(fmt.Sprint(dig(st, "pauseDuration")))
				if err != nil || d < 30*time.Second {
					t.Errorf("step %v: pause under 30s (%v)", st, err)
				}
			}
		}
		c := dig(wd, "spec", "template", "spec", "containers", 0)
		if got := fmt.Sprint(dig(c, "args")); got != "[-deployment-name=$(TEMPORAL_DEPLOYMENT_NAME) -build-id=$(TEMPORAL_WORKER_BUILD_ID)]" {
			t.Errorf("the worker's args %s do not take the controller's variables", got)
		}
		env := envOf(t, map[string]any{"kind": "WorkerDeployment", "spec": dig(wd, "spec")})
		for _, name := range []string{"TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "TEMPORAL_DEPLOYMENT_NAME", "TEMPORAL_WORKER_BUILD_ID"} {
			if _, ok := env[name]; ok {
				t.Errorf("the pod template sets %s, which the controller sets", name)
			}
		}
		if dig(conn, "spec", "apiKeySecretRef") != nil {
			if _, ok := env["TEMPORAL_API_KEY"]; ok {
				t.Error("the pod template sets TEMPORAL_API_KEY beside the Connection's")
			}
		}
		if args[0] == "--is-upgrade" {
			if env["ORDERFLOW_WORKER_WORKFLOW_VERSION"] != "5" {
				t.Errorf("upgrading from 0.2.0 the workers write %q, want 5", env["ORDERFLOW_WORKER_WORKFLOW_VERSION"])
			}
			checkWorkers(t, objs, map[string]workerWant{"orderflow-worker-unversioned": {image: "orderflow:0.2.0"}})
		} else if len(workerDeployments(objs)) != 0 {
			t.Errorf("a first install with the controller renders worker Deployments %v", names(workerDeployments(objs)))
		}
	}

	// The CRD facts catch what the API server would refuse.
	f := loadCRDFacts(t).Kinds["WorkerDeployment"].Schema
	bad := map[string]any{"spec": map[string]any{"rollout": map[string]any{"strategy": "Gradual"}, "sunset": map[string]any{},
		"template": map[string]any{}, "workerOptions": map[string]any{"connectionRef": map[string]any{"name": "x"}, "temporalNamespace": ""}, "replica": 2}}
	got := strings.Join(f.validate("WorkerDeployment", bad), "\n")
	for _, want := range []string{`unknown field "replica"`, "not one of", "shorter than 1"} {
		if !strings.Contains(got, want) {
			t.Errorf("a bad WorkerDeployment: want %q among\n%s", want, got)
		}
	}
}
