package main

import (
	"context"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orderflow/orderflow/internal/procs"
)

func TestParseRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-orders", "0"},
		{"-open-rates", "0.5"}, // fixed rates gave way to the capacity sweep
		{"-sweep-start", "0"},
		{"-sweep-factor", "1"},
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
		{"-engines", "stack"}, // the stack's own Temporal is not measured
		{"-server-ports", "7333"},
		{"-server-ports", "7333,7340"},  // the UI on a port the server takes
		{"-server-ports", "65530,8333"}, // the server takes the frontend port + 9
		{"-server-shards", "0"},
		{"-phases", "e2e,capacity"},
		{"-phases", "floor,open"}, // the sweeps start from the drains' rates
		{"-phases", "e2e,open"},
		{"-dev-ports", "7433,7442"}, // the UI on the dev server's metrics port
		{"-workers", "2"},           // one worker process: a second added little
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
	if want := (sweepPlan{Start: 0.3, Factor: 1.5, MaxSteps: 5, Step: 15 * time.Second, Cell: 20 * time.Second}); o.sweep != want ||
		o.hotEvents != 2000 || o.dupRate != 0.5 || o.dupOrders != 300 || o.resultsDir != "bench/results" {
		t.Errorf("defaults: sweep %+v, hot events %d, dup rate %v on %d orders, results %q", o.sweep, o.hotEvents, o.dupRate, o.dupOrders, o.resultsDir)
	}
	if len(o.engines) != 2 || o.engines[0].Name != "dev" || o.engines[1].Name != "server" ||
		!slices.Equal(o.serverPorts, []int{7333, 8333}) || o.serverShards != 4 {
		t.Errorf("defaults: engines %v, server ports %v, shards %d", o.engines, o.serverPorts, o.serverShards)
	}
	if want := []string{"e2e", "floor", "dup", "hot", "open"}; !slices.Equal(o.phases, want) {
		t.Errorf("default phases %v, want %v", o.phases, want)
	}
	// Phases run in their own order, whatever the flag's.
	if _, o, err := parse([]string{"-phases", "floor, e2e"}); err != nil || !slices.Equal(o.phases, []string{"e2e", "floor"}) {
		t.Errorf("-phases 'floor, e2e': %v, %v", o.phases, err)
	}
}

func TestDialCheckNamesMakeUp(t *testing.T) {
	addr, err := procs.FreeAddr() // free a moment ago: nothing listens there
	if err != nil {
		t.Fatal(err)
	}
	err = dialCheck("RocketMQ broker", addr)
	if err == nil || !strings.Contains(err.Error(), "make up") {
		t.Fatalf("dialCheck on a closed port: %v, want an error naming `make up`", err)
	}
}

func TestPromSum(t *testing.T) {
	text := `# HELP x
temporal_request_latency_seconds_sum{operation="SignalWithStartWorkflowExecution",ns="a"} 2.5
temporal_request_latency_seconds_sum{operation="SignalWithStartWorkflowExecution",ns="b"} 1.5
temporal_request_latency_seconds_sum{operation="Check"} 100
temporal_request_latency_seconds_count{operation="SignalWithStartWorkflowExecution"} 8
temporal_request_latency_seconds_sum_other 7
plain_total 3
`
	if got := promSum(text, "temporal_request_latency_seconds_sum", `operation="SignalWithStartWorkflowExecution"`); got != 4 {
		t.Errorf("filtered sum = %v, want 4", got)
	}
	if got := promSum(text, "temporal_request_latency_seconds_sum", ""); got != 104 {
		t.Errorf("unfiltered sum = %v, want 104", got)
	}
	if got := promSum(text, "plain_total", ""); got != 3 {
		t.Errorf("unlabelled sample = %v, want 3", got)
	}
	if got := promSum(text, "missing", ""); got != 0 {
		t.Errorf("missing metric = %v, want 0", got)
	}
}

// TestCountSignals: a cell's signals are the bridge's SignalWithStart
// requests from its /metrics, whose text is kept in the log directory.
func TestCountSignals(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, `temporal_request_total{operation="SignalWithStartWorkflowExecution"} 40
temporal_request_total{operation="DescribeNamespace"} 3
`)
	}))
	defer srv.Close()
	b := &bench{logDir: t.TempDir(), bridgeMetrics: strings.TrimPrefix(srv.URL, "http://")}
	res := cellResult{Config: cellConfig{Name: "c"}}
	b.countSignals(context.Background(), &res)
	if res.Signals != 40 {
		t.Errorf("signals %d, want 40", res.Signals)
	}
	if _, err := os.Stat(filepath.Join(b.logDir, "c-bridge.metrics.txt")); err != nil {
		t.Errorf("metrics not kept: %v", err)
	}
}

