package deploy

import (
	"fmt"
	"path/filepath"
	"testing"
)

// The worker's and the bridge's GOMAXPROCS follow their CPU request (values
// goMaxProcs: request, the default): a downward-API reference to the
// container's own request, in whole cores, which the container has. With
// goMaxProcs "" the chart leaves it to Go.
func TestChartSetsGoMaxProcsFromTheCPURequest(t *testing.T) {
	controller := []string{"-f", filepath.Join(chartDir, "ci", "worker-controller-values.yaml")}
	for _, c := range []struct {
		name string
		args []string
		want map[string]bool // kind/container → GOMAXPROCS set
	}{
		{"default", nil, map[string]bool{"Deployment/worker": true, "Deployment/bridge": true}},
		{"worker controller", controller, map[string]bool{"WorkerDeployment/worker": true, "Deployment/bridge": true}},
		{"unset", []string{"--set", "goMaxProcs="}, map[string]bool{"Deployment/worker": false, "Deployment/bridge": false}},
	} {
		t.Run(c.name, func(t *testing.T) {
			objs, err := render(t, append(append([]string(nil), dbArgs...), c.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			for _, o := range objs {
				ctr, _ := dig(o, "spec", "template", "spec", "containers", 0).(map[string]any)
				key := fmt.Sprintf("%v/%v", o["kind"], ctr["name"])
				want, ok := c.want[key]
				if !ok {
					continue
				}
				seen[key] = true
				ref := goMaxProcsRef(ctr)
				switch {
				case !want && ref != nil:
					t.Errorf("%s %v sets GOMAXPROCS (%v), want it unset", key, dig(o, "metadata", "name"), ref)
				case want && ref == nil:
					t.Errorf("%s %v: no GOMAXPROCS from its CPU request", key, dig(o, "metadata", "name"))
				case want:
					if dig(ref, "containerName") != ctr["name"] || dig(ref, "resource") != "requests.cpu" || dig(ref, "divisor") != "1" {
						t.Errorf("%s: GOMAXPROCS from %v, want requests.cpu of container %v in whole cores", key, ref, ctr["name"])
					}
					if dig(ctr, "resources", "requests", "cpu") == nil {
						t.Errorf("%s: GOMAXPROCS follows a CPU request the container does not have", key)
					}
				}
			}
			for key := range c.want {
				if !seen[key] {
					t.Errorf("no %s rendered", key)
				}
			}
		})
	}
}

// goMaxProcsRef is the resourceFieldRef of the container's GOMAXPROCS, nil
// when it has none.
func goMaxProcsRef(ctr map[string]any) any {
	env, _ := ctr["env"].([]any)
	for _, e := range env {
		if dig(e, "name") == "GOMAXPROCS" {
			if ref := dig(e, "valueFrom", "resourceFieldRef"); ref != nil {
				return ref
			}
			return map[string]any{"value": dig(e, "value")}
		}
	}
	return nil
}
