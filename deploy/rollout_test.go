package deploy

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// dbArgs are the two database URLs every render needs.
var dbArgs = []string{"--set", "secrets.databaseURL=" + runtimeURL, "--set", "migration.databaseURL=" + ownerURL}

// workerDeployments are the rendered worker Deployments by name.
func workerDeployments(objs []map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, d := range findKind(objs, "Deployment", "orderflow-worker") {
		out[fmt.Sprint(dig(d, "metadata", "name"))] = d
	}
	return out
}

func names[V any](m map[string]V) []string {
	var ns []string
	for n := range m {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}

// matches says whether a matchLabels selector picks pods labelled labels.
func matches(selector, labels any) bool {
	sel, _ := selector.(map[string]any)
	lab, _ := labels.(map[string]any)
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if fmt.Sprint(lab[k]) != fmt.Sprint(v) {
			return false
		}
	}
	return true
}

// checkSelectors: each worker Deployment's selector picks its own pods and
// no other Deployment's, and so do its autoscaler (by its target) and its
// disruption budget.
func checkSelectors(t *testing.T, objs []map[string]any) {
	t.Helper()
	ds := workerDeployments(objs)
	for an, a := range ds {
		sel := dig(a, "spec", "selector", "matchLabels")
		if !matches(sel, dig(a, "spec", "template", "metadata", "labels")) {
			t.Errorf("%s: its selector %v does not pick its own pods", an, sel)
		}
		for bn, b := range ds {
			if an != bn && matches(sel, dig(b, "spec", "template", "metadata", "labels")) {
				t.Errorf("%s's selector %v picks the pods of %s", an, sel, bn)
			}
		}
		if h := find(objs, "HorizontalPodAutoscaler", an); h != nil && dig(h, "spec", "scaleTargetRef", "name") != an {
			t.Errorf("autoscaler %s scales %v", an, dig(h, "spec", "scaleTargetRef", "name"))
		}
		pdb := find(objs, "PodDisruptionBudget", an)
		if pdb == nil {
			t.Errorf("%s has no disruption budget of its own", an)
			continue
		}
		for bn, b := range ds {
			if picks := matches(dig(pdb, "spec", "selector", "matchLabels"), dig(b, "spec", "template", "metadata", "labels")); picks != (an == bn) {
				t.Errorf("disruption budget %s picks the pods of %s: %v", an, bn, picks)
			}
		}
	}
}

// workerWant is what one worker Deployment runs.
type workerWant struct {
	image, buildID, workflowVersion string // "" : the variable is not set
}

func checkWorkers(t *testing.T, objs []map[string]any, want map[string]workerWant) {
	t.Helper()
	ds := workerDeployments(objs)
	if got := names(ds); fmt.Sprint(got) != fmt.Sprint(names(want)) {
		t.Fatalf("worker Deployments %v, want %v", got, names(want))
	}
	for n, w := range want {
		d := ds[n]
		if img := dig(d, "spec", "template", "spec", "containers", 0, "image"); img != w.image {
			t.Errorf("%s runs %v, want %s", n, img, w.image)
		}
		env := envOf(t, d)
		wantEnv := map[string]string{"ORDERFLOW_WORKER_BUILD_ID": w.buildID, "ORDERFLOW_WORKER_WORKFLOW_VERSION": w.workflowVersion,
			"ORDERFLOW_WORKER_DEPLOYMENT_NAME": ""}
		if w.buildID != "" {
			wantEnv["ORDERFLOW_WORKER_DEPLOYMENT_NAME"] = "orderflow"
		}
		for k, v := range wantEnv {
			if env[k] != v {
				t.Errorf("%s: %s=%q, want %q", n, k, env[k], v)
			}
		}
	}
	checkSelectors(t, objs)
}

func image(objs []map[string]any, kind, name string) any {
	return dig(find(objs, kind, name), "spec", "template", "spec", "containers", 0, "image")
}

