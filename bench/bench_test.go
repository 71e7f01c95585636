package main

import (
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-orders", "0"},
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
	if tu.WorkflowPollers != 8 || !strings.Contains(strings.Join(tu.workerFlags(), " "), "-workflow-pollers 8") {
		t.Errorf("worker flags %v do not carry -workflow-pollers 8", tu.workerFlags())
	}
}

func TestDialCheckNamesMakeUp(t *testing.T) {
	addr, err := freeAddr() // free a moment ago: nothing listens there
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
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 400 || b.Dy() != 300 {
		t.Fatalf("image %v, want 400x300", b)
	}
	// The series colour must appear: the line was drawn.
	found := false
	for y := 0; y < 300 && !found; y++ {
		for x := 0; x < 400; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			if uint8(r>>8) == colBlue.R && uint8(g>>8) == colBlue.G && uint8(b>>8) == colBlue.B {
				found = true
				break
			}
		}
	}
	if !found {
		t.Error("the series line is not in the image")
	}
}

func TestNiceStep(t *testing.T) {
	for raw, want := range map[float64]float64{0: 1, 3: 5, 12: 20, 40: 50, 0.7: 1, 230: 500} {
		if got := niceStep(raw); got != want {
			t.Errorf("niceStep(%v) = %v, want %v", raw, got, want)
		}
	}
}

func TestDrawChartNeedsResults(t *testing.T) {
	if err := drawChart(filepath.Join(t.TempDir(), "c.png"), options{scaleConc: []int{8}}, results{}); err == nil {
		t.Error("drawChart without scaling results did not fail")
	}
}

func TestUniqueName(t *testing.T) {
	a, b := uniqueName("x"), uniqueName("x")
	if a == b || !strings.HasPrefix(a, "x-") {
		t.Errorf("uniqueName: %q, %q", a, b)
	}
}
