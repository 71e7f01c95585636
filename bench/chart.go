package main

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"os"
	"path/filepath"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// series is one line of the chart: y values at the chart's x values.
type series struct {
	Label  string
	Color  color.RGBA
	Points [][2]float64 // (x, y)
	Dashed bool
}

// chart is a small line chart drawn with the standard library's image
// packages and a fixed bitmap font.
type chart struct {
	Title, XLabel, YLabel string
	XTicks                []float64
	Series                []series
	W, H                  int
}

var (
	colWhite = color.RGBA{255, 255, 255, 255}
	colBlack = color.RGBA{0, 0, 0, 255}
	colGrid  = color.RGBA{225, 225, 225, 255}
	colBlue  = color.RGBA{31, 119, 180, 255}
	colOrng  = color.RGBA{255, 127, 14, 255}
	colGreen = color.RGBA{44, 160, 44, 255}
	colRed   = color.RGBA{214, 39, 40, 255}
)

// WritePNG draws the chart into path.
func (c chart) WritePNG(path string) error {
	img := image.NewRGBA(image.Rect(0, 0, c.W, c.H))
	draw.Draw(img, img.Bounds(), &image.Uniform{colWhite}, image.Point{}, draw.Src)
	left, right, top, bottom := 70, c.W-190, 55, c.H-50

	xmin, xmax := math.Inf(1), math.Inf(-1)
	ymax := 0.0
	for _, x := range c.XTicks {
		xmin, xmax = math.Min(xmin, x), math.Max(xmax, x)
	}
	for _, s := range c.Series {
		for _, p := range s.Points {
			xmin, xmax = math.Min(xmin, p[0]), math.Max(xmax, p[0])
			ymax = math.Max(ymax, p[1])
		}
	}
	if xmax <= xmin {
		xmax = xmin + 1
	}
	ystep := niceStep(ymax / 5)
	ytop := math.Ceil(ymax*1.05/ystep) * ystep
	if ytop <= 0 {
		ytop = 1
	}
	px := func(x float64) int { return left + int(float64(right-left)*(x-xmin)/(xmax-xmin)) }
	py := func(y float64) int { return bottom - int(float64(bottom-top)*y/ytop) }

	for y := 0.0; y <= ytop+1e-9; y += ystep {
		hline(img, left, right, py(y), colGrid)
		label(img, left-8-textWidth(fmtNum(y)), py(y)+4, fmtNum(y), colBlack)
	}
	for _, x := range c.XTicks {
		vline(img, px(x), top, bottom, colGrid)
		s := fmtNum(x)
		label(img, px(x)-textWidth(s)/2, bottom+16, s, colBlack)
	}
	hline(img, left, right, bottom, colBlack)
	vline(img, left, top, bottom, colBlack)
	label(img, (left+right)/2-textWidth(c.XLabel)/2, bottom+36, c.XLabel, colBlack)
	label(img, 8, top-12, c.YLabel, colBlack)
	label(img, c.W/2-textWidth(c.Title)/2, 18, c.Title, colBlack)

	for i, s := range c.Series {
		for j := 1; j < len(s.Points); j++ {
			a, b := s.Points[j-1], s.Points[j]
			line(img, px(a[0]), py(a[1]), px(b[0]), py(b[1]), s.Color, s.Dashed)
		}
		for _, p := range s.Points {
			if !s.Dashed {
				dot(img, px(p[0]), py(p[1]), s.Color)
			}
		}
		ly := top + 10 + 20*i
		line(img, right+15, ly, right+40, ly, s.Color, s.Dashed)
		label(img, right+46, ly+4, s.Label, colBlack)
	}

	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return fmt.Errorf("encode %s: %w", path, err)
	}
	return f.Close()
}

// niceStep rounds a raw grid step to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func fmtNum(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

func textWidth(s string) int { return font.MeasureString(basicfont.Face7x13, s).Ceil() }

func label(img *image.RGBA, x, y int, s string, c color.Color) {
	d := &font.Drawer{Dst: img, Src: image.NewUniform(c), Face: basicfont.Face7x13,
		Dot: fixed.Point26_6{X: fixed.I(x), Y: fixed.I(y)}}
	d.DrawString(s)
}

func hline(img *image.RGBA, x0, x1, y int, c color.RGBA) {
	for x := x0; x <= x1; x++ {
		img.SetRGBA(x, y, c)
	}
}

func vline(img *image.RGBA, x, y0, y1 int, c color.RGBA) {
	for y := y0; y <= y1; y++ {
		img.SetRGBA(x, y, c)
	}
}

func dot(img *image.RGBA, x, y int, c color.RGBA) {
	for dx := -3; dx <= 3; dx++ {
		for dy := -3; dy <= 3; dy++ {
			if dx*dx+dy*dy <= 9 {
				img.SetRGBA(x+dx, y+dy, c)
			}
		}
	}
}

// line draws a two-pixel-thick line from (x0, y0) to (x1, y1).
func line(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA, dashed bool) {
	n := max(abs(x1-x0), abs(y1-y0), 1)
	for i := 0; i <= n; i++ {
		if dashed && (i/6)%2 == 1 {
			continue
		}
		x := x0 + (x1-x0)*i/n
		y := y0 + (y1-y0)*i/n
		img.SetRGBA(x, y, c)
		img.SetRGBA(x, y+1, c)
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}