// setCurrent is the set-current hook Job's hooks and command ("" when none).
func setCurrent(objs []map[string]any) (hooks, cmd string) {
	j := find(objs, "Job", "orderflow-set-current")
	if j == nil {
		return "", ""
	}
	c := dig(j, "spec", "template", "spec", "containers", 0)
	cmd = fmt.Sprint(dig(c, "args", 0))
	for _, e := range dig(c, "env").([]any) {
		if dig(e, "name") == "BUILD_ID" {
			cmd = strings.ReplaceAll(cmd, `"$BUILD_ID"`, fmt.Sprint(dig(e, "value")))
		}
	}
	return fmt.Sprint(dig(j, "metadata", "annotations", "helm.sh/hook")), cmd
}

// TestChartUpgradesSafelyByDefault renders what `helm upgrade` from 0.2.0
// (its defaults: unversioned workers) applies with this chart's defaults and
// a new image tag: the 0.2.0 workers stay, on their image, beside the new
// build, which writes the workflow version 0.2.0 replays and takes no task
// until promoted; the bridges stay on 0.2.0; no selector overlaps another's
// pods; `helm rollback` makes the unversioned workers current again.
func TestChartUpgradesSafelyByDefault(t *testing.T) {
	objs, err := render(t, append([]string{"--is-upgrade", "--set", "image.tag=0.3.0"}, dbArgs...)...)
	if err != nil {
		t.Fatal(err)
	}
	checkWorkers(t, objs, map[string]workerWant{
		"orderflow-worker-unversioned": {image: "orderflow:0.2.0"},
		"orderflow-worker-0-3-0":       {image: "orderflow:0.3.0", buildID: "0.3.0", workflowVersion: "5"},
	})
	if img := image(objs, "Deployment", "orderflow-bridge"); img != "orderflow:0.2.0" {
		t.Errorf("the bridges run %v before the new build is promoted, want orderflow:0.2.0", img)
	}
	if img := image(objs, "Job", "orderflow-migrate"); img != "orderflow:0.3.0" {
		t.Errorf("the migration Job runs %v, want the new orderflow:0.3.0", img)
	}
	if hooks, cmd := setCurrent(objs); hooks != "post-rollback" || !strings.Contains(cmd, "--unversioned") {
		t.Errorf("set-current hook %q running %q; want it after a rollback only, making the unversioned workers current", hooks, cmd)
	}

	// Promoted: the new build alone, current (after the upgrade and after a
	// rollback to this revision), the bridges on it, still writing 5 while
	// the values name 0.2.0 as current.
	objs, err = render(t, append([]string{"--is-upgrade", "--set", "image.tag=0.3.0", "--set", "worker.versioning.promote=true"}, dbArgs...)...)
	if err != nil {
		t.Fatal(err)
	}
	checkWorkers(t, objs, map[string]workerWant{"orderflow-worker-0-3-0": {image: "orderflow:0.3.0", buildID: "0.3.0", workflowVersion: "5"}})
	if img := image(objs, "Deployment", "orderflow-bridge"); img != "orderflow:0.3.0" {
		t.Errorf("the bridges run %v once promoted, want orderflow:0.3.0", img)
	}
	if hooks, cmd := setCurrent(objs); hooks != "post-install,post-upgrade,post-rollback" || !strings.Contains(cmd, "--build-id 0.3.0") {
		t.Errorf("promoted: set-current hook %q running %q", hooks, cmd)
	}

	// Named current: it writes its own newest version (no pin).
	objs, err = render(t, append([]string{"--is-upgrade", "--set", "image.tag=0.3.0", "--set-json",
		`worker.versioning.current={"buildId":"0.3.0","tag":"0.3.0","workflowVersion":6}`, "--set", "worker.versioning.unversioned=false"}, dbArgs...)...)
	if err != nil {
		t.Fatal(err)
	}
	checkWorkers(t, objs, map[string]workerWant{"orderflow-worker-0-3-0": {image: "orderflow:0.3.0", buildID: "0.3.0"}})

	// A first install: the new build alone, current, writing its newest.
	objs, err = render(t, append([]string{"--set", "image.tag=0.3.0"}, dbArgs...)...)
	if err != nil {
		t.Fatal(err)
	}
	checkWorkers(t, objs, map[string]workerWant{"orderflow-worker-0-3-0": {image: "orderflow:0.3.0", buildID: "0.3.0"}})
	if hooks, _ := setCurrent(objs); !strings.Contains(hooks, "post-install") {
		t.Errorf("a first install does not make its build current: hooks %q", hooks)
	}
}