// readPNG decodes the PNG at path, failing the test if it is not one.
func readPNG(t *testing.T, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
	return img
}

// colourCounts counts the pixels of img within r that are exactly each of
// cols, and those that are not white.
func colourCounts(img image.Image, r image.Rectangle, cols ...color.RGBA) (counts []int, nonWhite int) {
	counts = make([]int, len(cols))
	b := r.Intersect(img.Bounds())
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			px := color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)
			if px != (color.RGBA{255, 255, 255, 255}) {
				nonWhite++
			}
			for i, c := range cols {
				if px == c {
					counts[i]++
				}
			}
		}
	}
	return counts, nonWhite
}

// sweepOf is a sweep of three steps (the third failing) and its cells at
// 0.5 and 0.9 × the capacity, the second of which has an action count.
func sweepOf(capacity float64) *sweepResult {
	cell := func(offered float64, p99 time.Duration) cellResult {
		return cellResult{Config: cellConfig{Offered: offered}, Rate: offered * 0.98, P50: p99 / 4, P99: p99}
	}
	near := cell(0.9*capacity, 700*time.Millisecond)
	near.Cost = &engineCost{Actions: 3.456}
	half := cell(0.5*capacity, 200*time.Millisecond)
	return &sweepResult{Capacity: capacity, Half: &half, Near: &near,
		Steps: []cellResult{cell(capacity/1.5, 300*time.Millisecond), cell(capacity, 800*time.Millisecond), cell(1.5*capacity, 9*time.Second)}}
}

// sweptEngine is an engine's result with e2e and floor drains and both
// sweeps.
func sweptEngine(name string, e2e float64) engineResult {
	return engineResult{Name: name, E2E: cellResult{Rate: e2e}, Floor: &cellResult{Rate: 1.2 * e2e},
		Sweep: sweepOf(0.4 * e2e), FloorSweep: sweepOf(0.5 * e2e), CapacityRatio: 0.8}
}

func TestDrawSweepChartTwoEngines(t *testing.T) {
	res := results{Engines: []engineResult{sweptEngine("dev", 200), sweptEngine("server", 120)}}
	path := filepath.Join(t.TempDir(), "docs", "bench-throughput.png")
	if err := drawSweepChart(path, res); err != nil {
		t.Fatal(err)
	}
	img := readPNG(t, path)
	if b := img.Bounds(); b.Dx() != 860 || b.Dy() != 720 {
		t.Fatalf("image %v, want 860x720", b)
	}
	// Each engine's colour (the first two of engineColours) in both
	// panels, left of the legends.
	if engineColours[0] != colBlue || engineColours[1] != colOrng {
		t.Fatalf("engine colours %v: the test expects blue, then orange", engineColours[:2])
	}
	for _, panel := range []struct {
		name string
		r    image.Rectangle
	}{{"throughput panel", image.Rect(0, 0, 520, 360)}, {"latency panel", image.Rect(0, 360, 520, 720)}} {
		counts, _ := colourCounts(img, panel.r, colBlue, colOrng)
		for i, n := range counts {
			if n < 20 {
				t.Errorf("%s: engine %s's colour has %d pixels: its lines are missing", panel.name, res.Engines[i].Name, n)
			}
		}
	}
	// The floor's curve is drawn too: without it, fewer blue pixels.
	noFloor := results{Engines: []engineResult{sweptEngine("dev", 200)}}
	noFloor.Engines[0].FloorSweep = nil
	one := results{Engines: []engineResult{sweptEngine("dev", 200)}}
	var blue [2]int
	for i, r := range []results{noFloor, one} {
		path := filepath.Join(t.TempDir(), "one.png")
		if err := drawSweepChart(path, r); err != nil {
			t.Fatal(err)
		}
		counts, _ := colourCounts(readPNG(t, path), image.Rect(0, 0, 860, 720), colBlue, colOrng)
		if counts[1] != 0 {
			t.Errorf("one engine: %d orange pixels, want none", counts[1])
		}
		blue[i] = counts[0]
	}
	if blue[1] < blue[0]+100 {
		t.Errorf("blue pixels with the floor's sweep %d, without %d: its curves are missing", blue[1], blue[0])
	}
}

func TestDrawSweepChartNeedsResults(t *testing.T) {
	if err := drawSweepChart(filepath.Join(t.TempDir(), "c.png"), results{}); err == nil {
		t.Error("drawSweepChart without engines did not fail")
	}
	res := results{Engines: []engineResult{sweptEngine("dev", 200), {Name: "server"}}}
	if err := drawSweepChart(filepath.Join(t.TempDir(), "c.png"), res); err == nil {
		t.Error("drawSweepChart with an engine without a sweep did not fail")
	}
}

