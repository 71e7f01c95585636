package main

import (
	"image"
	"math"
	"path/filepath"
	"slices"
	"testing"
)

func TestWriteChartsStacked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stacked.png")
	top := chart{Title: "top", XTicks: []float64{1, 2}, Series: []series{
		{Label: "a", Color: colBlue, Points: [][2]float64{{1, 10}, {2, 20}}}}}
	bottom := chart{Title: "bottom", XTicks: []float64{1, 2}, Series: []series{
		{Label: "b", Color: colRed, Points: [][2]float64{{1, 5}, {2, 1}}}}}
	if err := writeCharts(path, 400, 600, top, bottom); err != nil {
		t.Fatal(err)
	}
	img := readPNG(t, path)
	if b := img.Bounds(); b.Dx() != 400 || b.Dy() != 600 {
		t.Fatalf("image %v, want 400x600", b)
	}
	// Each chart keeps to its half: blue only above, red only below.
	up, _ := colourCounts(img, image.Rect(0, 0, 400, 300), colBlue, colRed)
	down, _ := colourCounts(img, image.Rect(0, 300, 400, 600), colBlue, colRed)
	if up[0] < 20 || up[1] != 0 || down[1] < 20 || down[0] != 0 {
		t.Errorf("blue/red pixels: top half %v, bottom half %v", up, down)
	}
	if err := writeCharts(filepath.Join(t.TempDir(), "none.png"), 0, 10, top); err == nil {
		t.Error("a chart 0 pixels wide was written")
	}
}

// TestLogScaleChart: latencies from 20 ms to 40 s are drawn between the
// powers of ten around them, 10 ms and 100 s, one tick a decade, each
// decade an equal share of the height; a zero is drawn at the bottom.
func TestLogScaleChart(t *testing.T) {
	c := chart{Title: "latency", W: 400, H: 300, XTicks: []float64{1, 2, 3}, LogY: true, Series: []series{
		{Label: "p50", Color: colBlue, Points: [][2]float64{{1, 20}, {2, 0}, {3, 300}}},
		{Label: "p99", Color: colRed, Points: [][2]float64{{1, 90}, {2, 4000}, {3, 40000}}}}}
	p, err := c.plot()
	if err != nil {
		t.Fatal(err)
	}
	if p.Y.Min != 10 || p.Y.Max != 100000 {
		t.Errorf("y from %v to %v, want 10 to 100000", p.Y.Min, p.Y.Max)
	}
	var labels []string
	for _, tk := range p.Y.Tick.Marker.Ticks(p.Y.Min, p.Y.Max) {
		labels = append(labels, tk.Label)
	}
	if want := []string{"10", "100", "1000", "10000", "100000"}; !slices.Equal(labels, want) {
		t.Errorf("y ticks %v, want %v", labels, want)
	}
	// Four decades: 100 is a quarter of the way up, 1000 half.
	for y, want := range map[float64]float64{10: 0, 100: 0.25, 1000: 0.5, 100000: 1} {
		if got := p.Y.Norm(y); math.Abs(got-want) > 1e-9 {
			t.Errorf("y=%v drawn at %.3f of the height, want %.2f", y, got, want)
		}
	}
	if err := c.WritePNG(filepath.Join(t.TempDir(), "log.png")); err != nil {
		t.Fatal(err)
	}
	if lo, hi := logRange([]series{{Points: [][2]float64{{1, 0}}}}); lo != 1 || hi != 10 {
		t.Errorf("no positive value: range %v-%v, want 1-10", lo, hi)
	}
}
