package main

import (
	"image"
	"path/filepath"
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
