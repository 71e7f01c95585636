package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// swaggerFixture is a Kubernetes OpenAPI document in miniature: a kind
// whose spec refers to an int-or-string, a quantity and a recursive type.
const swaggerFixture = `{
  "swagger": "2.0",
  "definitions": {
    "io.k8s.api.apps.v1.Widget": {
      "type": "object",
      "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "spec": {"$ref": "#/definitions/io.k8s.api.apps.v1.WidgetSpec"}
      },
      "x-kubernetes-group-version-kind": [{"group": "apps", "kind": "Widget", "version": "v1"}]
    },
    "io.k8s.api.apps.v1.WidgetSpec": {
      "type": "object",
      "required": ["port"],
      "properties": {
        "port": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.util.intstr.IntOrString"},
        "memory": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.api.resource.Quantity"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "child": {"$ref": "#/definitions/io.k8s.api.apps.v1.WidgetSpec"}
      }
    },
    "io.k8s.api.core.v1.Unused": {"type": "object", "properties": {"x": {"type": "string"}}},
    "io.k8s.api.core.v1.Gadget": {
      "type": "object",
      "properties": {"kind": {"type": "string"}},
      "x-kubernetes-group-version-kind": [{"group": "", "kind": "Gadget", "version": "v1"}]
    },
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": {"type": "string", "format": "int-or-string"},
    "io.k8s.apimachinery.pkg.api.resource.Quantity": {"type": "string"}
  }
}`

const crdFixture = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: monitors.monitoring.example.com
spec:
  group: monitoring.example.com
  names: {kind: Monitor, plural: monitors}
  versions:
    - name: v1
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                interval: {type: string}
                extra:
                  type: object
                  x-kubernetes-preserve-unknown-fields: true
                  properties:
                    known: {type: string}
`

func TestSchemasAreStandaloneAndStrict(t *testing.T) {
	dir := t.TempDir()
	sw := filepath.Join(dir, "swagger.json")
	crd := filepath.Join(dir, "crd.yaml")
	if err := os.WriteFile(sw, []byte(swaggerFixture), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(crd, []byte(crdFixture), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if err := run([]string{"-swagger", sw, "-kubernetes-version", "1.30.0", "-out", dir, crd}, &out, &errOut); err != nil {
		t.Fatalf("run: %v\n%s", err, errOut.String())
	}
	read := func(name string) map[string]any {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, "v1.30.0-standalone-strict", name))
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}

	// kubeconform's file names: kind, the group's first label unless core,
	// the version.
	w := read("widget-apps-v1.json")
	read("gadget-v1.json")
	mon := read("monitor-monitoring-v1.json")

	// Standalone: every definition it refers to, and no other.
	defs, _ := w["definitions"].(map[string]any)
	for _, want := range []string{"io.k8s.api.apps.v1.WidgetSpec", "io.k8s.apimachinery.pkg.util.intstr.IntOrString",
		"io.k8s.apimachinery.pkg.api.resource.Quantity"} {
		if _, ok := defs[want]; !ok {
			t.Errorf("widget schema lacks definition %s", want)
		}
	}
	if _, ok := defs["io.k8s.api.core.v1.Unused"]; ok {
		t.Error("widget schema carries a definition it does not use")
	}
	b, _ := json.Marshal(w)
	for _, ref := range strings.Split(string(b), `"$ref":"#/definitions/`)[1:] {
		name := ref[:strings.IndexByte(ref, '"')]
		if _, ok := defs[name]; !ok {
			t.Errorf("widget schema refers to %s, which it does not carry", name)
		}
	}

	// Strict: objects with properties reject others; maps stay maps.
	if w["additionalProperties"] != false {
		t.Error("the root of the widget schema allows unknown properties")
	}
	spec, _ := defs["io.k8s.api.apps.v1.WidgetSpec"].(map[string]any)
	if spec["additionalProperties"] != false {
		t.Error("WidgetSpec allows unknown properties")
	}
	labels := spec["properties"].(map[string]any)["labels"].(map[string]any)
	if ap, ok := labels["additionalProperties"].(map[string]any); !ok || ap["type"] != "string" {
		t.Errorf("a map of strings became %v", labels)
	}
	// int-or-string and quantity take what the API server takes.
	if got, _ := json.Marshal(defs["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]); !strings.Contains(string(got), `"oneOf":[{"type":"string"},{"type":"integer"}]`) {
		t.Errorf("IntOrString = %s", got)
	}
	if got, _ := json.Marshal(defs["io.k8s.apimachinery.pkg.api.resource.Quantity"]); !strings.Contains(string(got), `"oneOf":[{"type":"string"},{"type":"number"}]`) {
		t.Errorf("Quantity = %s", got)
	}

	// A CRD: strict too, except where it preserves unknown fields.
	mspec := mon["properties"].(map[string]any)["spec"].(map[string]any)
	if mspec["additionalProperties"] != false {
		t.Error("the CRD's spec allows unknown properties")
	}
	if _, ok := mspec["properties"].(map[string]any)["extra"].(map[string]any)["additionalProperties"]; ok {
		t.Error("a field that preserves unknown fields was made strict")
	}
	if !strings.Contains(out.String(), "3 schemas for Kubernetes 1.30.0") {
		t.Errorf("output: %s", out.String())
	}
}

func TestRunNeedsItsFlags(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := run(nil, &out, &errOut); err == nil {
		t.Error("run without flags succeeded")
	}
}