func TestSummaryLines(t *testing.T) {
	dev := sweptEngine("dev", 100)
	server := engineResult{Name: "server", E2E: cellResult{Rate: 150.25}, Sweep: &sweepResult{Capacity: 61.04,
		Near: &cellResult{P99: 90 * time.Millisecond}}}
	res := results{Baseline: cellResult{Rate: 2000}, Engines: []engineResult{dev, server}}
	got := summaryLines(res)
	// What was not measured (the server's floor, its costs) is "-".
	want := []string{
		"orderflow bench [temporal=server]: e2e=150.2 floor=- floor_ratio=- capacity=61.0 p99_ms=90 actions_per_event=-",
		"orderflow bench: e2e=100.0 floor=120.0 floor_ratio=0.80 capacity=40.0 p99_ms=700 actions_per_event=3.46",
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

// TestWriteResults: a run's results file is named by its start (UTC) and
// commit, and reads back as the results written.
func TestWriteResults(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "results")
	res := results{Started: time.Date(2026, 11, 22, 19, 40, 4, 0, time.FixedZone("x", 3600)), Commit: "94a5002",
		Baseline: cellResult{Rate: 2425.6}, Engines: []engineResult{sweptEngine("dev", 210.7)}}
	path, err := writeResults(dir, res)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "2026-11-22T184004Z-94a5002.json"); path != want {
		t.Errorf("results file %s, want %s", path, want)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var back results
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if back.Baseline.Rate != 2425.6 || len(back.Engines) != 1 || back.Engines[0].E2E.Rate != 210.7 ||
		len(back.Engines[0].Sweep.Steps) != 3 || back.Engines[0].FloorSweep.Near.Cost.Actions != 3.456 || back.Machine == "" {
		t.Errorf("read back %+v", back)
	}
}

// TestGitCommit: the commit of a checkout, "-dirty" once a tracked file
// changed (an untracked one does not count), "unknown" outside git.
func TestGitCommit(t *testing.T) {
	dir := t.TempDir()
	git := func(args ...string) string {
		out, err := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@t"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := gitCommit(dir); got != "unknown" {
		t.Errorf("outside git: %q", got)
	}
	git("init", "-q")
	if err := os.WriteFile(filepath.Join(dir, "a"), []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", "a")
	git("commit", "-q", "-m", "a")
	head := git("rev-parse", "--short=7", "HEAD")
	if err := os.WriteFile(filepath.Join(dir, "b"), []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := gitCommit(dir); got != head {
		t.Errorf("clean checkout with an untracked file: %q, want %q", got, head)
	}
	if err := os.WriteFile(filepath.Join(dir, "a"), []byte("2"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := gitCommit(dir); got != head+"-dirty" {
		t.Errorf("changed tracked file: %q, want %q", got, head+"-dirty")
	}
}

// TestResultsOfRecordDrawTheChart: every results file kept in
// bench/results/ is one the benchmark can read and draw.
func TestResultsOfRecordDrawTheChart(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("results", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no results file in bench/results")
	}
	for _, f := range files {
		if err := redrawChart(f, filepath.Join(t.TempDir(), "c.png"), io.Discard); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// TestRedrawChart: -redraw draws the chart of an earlier run's results file,
// without any service; a missing file, one that is not JSON and one without
// sweeps are errors that name the file.
func TestRedrawChart(t *testing.T) {
	dir := t.TempDir()
	res := results{Started: time.Date(2026, 11, 22, 19, 40, 4, 0, time.UTC), Baseline: cellResult{Rate: 2400},
		Engines: []engineResult{sweptEngine("dev", 210), sweptEngine("server", 198)}}
	data, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	from := filepath.Join(dir, "results.json")
	if err := os.WriteFile(from, data, 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "out", "chart.png")
	var out strings.Builder
	if err := run(context.Background(), []string{"-redraw", from, "-chart", path}, &out); err != nil {
		t.Fatal(err)
	}
	if b := readPNG(t, path).Bounds(); b.Dx() != 860 || b.Dy() != 720 {
		t.Errorf("image %v, want 860x720", b)
	}
	if !strings.Contains(out.String(), "drawn from "+from) || !strings.Contains(out.String(), "2026-11-22T19:40:04Z") {
		t.Errorf("output %q names neither the results file nor its run", out.String())
	}

	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte("not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.json")
	if err := os.WriteFile(empty, []byte(`{"engines":[{"name":"dev"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{filepath.Join(dir, "missing.json"), bad, empty} {
		err := run(context.Background(), []string{"-redraw", f, "-chart", filepath.Join(dir, "x.png")}, io.Discard)
		if err == nil || !strings.Contains(err.Error(), filepath.Base(f)) {
			t.Errorf("-redraw %s: error %v, want one naming the file", filepath.Base(f), err)
		}
	}
}
