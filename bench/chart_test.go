package main

import (
	"image"
	"math"
	"path/filepath"
	"testing"

	"gonum.org/v1/plot/plotter"
)

func TestWritePanelsStacked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stacked.png")
	top, err := panel("top", "y", []series{{Label: "a", Color: colBlue, Points: plotter.XYs{{X: 1, Y: 10}, {X: 2, Y: 20}}}}, false)
	if err != nil {
		t.Fatal(err)
	}
	bottom, err := panel("bottom", "y", []series{{Label: "b", Color: colRed, Points: plotter.XYs{{X: 1, Y: 5}, {X: 2, Y: 1}}}}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := writePanels(path, 400, 600, top, bottom); err != nil {
		t.Fatal(err)
	}
	img := readPNG(t, path)
	if b := img.Bounds(); b.Dx() != 400 || b.Dy() != 600 {
		t.Fatalf("image %v, want 400x600", b)
	}
	// Each panel keeps to its half: blue only above, red only below.
	up, _ := colourCounts(img, image.Rect(0, 0, 400, 300), colBlue, colRed)
	down, _ := colourCounts(img, image.Rect(0, 300, 400, 600), colBlue, colRed)
	if up[0] < 20 || up[1] != 0 || down[1] < 20 || down[0] != 0 {
		t.Errorf("blue/red pixels: top half %v, bottom half %v", up, down)
	}
	if err := writePanels(filepath.Join(t.TempDir(), "none.png"), 0, 10, top); err == nil {
		t.Error("a chart 0 pixels wide was written")
	}
	if _, err := panel("nan", "y", []series{{Label: "n", Color: colBlue, Points: plotter.XYs{{X: 1, Y: math.NaN()}}}}, false); err == nil {
		t.Error("a panel with a NaN point was built")
	}
}

// TestLogScalePanel: latencies from 20 ms to 40 s are drawn between the
// powers of ten around them, 10 ms and 100 s, each decade an equal share of
// the height; a zero is drawn at the bottom.
func TestLogScalePanel(t *testing.T) {
	p, err := panel("latency", "ms", []series{
		{Label: "p50", Color: colBlue, Points: plotter.XYs{{X: 1, Y: 20}, {X: 2, Y: 0}, {X: 3, Y: 300}}},
		{Label: "p99", Color: colRed, Points: plotter.XYs{{X: 1, Y: 90}, {X: 2, Y: 4000}, {X: 3, Y: 40000}}}}, true)
	if err != nil {
		t.Fatal(err)
	}
	if p.Y.Min != 10 || p.Y.Max != 100000 {
		t.Errorf("y from %v to %v, want 10 to 100000", p.Y.Min, p.Y.Max)
	}
	for y, want := range map[float64]float64{10: 0, 100: 0.25, 1000: 0.5, 100000: 1} {
		if got := p.Y.Norm(y); math.Abs(got-want) > 1e-9 {
			t.Errorf("y=%v drawn at %.3f of the height, want %.2f", y, got, want)
		}
	}
	if lo, hi := logRange([]series{{Points: plotter.XYs{{X: 1, Y: 0}}}}); lo != 1 || hi != 10 {
		t.Errorf("no positive value: range %v-%v, want 1-10", lo, hi)
	}
}