// TestChartRunsOneWorkerDeploymentPerBuild renders the middle of a
// versioned rollout (ci/rollout-values.yaml: current build 0.3.0, the chart
// at 0.4.0) as an upgrade: each build is a Deployment, an autoscaler and a
// disruption budget of its own on its image, telling the worker its
// deployment name and build ID; the new one writes what 0.3.0 replays.
// `--set image.tag=0.4.1` alone keeps the current build and replaces only
// the new one. Unversioned workers keep 0.2.0's Deployment and selector
// (which Kubernetes does not let change) and are pinned too. Two build IDs
// that make one Deployment name are refused.
func TestChartRunsOneWorkerDeploymentPerBuild(t *testing.T) {
	rollout := []string{"--is-upgrade", "-f", filepath.Join(chartDir, "ci", "rollout-values.yaml")}
	objs, err := render(t, rollout...)
	if err != nil {
		t.Fatal(err)
	}
	checkWorkers(t, objs, map[string]workerWant{
		"orderflow-worker-0-3-0": {image: "orderflow:0.3.0", buildID: "0.3.0"},
		"orderflow-worker-0-4-0": {image: "orderflow:0.4.0", buildID: "0.4.0", workflowVersion: "6"},
	})
	if img := image(objs, "Deployment", "orderflow-bridge"); img != "orderflow:0.3.0" {
		t.Errorf("the bridges run %v, want the current build's orderflow:0.3.0", img)
	}
	if hooks, cmd := setCurrent(objs); hooks != "post-rollback" || !strings.Contains(cmd, "--build-id 0.3.0") {
		t.Errorf("set-current hook %q running %q; want 0.3.0 made current after a rollback", hooks, cmd)
	}

	objs, err = render(t, append(rollout, "--set", "image.tag=0.4.1")...)
	if err != nil {
		t.Fatal(err)
	}
	checkWorkers(t, objs, map[string]workerWant{
		"orderflow-worker-0-3-0": {image: "orderflow:0.3.0", buildID: "0.3.0"},
		"orderflow-worker-0-4-1": {image: "orderflow:0.4.1", buildID: "0.4.1", workflowVersion: "6"},
	})

	// Unversioned: 0.2.0's Deployment name and selector, pinned until the
	// values name the new tag as current.
	objs, err = render(t, append([]string{"--is-upgrade", "--set", "image.tag=0.3.0", "--set", "worker.versioning.deploymentName="}, dbArgs...)...)
	if err != nil {
		t.Fatal(err)
	}
	checkWorkers(t, objs, map[string]workerWant{"orderflow-worker": {image: "orderflow:0.3.0", workflowVersion: "5"}})
	if sel := fmt.Sprint(dig(find(objs, "Deployment", "orderflow-worker"), "spec", "selector", "matchLabels")); sel !=
		"map[app.kubernetes.io/component:worker app.kubernetes.io/instance:orderflow app.kubernetes.io/name:orderflow]" {
		t.Errorf("the unversioned Deployment's selector changed from 0.2.0's: %s", sel)
	}
	if hooks, _ := setCurrent(objs); hooks != "" {
		t.Errorf("unversioned workers get a set-current hook: %q", hooks)
	}

	_, err = render(t, append(rollout, "--set", "image.tag=0_3_0")...)
	if err == nil || !strings.Contains(err.Error(), "make the same Deployment name") {
		t.Errorf("two build IDs of one Deployment name: %v, want refused", err)
	}
}
