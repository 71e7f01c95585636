package main

import (
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

func TestParseRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-orders", "0"},
		{"-sweep-start", "0"},
		{"-sweep-factor", "1"},
		{"-sweep-floor-factor", "1"},
		{"-sweep-within", "0"},
		{"-sweep-within", "1"},
		{"-phases", "e2e,abba"},
		{"-phases", "abba", "-abba-env", "ORDERFLOW_BRIDGE_DEDUP=false"},
		{"-phases", "e2e,abba", "-abba-env", "NOVALUE"},
		{"-sweep-steps", "0"},
		{"-sweep-step", "0s"},
		{"-sweep-cell", "0s"},
		{"-dup-orders", "0"},
		{"-dup-rate", "1.5"},
		{"-hot-events", "3"},
		{"-hot-max-events", "-1"},
		{"-concurrency", "-1"},
		{"-engines", ""},
		{"-engines", "dev,cloud"},
		{"-engines", "dev,dev"},
		{"-engines", "dev,"},
		{"-engines", "stack"}, // the stack's own Temporal is not measured
		{"-server-shards", "0"},
		{"-phases", "e2e,capacity"},
		{"-phases", "floor,open"}, // the sweeps start from the drains' rates
		{"-phases", "e2e,open"},
		{"-phases", "direct,open"}, // the direct floor is no drain of the pipeline's
		{"-direct-in-flight", "0"},
		{"-gomaxprocs", "-1"},
		{"-phases", "e2e,floor,open,interleave"}, // the common rate's cells need the direct floor's drain
		{"-phases", "direct,interleave"},         // and orderflow's capacity
		{"extra"},
	} {
		if _, _, err := parse(args); err == nil {
			t.Errorf("parse(%q) accepted bad input", args)
		}
	}
	_, o, err := parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := (sweepPlan{Start: 0.3, Factor: 1.45, MaxSteps: 10, Within: 0.05, Step: 20 * time.Second, Cell: 20 * time.Second}); o.sweep != want ||
		o.hotEvents != 2000 || o.dupRate != 0.5 || o.dupOrders != 150 || o.resultsDir != "bench/results" ||
		o.floorFactor != 1.15 || o.orders != 600 {
		t.Errorf("defaults: sweep %+v (floors x %v), %d orders, hot events %d, dup rate %v on %d orders, results %q",
			o.sweep, o.floorFactor, o.orders, o.hotEvents, o.dupRate, o.dupOrders, o.resultsDir)
	}
	// From a pass and a fail one step apart, three bisections bring the
	// default sweep within its resolution.
	if r := math.Pow(o.sweep.Factor, 1.0/8); r > 1+o.sweep.Within {
		t.Errorf("three bisections of x %v leave x %.4f, over %v", o.sweep.Factor, r, 1+o.sweep.Within)
	}
	// A default step fails a rate the sweep's resolution over capacity by
	// its backlog's latency (1 s of backlog by the step's end), no later.
	if seen := o.sweep.overloadSeen(); seen <= 0 || seen > o.sweep.Within+1e-9 {
		t.Errorf("a default step sees a backlog from %.3f over capacity on, not within the resolution %.2f", seen, o.sweep.Within)
	}
	if !slices.Equal(o.engines, []string{"dev", "server"}) || o.serverShards != 4 || o.directInFlight != 64 {
		t.Errorf("defaults: engines %v, shards %d, direct floor's signals in flight %d", o.engines, o.serverShards, o.directInFlight)
	}
	if want := []string{"e2e", "floor", "dup", "hot", "open", "direct", "interleave"}; !slices.Equal(o.phases, want) {
		t.Errorf("default phases %v, want %v", o.phases, want)
	}
	_, o, err = parse([]string{"-phases", "abba,e2e", "-abba-env", "A=1  B=x=y"})
	if err != nil || !slices.Equal(o.phases, []string{"e2e", "abba"}) || !slices.Equal(o.abbaEnv, []string{"A=1", "B=x=y"}) {
		t.Errorf("an experiment: phases %v, env %q, %v", o.phases, o.abbaEnv, err)
	}
	// The direct floor needs no other phase; open comes before it, which
	// starts its sweep from the pipeline floor's capacity.
	for args, want := range map[string][]string{"direct": {"direct"}, "direct,open,floor,e2e": {"e2e", "floor", "open", "direct"}} {
		if _, o, err := parse([]string{"-phases", args, "-direct-in-flight", "8"}); err != nil || !slices.Equal(o.phases, want) || o.directInFlight != 8 {
			t.Errorf("-phases %s: %v, %d in flight, %v; want %v", args, o.phases, o.directInFlight, err, want)
		}
	}
	// Phases run in their own order, engines in the flag's.
	if _, o, err := parse([]string{"-phases", "floor, e2e", "-engines", " server , dev"}); err != nil ||
		!slices.Equal(o.phases, []string{"e2e", "floor"}) || !slices.Equal(o.engines, []string{"server", "dev"}) {
		t.Errorf("-phases 'floor, e2e' -engines ' server , dev': %v, %v, %v", o.phases, o.engines, err)
	}
}

