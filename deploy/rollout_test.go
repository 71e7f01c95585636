package deploy

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestChartRunsOneWorkerDeploymentPerBuild renders the middle of a rollout
// (ci/rollout-values.yaml: builds 0.2.0 and 0.3.0 of the Worker Deployment
// orderflow, the chart at 0.3.0, the bridges kept at 0.2.0): each build is
// a Deployment and an autoscaler of its own, whose pods alone its selector
// picks, on its image, telling the worker its deployment name and build
// ID; the migration Job runs the chart's image, the bridges theirs. With
// worker.versioning.unversioned the unversioned Deployment runs too. Two
// build IDs that make one Deployment name are refused.
func TestChartRunsOneWorkerDeploymentPerBuild(t *testing.T) {
	objs, err := render(t, "-f", filepath.Join(chartDir, "ci", "rollout-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	type build struct{ id, tag, workflowVersion string }
	builds := []build{{"0.2.0", "0.2.0", ""}, {"0.3.0", "0.3.0", "5"}}
	selectors := map[string]string{}
	for _, b := range builds {
		name := "orderflow-worker-" + strings.ReplaceAll(b.id, ".", "-")
		d := find(objs, "Deployment", name)
		if d == nil {
			t.Fatalf("no Deployment %s for build %s", name, b.id)
		}
		sel := fmt.Sprint(dig(d, "spec", "selector", "matchLabels"))
		if other, ok := selectors[sel]; ok {
			t.Errorf("the Deployments of %s and %s select the same pods (%s)", other, b.id, sel)
		}
		selectors[sel] = b.id
		if got := dig(d, "spec", "template", "metadata", "labels", "orderflow.io/worker-build"); got != dig(d, "spec", "selector", "matchLabels", "orderflow.io/worker-build") || got == nil {
			t.Errorf("build %s: its pods' label %v is not its selector's", b.id, got)
		}
		c := dig(d, "spec", "template", "spec", "containers", 0)
		if img := dig(c, "image"); img != "orderflow:"+b.tag {
			t.Errorf("build %s runs image %v, want orderflow:%s", b.id, img, b.tag)
		}
		env := map[string]string{}
		for _, e := range dig(c, "env").([]any) {
			env[fmt.Sprint(dig(e, "name"))] = fmt.Sprint(dig(e, "value"))
		}
		want := map[string]string{"ORDERFLOW_WORKER_DEPLOYMENT_NAME": "orderflow", "ORDERFLOW_WORKER_BUILD_ID": b.id}
		if b.workflowVersion != "" {
			want["ORDERFLOW_WORKER_WORKFLOW_VERSION"] = b.workflowVersion
		}
		for k, v := range want {
			if env[k] != v {
				t.Errorf("build %s: %s=%q, want %q", b.id, k, env[k], v)
			}
		}
		if _, ok := env["ORDERFLOW_WORKER_WORKFLOW_VERSION"]; ok && b.workflowVersion == "" {
			t.Errorf("build %s sets ORDERFLOW_WORKER_WORKFLOW_VERSION unasked", b.id)
		}
		if h := find(objs, "HorizontalPodAutoscaler", name); h == nil || dig(h, "spec", "scaleTargetRef", "name") != name {
			t.Errorf("build %s has no autoscaler of its own", b.id)
		}
	}
	if d := find(objs, "Deployment", "orderflow-worker"); d != nil {
		t.Error("an unversioned worker Deployment runs beside the builds")
	}
	if img := dig(find(objs, "Deployment", "orderflow-bridge"), "spec", "template", "spec", "containers", 0, "image"); img != "orderflow:0.2.0" {
		t.Errorf("the bridges run %v, want bridge.imageTag's orderflow:0.2.0", img)
	}
	if img := dig(find(objs, "Job", "orderflow-migrate"), "spec", "template", "spec", "containers", 0, "image"); img != "orderflow:0.3.0" {
		t.Errorf("the migration Job runs %v, want the chart's orderflow:0.3.0", img)
	}

	// Turning versioning on: the unversioned Deployment stays beside the builds.
	objs, err = render(t, "-f", filepath.Join(chartDir, "ci", "rollout-values.yaml"), "--set", "worker.versioning.unversioned=true")
	if err != nil {
		t.Fatal(err)
	}
	if d := find(objs, "Deployment", "orderflow-worker"); d == nil || find(objs, "Deployment", "orderflow-worker-0-3-0") == nil {
		t.Error("with worker.versioning.unversioned, the unversioned worker Deployment and the builds' should all run")
	} else if env := fmt.Sprint(dig(d, "spec", "template", "spec", "containers", 0, "env")); strings.Contains(env, "ORDERFLOW_WORKER_BUILD_ID") {
		t.Errorf("the unversioned worker has a build ID: %s", env)
	}

	_, err = render(t, "-f", filepath.Join(chartDir, "ci", "rollout-values.yaml"),
		"--set-json", `worker.versioning.builds=[{"buildId":"v1.0"},{"buildId":"V1_0"}]`)
	if err == nil || !strings.Contains(err.Error(), "make the same Deployment name") {
		t.Errorf("two build IDs of one Deployment name: %v, want refused", err)
	}
}
