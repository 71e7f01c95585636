package deploy

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// helmVersion is the helm scripts/deploy-check.sh builds into the cache.
const helmVersion = "v3.22.0"

// helmBinary is ORDERFLOW_HELM, or the helm `make deploy-check` builds into
// the cache (ORDERFLOW_CACHE, default ~/.cache/orderflow).
func helmBinary(t *testing.T) string {
	t.Helper()
	if h := os.Getenv("ORDERFLOW_HELM"); h != "" {
		return h
	}
	cache := os.Getenv("ORDERFLOW_CACHE")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Fatal(err)
		}
		cache = filepath.Join(home, ".cache", "orderflow")
	}
	h := filepath.Join(cache, "tools", "helm-"+helmVersion)
	if _, err := os.Stat(h); err != nil {
		t.Fatalf("helm %s not found at %s: run `make deploy-check` once (it builds helm into the cache), or set ORDERFLOW_HELM", helmVersion, h)
	}
	return h
}

// render runs helm template on the chart with args and returns the objects
// it renders, or helm's error output.
func render(t *testing.T, args ...string) ([]map[string]any, error) {
	t.Helper()
	cmd := exec.Command(helmBinary(t), append([]string{"template", "orderflow", chartDir}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return nil, errors.New(errOut.String())
	}
	var objs []map[string]any
	dec := yaml.NewDecoder(&out)
	for {
		var o map[string]any
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			t.Fatalf("rendered YAML: %v", err)
		}
		if o != nil {
			objs = append(objs, o)
		}
	}
}

// dig walks nested maps and lists by key or index.
func dig(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

// find returns the rendered object of kind and name.
func find(objs []map[string]any, kind, name string) map[string]any {
	for _, o := range objs {
		if o["kind"] == kind && dig(o, "metadata", "name") == name {
			return o
		}
	}
	return nil
}

// databaseRef is the Secret and key the first container of a workload
// reads DATABASE_URL from ("" when it is not from a Secret).
func databaseRef(t *testing.T, o map[string]any) (secret, key string) {
	t.Helper()
	envs, _ := dig(o, "spec", "template", "spec", "containers", 0, "env").([]any)
	for _, e := range envs {
		if dig(e, "name") == "DATABASE_URL" {
			ref := dig(e, "valueFrom", "secretKeyRef")
			s, _ := dig(ref, "name").(string)
			k, _ := dig(ref, "key").(string)
			return s, k
		}
	}
	t.Fatalf("%s %v sets no DATABASE_URL", o["kind"], dig(o, "metadata", "name"))
	return "", ""
}

// secretValue decodes one key of a rendered Secret.
func secretValue(t *testing.T, o map[string]any, key string) string {
	t.Helper()
	s, _ := dig(o, "data", key).(string)
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatalf("decode %s: %v", key, err)
	}
	return string(b)
}

const (
	ownerURL   = "postgres://orderflow:owner-pw@db:5432/orderflow?sslmode=verify-full"
	runtimeURL = "postgres://orderflow_app:app-pw@db:5432/orderflow?sslmode=verify-full"
)