func TestPromSum(t *testing.T) {
	text := `# TYPE temporal_request_total counter
temporal_request_total{operation="SignalWithStartWorkflowExecution",ns="a"} 2
temporal_request_total{operation="SignalWithStartWorkflowExecution",ns="b"} 3
temporal_request_total{operation="SignalWithStartWorkflowExecutionX"} 100
temporal_request_total{operation="Check"} 100
# TYPE action gauge
action{namespace="default"} 7
`
	for _, c := range []struct {
		metric, name, value string
		want                float64
	}{
		{"temporal_request_total", "operation", "SignalWithStartWorkflowExecution", 5},
		{"action", "namespace", "default", 7},
		{"action", "namespace", "other", 0},
		{"missing", "namespace", "default", 0},
	} {
		if got, err := promSum(text, c.metric, c.name, c.value); err != nil || got != c.want {
			t.Errorf("promSum(%s, %s=%s) = %v, %v; want %v", c.metric, c.name, c.value, got, err, c.want)
		}
	}
	if _, err := promSum("x{", "x", "a", "b"); err == nil {
		t.Error("malformed text was summed")
	}
}

// pixelsOf counts the pixels of img that are exactly c.
func pixelsOf(img image.Image, c color.RGBA) int {
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			if color.RGBAModel.Convert(img.At(x, y)).(color.RGBA) == c {
				n++
			}
		}
	}
	return n
}

// sweepOf is a sweep of three steps (the third failing) and its cell at
// 0.9 × the capacity, which has an action count.
func sweepOf(capacity float64) *sweepResult {
	cell := func(offered float64, p99 time.Duration) cellResult {
		return cellResult{Config: cellConfig{Offered: offered}, Rate: offered * 0.98, P50: p99 / 4, P99: p99}
	}
	near := cell(0.9*capacity, 700*time.Millisecond)
	near.Cost = &engineCost{Actions: 3.456}
	return &sweepResult{Capacity: capacity, Near: &near,
		Steps: []cellResult{cell(capacity/1.5, 300*time.Millisecond), cell(capacity, 800*time.Millisecond), cell(1.5*capacity, 9*time.Second)}}
}

// sweptEngine is an engine's result with e2e, pipeline floor and direct
// floor drains and the three sweeps.
func sweptEngine(name string, e2e float64) engineResult {
	er := engineResult{Name: name, E2E: cellResult{Rate: e2e}, Floor: &cellResult{Rate: 1.2 * e2e},
		Sweep: sweepOf(0.4 * e2e), FloorSweep: sweepOf(0.45 * e2e), DirectSweep: sweepOf(0.5 * e2e)}
	er.stageRatios()
	return er
}

// TestDrawSweepChart: each engine's sweeps are drawn in its colour, the
// floors' beside orderflow's; an engine without a sweep is an error.
func TestDrawSweepChart(t *testing.T) {
	draw := func(res results) image.Image {
		t.Helper()
		path := filepath.Join(t.TempDir(), "docs", "c.png")
		if err := drawSweepChart(path, res); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		img, err := png.Decode(f)
		if err != nil {
			t.Fatal(err)
		}
		return img
	}
	two := draw(results{Engines: []engineResult{sweptEngine("dev", 200), sweptEngine("server", 120)}})
	if b := two.Bounds(); b.Dx() != 860 || b.Dy() != 720 {
		t.Fatalf("image %v, want 860x720", b)
	}
	if n := pixelsOf(two, engineColours[1]); n < 40 {
		t.Errorf("the second engine's colour has %d pixels: its lines are missing", n)
	}
	all := pixelsOf(draw(results{Engines: []engineResult{sweptEngine("dev", 200)}}), engineColours[0])
	for floor, drop := range map[string]func(*engineResult){
		"pipeline": func(er *engineResult) { er.FloorSweep = nil },
		"direct":   func(er *engineResult) { er.DirectSweep = nil },
	} {
		er := sweptEngine("dev", 200)
		drop(&er)
		if without := pixelsOf(draw(results{Engines: []engineResult{er}}), engineColours[0]); all < without+50 {
			t.Errorf("%d pixels of the engine's colour with the %s floor's sweep, %d without: its curves are missing", all, floor, without)
		}
	}
	if err := drawSweepChart(filepath.Join(t.TempDir(), "c.png"), results{Engines: []engineResult{{Name: "server"}}}); err == nil {
		t.Error("an engine without a sweep was drawn")
	}
}

