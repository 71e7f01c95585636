// Command kubeschema writes the JSON schemas kubeconform validates
// Kubernetes manifests with, from sources that need no network beyond the
// Go module proxy: the OpenAPI (Swagger 2.0) document a Kubernetes release
// publishes (api/openapi-spec/swagger.json of the k8s.io/kubernetes module)
// and CustomResourceDefinition manifests (the Prometheus Operator's
// ServiceMonitor and PrometheusRule, from its module).
//
// kubeconform downloads the same kind of schemas from
// github.com/yannh/kubernetes-json-schema by default, which these machines
// cannot reach. This command makes them the way that repository's
// openapi2jsonschema does, in its layout, for the strict mode only:
//
//	<out>/v<version>-standalone-strict/<kind>-<group>-<version>.json
//
// Each file is standalone: the kind's schema with every definition it
// refers to under "definitions". Strict means every object schema that
// lists its properties rejects any other (additionalProperties: false,
// as kubectl's validation does), so a misspelt field fails. As in
// openapi2jsonschema, a property of format int-or-string takes a string or
// an integer, and a resource.Quantity a string or a number, as the API
// server accepts.
//
// Usage:
//
//	kubeschema -swagger swagger.json -kubernetes-version 1.37.2 -out DIR [CRD.yaml ...]
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "kubeschema:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kubeschema", flag.ContinueOnError)
	fs.SetOutput(stderr)
	swagger := fs.String("swagger", "", "the Kubernetes OpenAPI v2 document (swagger.json)")
	version := fs.String("kubernetes-version", "", "the Kubernetes version it describes, as kubeconform's -kubernetes-version takes it (1.37.2)")
	out := fs.String("out", "", "directory to write the schemas to")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *swagger == "" || *version == "" || *out == "" {
		fs.Usage()
		return errors.New("-swagger, -kubernetes-version and -out are required")
	}
	schemas, err := fromSwagger(*swagger)
	if err != nil {
		return err
	}
	for _, crd := range fs.Args() {
		s, err := fromCRDs(crd)
		if err != nil {
			return err
		}
		for k, v := range s {
			schemas[k] = v
		}
	}
	dir := filepath.Join(*out, "v"+strings.TrimPrefix(*version, "v")+"-standalone-strict")
	if err := write(dir, schemas); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "kubeschema: %d schemas for Kubernetes %s in %s\n", len(schemas), *version, dir)
	return nil
}

// gvk is a kind of resource.
type gvk struct {
	Group, Version, Kind string
}

// fileName is the name kubeconform looks the kind's schema up by (see its
// registry.schemaPath): the kind, then the group's first DNS label unless
// the group is core, then the version, in lower case.
func (k gvk) fileName() string {
	suffix := "-" + strings.ToLower(k.Version)
	if k.Group != "" {
		suffix = "-" + strings.ToLower(strings.Split(k.Group, ".")[0]) + suffix
	}
	return strings.ToLower(k.Kind) + suffix + ".json"
}

const (
	defsPrefix   = "#/definitions/"
	intOrString  = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
	quantity     = "io.k8s.apimachinery.pkg.api.resource.Quantity"
	gvkExtension = "x-kubernetes-group-version-kind"
)

