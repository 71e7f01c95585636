package deploy

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// envOf is a workload's first container's environment: name to the value,
// or to "secret:NAME/KEY" for a variable read from a Secret.
func envOf(t *testing.T, o map[string]any) map[string]string {
	t.Helper()
	env := map[string]string{}
	list, _ := dig(o, "spec", "template", "spec", "containers", 0, "env").([]any)
	for _, e := range list {
		name := fmt.Sprint(dig(e, "name"))
		if _, dup := env[name]; dup {
			t.Errorf("%s %v sets %s twice", o["kind"], dig(o, "metadata", "name"), name)
		}
		if ref := dig(e, "valueFrom", "secretKeyRef"); ref != nil {
			env[name] = fmt.Sprintf("secret:%v/%v", dig(ref, "name"), dig(ref, "key"))
			continue
		}
		env[name] = fmt.Sprint(dig(e, "value"))
	}
	return env
}

// allFeatures are the arguments that render ci/all-features-values.yaml
// as deploy-check does (the rules and the dashboard passed by file), then
// more.
func allFeatures(more ...string) []string {
	return append([]string{"-f", filepath.Join(chartDir, "ci", "all-features-values.yaml"),
		"--set-file", "prometheusRule.rules=prometheus/orderflow-rules.yml",
		"--set-file", "grafanaDashboard.json=grafana/orderflow.json"}, more...)
}

// findKind returns the rendered objects of kind whose name starts with prefix.
func findKind(objs []map[string]any, kind, prefix string) []map[string]any {
	var out []map[string]any
	for _, o := range objs {
		if name, _ := dig(o, "metadata", "name").(string); o["kind"] == kind && strings.HasPrefix(name, prefix) {
			out = append(out, o)
		}
	}
	return out
}

// TestChartOpsJobHasTheBridgesSettings renders the operator command's Job
// with every optional part of the chart (ci/all-features-values.yaml: mTLS
// to Temporal, TLS to RocketMQ, PostgreSQL's CA, a Secret of one's own):
// it runs /app/orderflow with the asked arguments and every variable, Secret
// key and TLS file the bridge has, REDIS_URL included, so that recover runs
// while the bridges are scaled to 0. Consent stays a flag: no variable.
func TestChartOpsJobHasTheBridgesSettings(t *testing.T) {
	objs, err := render(t, allFeatures("--set-json", `ops.args=["recover","-since","2026-01-02T03:04:05Z","-yes"]`)...)
	if err != nil {
		t.Fatal(err)
	}
	jobs := findKind(objs, "Job", "orderflow-ops-")
	if len(jobs) != 1 {
		t.Fatalf("want one Job orderflow-ops-*, got %d", len(jobs))
	}
	job, bridge := jobs[0], find(objs, "Deployment", "orderflow-bridge")
	c := dig(job, "spec", "template", "spec", "containers", 0)
	if got := fmt.Sprint(dig(c, "command"), dig(c, "args")); got != "[/app/orderflow] [recover -since 2026-01-02T03:04:05Z -yes]" {
		t.Errorf("the Job runs %s", got)
	}
	if dig(job, "spec", "template", "spec", "restartPolicy") != "Never" || fmt.Sprint(dig(job, "spec", "backoffLimit")) != "0" {
		t.Errorf("the Job restarts or retries: restartPolicy %v, backoffLimit %v",
			dig(job, "spec", "template", "spec", "restartPolicy"), dig(job, "spec", "backoffLimit"))
	}
	jobEnv, bridgeEnv := envOf(t, job), envOf(t, bridge)
	for name, value := range bridgeEnv {
		if strings.HasPrefix(name, "ORDERFLOW_BRIDGE_METRICS") || goRuntime[name] {
			continue // the bridge's own port; its threads, from its own CPU request
		}
		if jobEnv[name] != value {
			t.Errorf("%s: the bridge has %q, the Job %q", name, value, jobEnv[name])
		}
	}
	for name, want := range map[string]string{
		"REDIS_URL":                        "secret:orderflow-credentials/REDIS_URL",
		"DATABASE_URL":                     "secret:orderflow-credentials/DATABASE_URL",
		"TEMPORAL_API_KEY":                 "secret:orderflow-credentials/TEMPORAL_API_KEY",
		"ROCKETMQ_ACCESS_KEY":              "secret:orderflow-credentials/ROCKETMQ_ACCESS_KEY",
		"ROCKETMQ_TLS":                     "true",
		"ROCKETMQ_TLS_CA_FILE":             "/etc/orderflow/rocketmq-tls/ca.crt",
		"TEMPORAL_TLS":                     "true",
		"TEMPORAL_TLS_CLIENT_CERT_PATH":    "/etc/orderflow/temporal-tls/tls.crt",
		"TEMPORAL_TLS_SERVER_CA_CERT_PATH": "/etc/orderflow/temporal-tls/ca.crt",
	} {
		if jobEnv[name] != want {
			t.Errorf("the Job's %s is %q, want %q", name, jobEnv[name], want)
		}
	}
	for name := range jobEnv {
		if strings.Contains(name, "YES") || strings.Contains(name, "CONSENT") {
			t.Errorf("the Job sets %s: consent is a flag only", name)
		}
	}
	// The TLS files are mounted as in the bridge.
	mounts := func(o map[string]any) string {
		return fmt.Sprint(dig(o, "spec", "template", "spec", "containers", 0, "volumeMounts"), dig(o, "spec", "template", "spec", "volumes"))
	}
	if mounts(job) != mounts(bridge) {
		t.Errorf("the Job's volumes differ from the bridge's:\n job    %s\n bridge %s", mounts(job), mounts(bridge))
	}
	if img := dig(c, "image"); img != dig(bridge, "spec", "template", "spec", "containers", 0, "image") {
		t.Errorf("the Job runs %v, the bridge %v", img, dig(bridge, "spec", "template", "spec", "containers", 0, "image"))
	}

	// Another command is another Job; no command is refused; off by default.
	other, err := render(t, allFeatures("--set-json", `ops.args=["rewind","-to","1h"]`)...)
	if err != nil {
		t.Fatal(err)
	}
	if o := findKind(other, "Job", "orderflow-ops-"); len(o) != 1 || dig(o[0], "metadata", "name") == dig(job, "metadata", "name") {
		t.Errorf("another command renders the same Job name %v", dig(job, "metadata", "name"))
	}
	if _, err := render(t, allFeatures("--set-json", `ops.args=[]`)...); err == nil ||
		!strings.Contains(err.Error(), "ops.args: name the subcommand") {
		t.Errorf("ops.enabled without args: %v, want refused", err)
	}
	objs, err = render(t, "--set", "secrets.databaseURL="+runtimeURL, "--set", "migration.databaseURL="+ownerURL)
	if err != nil {
		t.Fatal(err)
	}
	if len(findKind(objs, "Job", "orderflow-ops-")) != 0 {
		t.Error("the default values render an operator Job")
	}
}