func TestSummaryLines(t *testing.T) {
	dev := sweptEngine("dev", 100)
	// CPU ms per event at the interleaved rate: orderflow's own is its
	// bridge's, worker's and SQL's (5+6+2 = 13; Redis is not its own), over
	// the direct floor's engine (20): 0.65; the engine's 24/20 = 1.20 and
	// every process's 50/40 = 1.25 over the pipeline floor's.
	dev.Interleaved = &interleaveResult{Rate: 36, CPUPerEvent: map[string]map[string]float64{
		stageOrderflow: {"bridge": 5, "worker": 6, "postgres": 2, "redis": 1, "temporal": 24, allGroups: 50},
		stagePipeline:  {"bridge": 4, "temporal": 20, allGroups: 40},
		stageDirect:    {"temporal": 20, allGroups: 30},
	}}
	server := engineResult{Name: "server", E2E: cellResult{Rate: 150.25}, Sweep: &sweepResult{Capacity: 61.04,
		Near: &cellResult{P99: 90 * time.Millisecond}}}
	res := results{Engines: []engineResult{dev, server}}
	got := summaryLines(res)
	// floor is the direct floor's capacity, floor_ratio orderflow's
	// capacity over it; what was not measured (the server's floors, its
	// costs) is "-".
	want := []string{
		"orderflow bench [temporal=server]: e2e=150.2 floor=- floor_ratio=- capacity=61.0 p99_ms=90 actions_per_event=- " +
			"pipeline_ratio=- own_cpu_ratio=- engine_cpu_ratio=- cpu_ratio=-",
		"orderflow bench: e2e=100.0 floor=50.0 floor_ratio=0.80 capacity=40.0 p99_ms=700 actions_per_event=3.46 " +
			"pipeline_ratio=0.89 own_cpu_ratio=0.65 engine_cpu_ratio=1.20 cpu_ratio=1.25",
	}
	if !slices.Equal(got, want) {
		t.Errorf("summary lines\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The dev engine's line comes last whatever the order of the run.
	res.Engines[0], res.Engines[1] = res.Engines[1], res.Engines[0]
	if got := summaryLines(res); !slices.Equal(got, want) {
		t.Errorf("server first: lines %q", got)
	}
	// Without the dev engine every line is tagged.
	res.Engines = res.Engines[:1]
	if got := summaryLines(res); !slices.Equal(got, want[:1]) {
		t.Errorf("server alone: lines %q", got)
	}
}

// TestStages: each stage's capacity and its share of the stages before,
// "-" where a sweep is missing.
func TestStages(t *testing.T) {
	er := sweptEngine("dev", 100)
	if er.CapacityRatio != 40/45.0 || er.DirectRatio != 0.8 || er.PipelineRatio != 0.9 {
		t.Errorf("ratios: orderflow/pipeline %v, orderflow/direct %v, pipeline/direct %v", er.CapacityRatio, er.DirectRatio, er.PipelineRatio)
	}
	if got, want := describeStages(er), "direct floor capacity 50.0 events/s (the engine alone); pipeline floor capacity 45.0 = 0.90 x direct (+ RocketMQ and the bridge); orderflow capacity 40.0 = 0.89 x pipeline floor, 0.80 x direct floor (+ its workflow and SQL; the last line's floor_ratio)"; got != want {
		t.Errorf("stages\n%s\nwant\n%s", got, want)
	}
	direct := engineResult{DirectSweep: sweepOf(70)}
	direct.stageRatios()
	if got := describeStages(direct); !strings.HasPrefix(got, "direct floor capacity 70.0 events/s (the engine alone); pipeline floor capacity - = - x direct") ||
		direct.CapacityRatio != 0 || direct.DirectRatio != 0 || direct.PipelineRatio != 0 {
		t.Errorf("the direct floor alone: %s (ratios %v, %v, %v)", got, direct.CapacityRatio, direct.DirectRatio, direct.PipelineRatio)
	}
}

// TestWriteResults: a run's results file is named by its start (UTC) and
// commit, and holds the results as JSON.
func TestWriteResults(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "results")
	res := results{Started: time.Date(2026, 11, 22, 19, 40, 4, 0, time.FixedZone("x", 3600)), Commit: "94a5002",
		Engines: []engineResult{sweptEngine("dev", 210.7)}}
	path, err := writeResults(dir, res)
	if want := filepath.Join(dir, "2026-11-22T184004Z-94a5002.json"); err != nil || path != want {
		t.Fatalf("results file %s, %v; want %s", path, err, want)
	}
	var back results
	if data, err := os.ReadFile(path); err != nil || json.Unmarshal(data, &back) != nil ||
		back.Engines[0].FloorSweep.Near.Cost.Actions != 3.456 || back.Engines[0].DirectSweep.Capacity != 0.5*210.7 ||
		back.Engines[0].DirectRatio != 0.8 || back.Machine == "" {
		t.Errorf("read back %+v, %v", back, err)
	}
}

// An experiment's variables are printed and kept with secret values
// redacted.
func TestShownEnvRedactsSecrets(t *testing.T) {
	got := shownEnv([]string{"ORDERFLOW_WORKER_WORKFLOW_POLLERS=8", "DATABASE_URL=postgres://u:hunter2@db/x", "REDIS_PASSWORD=hunter2"})
	if got[0] != "ORDERFLOW_WORKER_WORKFLOW_POLLERS=8" || strings.Contains(strings.Join(got, " "), "hunter2") {
		t.Errorf("shownEnv = %q, want the pollers as given and no password", got)
	}
}

// TestBridgeTuningYieldsToTheExperiment: the cell's concurrency and batch
// size go to the bridge as flags unless the cell's environment sets the
// variable, which a flag would override.
func TestBridgeTuningYieldsToTheExperiment(t *testing.T) {
	cc := cellConfig{Concurrency: 32, BatchSize: 16}
	if got, want := strings.Join(bridgeTuning(cc), " "), "-concurrency 32 -batch-size 16"; got != want {
		t.Errorf("no variables: %q, want %q", got, want)
	}
	cc.Env = []string{"ORDERFLOW_BRIDGE_CONCURRENCY=64", "ORDERFLOW_BRIDGE_BATCH_SIZE_X=1"}
	if got, want := strings.Join(bridgeTuning(cc), " "), "-batch-size 16"; got != want {
		t.Errorf("concurrency set by the experiment: %q, want %q", got, want)
	}
}

// The worker and the bridge run with the GOMAXPROCS the chart gives them
// at its default CPU requests: the request rounded up to whole cores.
func TestGoMaxProcsIsTheChartsDefault(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "deploy", "helm", "orderflow", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		GoMaxProcs string `yaml:"goMaxProcs"`
		Worker     struct {
			Resources struct {
				Requests struct{ CPU string } `yaml:"requests"`
			} `yaml:"resources"`
		} `yaml:"worker"`
		Bridge struct {
			Resources struct {
				Requests struct{ CPU string } `yaml:"requests"`
			} `yaml:"resources"`
		} `yaml:"bridge"`
	}
	if err := yaml.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	_, o, err := parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	if v.GoMaxProcs != "request" {
		t.Fatalf("the chart's goMaxProcs is %q, the benchmark's -gomaxprocs %d: make them agree", v.GoMaxProcs, o.goMaxProcs)
	}
	for name, cpu := range map[string]string{"worker": v.Worker.Resources.Requests.CPU, "bridge": v.Bridge.Resources.Requests.CPU} {
		m, ok := strings.CutSuffix(cpu, "m")
		n, err := strconv.Atoi(m)
		if !ok || err != nil {
			t.Fatalf("the chart's %s CPU request %q is not in millicores", name, cpu)
		}
		if cores := (n + 999) / 1000; cores != o.goMaxProcs {
			t.Errorf("the chart's %s requests %s, GOMAXPROCS %d; the benchmark runs it with %d", name, cpu, cores, o.goMaxProcs)
		}
	}
}