// fromSwagger returns a standalone strict schema for every kind the
// document's definitions declare.
func fromSwagger(path string) (map[gvk]map[string]any, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Definitions map[string]map[string]any `json:"definitions"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(doc.Definitions) == 0 {
		return nil, fmt.Errorf("%s: no definitions", path)
	}
	defs := map[string]any{}
	for name, d := range doc.Definitions {
		switch name {
		case quantity:
			defs[name] = oneOf(d, "string", "number")
		default:
			defs[name] = strict(d)
		}
	}
	out := map[gvk]map[string]any{}
	names := make([]string, 0, len(doc.Definitions))
	for n := range doc.Definitions {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		list, _ := doc.Definitions[name][gvkExtension].([]any)
		for _, x := range list {
			m, _ := x.(map[string]any)
			k := gvk{Group: str(m["group"]), Version: str(m["version"]), Kind: str(m["kind"])}
			if k.Kind == "" || k.Version == "" {
				continue
			}
			root := copyMap(defs[name].(map[string]any))
			closure := map[string]any{}
			if err := collect(root, defs, closure); err != nil {
				return nil, fmt.Errorf("%s: %s: %w", path, name, err)
			}
			if len(closure) > 0 {
				root["definitions"] = closure
			}
			root["$schema"] = "http://json-schema.org/draft-04/schema#"
			// The first definition to declare a kind wins: a kind shared by
			// several definitions (DeleteOptions, WatchEvent) is not a
			// resource anyone writes a manifest of.
			if _, ok := out[k]; !ok {
				out[k] = root
			}
		}
	}
	return out, nil
}

// fromCRDs returns a standalone strict schema for every version of every
// CustomResourceDefinition in the YAML file.
func fromCRDs(path string) (map[gvk]map[string]any, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[gvk]map[string]any{}
	dec := yaml.NewDecoder(f)
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if str(doc["kind"]) != "CustomResourceDefinition" {
			continue
		}
		spec, _ := doc["spec"].(map[string]any)
		names, _ := spec["names"].(map[string]any)
		versions, _ := spec["versions"].([]any)
		for _, v := range versions {
			vm, _ := v.(map[string]any)
			sch, _ := vm["schema"].(map[string]any)
			s, ok := sch["openAPIV3Schema"].(map[string]any)
			if !ok {
				continue
			}
			k := gvk{Group: str(spec["group"]), Version: str(vm["name"]), Kind: str(names["kind"])}
			root := strict(s).(map[string]any)
			root["$schema"] = "http://json-schema.org/draft-04/schema#"
			out[k] = root
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no CustomResourceDefinition with a schema", path)
	}
	return out, nil
}

// strict returns a copy of the schema s in which every object schema that
// lists properties, and does not say otherwise, rejects other properties,
// and every int-or-string takes a string or an integer.
func strict(s any) any {
	switch s := s.(type) {
	case map[string]any:
		if s["format"] == "int-or-string" {
			return oneOf(s, "string", "integer")
		}
		out := make(map[string]any, len(s)+1)
		for k, v := range s {
			switch k {
			case "properties", "definitions", "patternProperties":
				// Maps of names to schemas: the names are not keywords.
				m, _ := v.(map[string]any)
				props := make(map[string]any, len(m))
				for name, ps := range m {
					props[name] = strict(ps)
				}
				out[k] = props
			default:
				out[k] = strict(v)
			}
		}
		_, has := s["additionalProperties"]
		preserve, _ := s["x-kubernetes-preserve-unknown-fields"].(bool)
		if _, ok := s["properties"]; ok && !has && !preserve {
			out["additionalProperties"] = false
		}
		return out
	case []any:
		out := make([]any, len(s))
		for i, v := range s {
			out[i] = strict(v)
		}
		return out
	}
	return s
}

// oneOf replaces s's type by a choice of the given types, keeping its
// description.
func oneOf(s map[string]any, types ...string) map[string]any {
	alts := make([]any, len(types))
	for i, t := range types {
		alts[i] = map[string]any{"type": t}
	}
	out := map[string]any{"oneOf": alts}
	if d, ok := s["description"]; ok {
		out["description"] = d
	}
	return out
}

// collect adds to closure every definition s refers to, directly or not.
func collect(s any, defs, closure map[string]any) error {
	switch s := s.(type) {
	case map[string]any:
		if ref, ok := s["$ref"].(string); ok {
			name, ok := strings.CutPrefix(ref, defsPrefix)
			if !ok {
				return fmt.Errorf("reference %q is not to a definition", ref)
			}
			if _, seen := closure[name]; !seen {
				d, ok := defs[name]
				if !ok {
					return fmt.Errorf("reference to an unknown definition %q", name)
				}
				closure[name] = d
				if err := collect(d, defs, closure); err != nil {
					return err
				}
			}
		}
		for _, v := range s {
			if err := collect(v, defs, closure); err != nil {
				return err
			}
		}
	case []any:
		for _, v := range s {
			if err := collect(v, defs, closure); err != nil {
				return err
			}
		}
	}
	return nil
}

func write(dir string, schemas map[gvk]map[string]any) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for k, s := range schemas {
		b, err := json.Marshal(s)
		if err != nil {
			return fmt.Errorf("%s: %w", k.fileName(), err)
		}
		if err := os.WriteFile(filepath.Join(dir, k.fileName()), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func copyMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func str(v any) string {
	s, _ := v.(string)
	return s
}