// TestChartSplitsTheDatabaseRoles: the migration Job, and it alone, reads
// the owner's URL, from a Secret of its own (made by the chart as a hook
// before the Job, or the operator's); the worker and the bridge read the
// runtime role's from the release's Secret.
func TestChartSplitsTheDatabaseRoles(t *testing.T) {
	objs, err := render(t, "--set", "secrets.databaseURL="+runtimeURL, "--set", "migration.databaseURL="+ownerURL)
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	job := find(objs, "Job", "orderflow-migrate")
	hookSecret := find(objs, "Secret", "orderflow-migrate")
	release := find(objs, "Secret", "orderflow")
	if job == nil || hookSecret == nil || release == nil {
		t.Fatalf("want the Job orderflow-migrate, its Secret orderflow-migrate and the Secret orderflow; rendered %d objects", len(objs))
	}
	if s, k := databaseRef(t, job); s != "orderflow-migrate" || k != "DATABASE_URL" {
		t.Errorf("the Job reads DATABASE_URL from %s/%s, want orderflow-migrate/DATABASE_URL", s, k)
	}
	if got := secretValue(t, hookSecret, "DATABASE_URL"); got != ownerURL {
		t.Errorf("the Job's Secret holds %q, want the owner's URL", got)
	}
	if got := secretValue(t, release, "DATABASE_URL"); got != runtimeURL {
		t.Errorf("the release's Secret holds %q, want the runtime URL", got)
	}
	workloads := findKind(objs, "Deployment", "orderflow-")
	if len(workloads) < 2 {
		t.Fatalf("want the worker and the bridge Deployments, got %d", len(workloads))
	}
	for _, d := range workloads {
		if s, k := databaseRef(t, d); s != "orderflow" || k != "DATABASE_URL" {
			t.Errorf("%v reads DATABASE_URL from %s/%s, want the release's Secret orderflow", dig(d, "metadata", "name"), s, k)
		}
	}
	// The owner's Secret is a hook made before the Job and deleted after.
	ann := func(o map[string]any, k string) string {
		s, _ := dig(o, "metadata", "annotations", k).(string)
		return s
	}
	if ann(hookSecret, "helm.sh/hook") != ann(job, "helm.sh/hook") || ann(hookSecret, "helm.sh/hook") == "" {
		t.Errorf("the owner's Secret is hook %q, the Job %q: want the same hooks", ann(hookSecret, "helm.sh/hook"), ann(job, "helm.sh/hook"))
	}
	if w := ann(hookSecret, "helm.sh/hook-weight"); w == "" || !strings.HasPrefix(w, "-") || ann(job, "helm.sh/hook-weight") != "" {
		t.Errorf("hook weights: Secret %q, Job %q; want the Secret's below the Job's (0)", w, ann(job, "helm.sh/hook-weight"))
	}
	if !strings.Contains(ann(hookSecret, "helm.sh/hook-delete-policy"), "hook-succeeded") {
		t.Errorf("the owner's Secret stays after the Job: delete policy %q", ann(hookSecret, "helm.sh/hook-delete-policy"))
	}

	// A Secret of one's own for the owner: no hook Secret.
	objs, err = render(t, "--set", "secrets.databaseURL="+runtimeURL,
		"--set", "migration.existingSecret=db-owner", "--set", "migration.existingSecretKey=OWNER_URL")
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	if s, k := databaseRef(t, find(objs, "Job", "orderflow-migrate")); s != "db-owner" || k != "OWNER_URL" {
		t.Errorf("with migration.existingSecret the Job reads %s/%s, want db-owner/OWNER_URL", s, k)
	}
	if find(objs, "Secret", "orderflow-migrate") != nil {
		t.Error("with migration.existingSecret the chart still makes a Secret for the owner's URL")
	}
}

// TestChartRefusesMixedUpDatabaseRoles: the migration Job needs the
// owner's URL, not the runtime one, and over TLS unless
// secrets.insecureDatabase says otherwise.
func TestChartRefusesMixedUpDatabaseRoles(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"no owner URL", []string{"secrets.databaseURL=" + runtimeURL}, "migration.databaseURL (the database owner's URL"},
		{"the runtime URL as the owner's", []string{"secrets.databaseURL=" + runtimeURL, "migration.databaseURL=" + runtimeURL},
			"migration.databaseURL equals secrets.databaseURL"},
		{"an owner URL without TLS", []string{"secrets.databaseURL=" + runtimeURL,
			"migration.databaseURL=postgres://orderflow:pw@db:5432/orderflow?sslmode=disable"}, "migration.databaseURL has sslmode=disable"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var args []string
			for _, a := range c.args {
				args = append(args, "--set", a)
			}
			_, err := render(t, args...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("helm template %v: %v, want a refusal saying %q", c.args, err, c.want)
			}
		})
	}
	// Without the Job, no owner URL is needed; insecureDatabase covers both.
	if _, err := render(t, "--set", "secrets.databaseURL="+runtimeURL, "--set", "migration.enabled=false"); err != nil {
		t.Errorf("migration.enabled=false: %v", err)
	}
	if _, err := render(t, "--set", "secrets.databaseURL=postgres://a:b@db:5432/orderflow?sslmode=disable",
		"--set", "migration.databaseURL=postgres://o:p@db:5432/orderflow?sslmode=disable", "--set", "secrets.insecureDatabase=true"); err != nil {
		t.Errorf("insecureDatabase with both URLs without TLS: %v", err)
	}
}
