package main

import (
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orderflow/orderflow/internal/procs"
	"github.com/orderflow/orderflow/internal/uniq"
)

func TestParseRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-orders", "0"},
		{"-open-rates", "0.5,0"},
		{"-open-rates", "x"},
		{"-steady-rate", "0"},
		{"-steady-rate", "0.25,0.5"},
		{"-dup-rate", "1.5"},
		{"-open-duration", "0s"},
		{"-hot-events", "3"},
		{"-hot-max-events", "-1"},
		{"-concurrency", "-1"},
		{"-scale-concurrency", "8,x"},
		{"-scale-workers", ""},
		{"-ceiling-workflows", "0"},
		{"extra"},
	} {
		if _, _, _, err := parse(args); err == nil {
			t.Errorf("parse(%q) accepted bad input", args)
		}
	}
	_, tu, o, err := parse([]string{"-scale-concurrency", "4, 16", "-workflow-pollers", "8"})
	if err != nil {
		t.Fatal(err)
	}
	if len(o.scaleConc) != 2 || o.scaleConc[0] != 4 || o.scaleConc[1] != 16 {
		t.Errorf("scale concurrency %v, want [4 16]", o.scaleConc)
	}
	if len(o.open.Fractions) != 3 || o.open.Steady != 0.5 || o.open.Duration != time.Minute || o.hotEvents != 2000 || o.dupRate != 0.5 {
		t.Errorf("defaults: open loop %+v, hot events %d, dup rate %v", o.open, o.hotEvents, o.dupRate)
	}
	if tu.WorkflowPollers != 8 || !strings.Contains(strings.Join(tu.workerFlags(), " "), "-workflow-pollers 8") {
		t.Errorf("worker flags %v do not carry -workflow-pollers 8", tu.workerFlags())
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

func TestChartPNG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "chart.png")
	c := chart{Title: "t", XLabel: "x", YLabel: "y", XTicks: []float64{8, 32, 64}, W: 400, H: 300,
		Series: []series{
			{Label: "a", Color: colBlue, Points: [][2]float64{{8, 10}, {32, 40}, {64, 35}}},
			{Label: "c", Color: colGreen, Dashed: true, Points: [][2]float64{{8, 20}, {64, 20}}},
		}}
	if err := c.WritePNG(path); err != nil {
		t.Fatal(err)
	}
	img := readPNG(t, path)
	if b := img.Bounds(); b.Dx() != 400 || b.Dy() != 300 {
		t.Fatalf("image %v, want 400x300", b)
	}
	_, nonWhite := colourCounts(img, img.Bounds())
	// Axes, labels, grid and lines: a few per cent of the image, not none
	// and not most of it.
	if total := 400 * 300; nonWhite < total/50 || nonWhite > total/2 {
		t.Errorf("%d of %d pixels are not white", nonWhite, total)
	}
	// Both series' colours must appear in the left half, where the lines
	// run and the legend (on the right) is not: the lines were drawn.
	counts, _ := colourCounts(img, image.Rect(0, 0, 200, 300), colBlue, colGreen)
	for i, name := range []string{"solid series", "dashed series"} {
		if counts[i] < 20 {
			t.Errorf("the %s has %d pixels of its colour", name, counts[i])
		}
	}
}

func TestChartPNGEdges(t *testing.T) {
	dir := t.TempDir()
	// No series and no ticks: an empty but valid chart, as before.
	path := filepath.Join(dir, "empty.png")
	if err := (chart{Title: "empty", W: 200, H: 100}).WritePNG(path); err != nil {
		t.Fatalf("empty chart: %v", err)
	}
	if b := readPNG(t, path).Bounds(); b.Dx() != 200 || b.Dy() != 100 {
		t.Errorf("empty chart %v, want 200x100", b)
	}
	// A size of zero or a point that is not a number is an error.
	if err := (chart{W: 0, H: 100}).WritePNG(filepath.Join(dir, "zero.png")); err == nil {
		t.Error("a chart 0 pixels wide was written")
	}
	nan := chart{W: 200, H: 100, Series: []series{{Label: "n", Color: colBlue, Points: [][2]float64{{1, math.NaN()}}}}}
	if err := nan.WritePNG(filepath.Join(dir, "nan.png")); err == nil {
		t.Error("a chart with a NaN point was written")
	}
}

func TestDrawOpenLoopChart(t *testing.T) {
	res := results{E2E: cellResult{Rate: 200}, Baseline: cellResult{Rate: 1500}}
	for i, f := range []float64{0.25, 0.5, 0.75} {
		res.OpenLoop = append(res.OpenLoop, cellResult{Config: cellConfig{Offered: f * 200, Fraction: f},
			Rate: f*200 - float64(i), P50: time.Duration(100*(i+1)) * time.Millisecond,
			P99: time.Duration(400*(i+1)) * time.Millisecond})
	}
	path := filepath.Join(t.TempDir(), "docs", "bench-throughput.png")
	if err := drawOpenLoopChart(path, res); err != nil {
		t.Fatal(err)
	}
	img := readPNG(t, path)
	if b := img.Bounds(); b.Dx() != 760 || b.Dy() != 720 {
		t.Fatalf("image %v, want 760x720", b)
	}
	// Throughput and the e2e line in the top half, p99 and p50 in the
	// bottom half, each left of the legends.
	for _, c := range []struct {
		name string
		r    image.Rectangle
		cols []color.RGBA
	}{
		{"throughput panel", image.Rect(0, 0, 450, 360), []color.RGBA{colBlue, colGreen}},
		{"latency panel", image.Rect(0, 360, 450, 720), []color.RGBA{colRed, colOrng}},
	} {
		counts, _ := colourCounts(img, c.r, c.cols...)
		for i, n := range counts {
			if n < 20 {
				t.Errorf("%s: colour %v has %d pixels: its line is missing", c.name, c.cols[i], n)
			}
		}
		if others, _ := colourCounts(img, c.r, colBlue, colRed); c.name == "latency panel" && others[0] > 0 {
			t.Errorf("the throughput line strays into the latency panel")
		}
	}
}

func TestDrawOpenLoopChartNeedsResults(t *testing.T) {
	if err := drawOpenLoopChart(filepath.Join(t.TempDir(), "c.png"), results{}); err == nil {
		t.Error("drawOpenLoopChart without open-loop results did not fail")
	}
}

func TestNiceStep(t *testing.T) {
	for raw, want := range map[float64]float64{0: 1, 3: 5, 12: 20, 40: 50, 0.7: 1, 230: 500} {
		if got := niceStep(raw); got != want {
			t.Errorf("niceStep(%v) = %v, want %v", raw, got, want)
		}
	}
}

func TestUniqueName(t *testing.T) {
	a, b := uniq.Name("x"), uniq.Name("x")
	if a == b || !strings.HasPrefix(a, "x-") {
		t.Errorf("uniqueName: %q, %q", a, b)
	}
}
