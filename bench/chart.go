package main

import (
	"errors"
	"fmt"
	"image"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// series is one line of the chart: y values at the chart's x values.
type series struct {
	Label  string
	Color  color.RGBA
	Points [][2]float64 // (x, y)
	Dashed bool
}

// chart is a small line chart drawn with gonum.org/v1/plot: y from zero,
// x ticks at XTicks, and the legend to the right of the plot area.
type chart struct {
	Title, XLabel, YLabel string
	XTicks                []float64
	Series                []series
	W, H                  int // size of the PNG in pixels
	// LogY draws y on a log scale between the powers of ten around the
	// positive values (ticks at each power), for values spanning several
	// orders of magnitude, as latencies from tens of milliseconds to tens
	// of seconds; a value of zero or less is drawn at the bottom.
	LogY bool
}

var (
	colBlack  = color.RGBA{0, 0, 0, 255}
	colGrid   = color.RGBA{225, 225, 225, 255}
	colBlue   = color.RGBA{31, 119, 180, 255}
	colOrng   = color.RGBA{255, 127, 14, 255}
	colGreen  = color.RGBA{44, 160, 44, 255}
	colRed    = color.RGBA{214, 39, 40, 255}
	colPurple = color.RGBA{148, 103, 189, 255}
)

// chartDPI is the resolution the chart is drawn at: the PNG is W x H pixels
// whatever it is, and the fonts and lines, sized in points, scale with it.
const chartDPI = 96

// WritePNG draws the chart into path.
func (c chart) WritePNG(path string) error {
	return writeCharts(path, c.W, c.H, c)
}

// writeCharts draws charts stacked top to bottom, each as tall as the
// others, into a PNG of w x h pixels at path.
func writeCharts(path string, w, h int, charts ...chart) error {
	if w <= 0 || h <= 0 {
		return fmt.Errorf("chart size %dx%d", w, h)
	}
	img := vgimg.NewWith(vgimg.UseImage(image.NewRGBA(image.Rect(0, 0, w, h))), vgimg.UseDPI(chartDPI))
	pad := vg.Points(6)
	all := draw.New(img)
	if len(charts) == 0 {
		charts = []chart{{}}
	}
	step := all.Size().Y / vg.Length(len(charts))
	for i, c := range charts {
		p, err := c.plot()
		if err != nil {
			return err
		}
		// Chart i takes the i-th band from the top.
		top, bottom := vg.Length(i)*step, vg.Length(len(charts)-1-i)*step
		dc := draw.Crop(all, pad, -pad, bottom+pad, -top-pad)
		// The plot takes the band less a column on the right for the
		// legend, so the legend never hides a line; the legend starts level
		// with the top of the plot area, under the title.
		legend := p.Legend
		p.Legend = plot.NewLegend() // nothing for p.Draw to draw
		lw := legend.Rectangle(dc).Size().X + 2*pad
		p.Draw(draw.Crop(dc, 0, -lw, 0, 0))
		below := p.Title.TextStyle.Height(p.Title.Text) + p.Title.Padding
		legend.Draw(draw.Crop(dc, dc.Size().X-lw+2*pad, 0, 0, -below))
	}

	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("encode %s: %w", path, err)
	}
	return f.Close()
}

// plot builds the gonum plot of the chart: axes, grid, one line per series
// (solid lines with a dot at each point, dashed lines without) and their
// legend entries.
func (c chart) plot() (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = c.Title
	p.X.Label.Text = c.XLabel
	p.Y.Label.Text = c.YLabel
	// A sans-serif face (Liberation Sans, which the library embeds) reads
	// better than the default serif one at screen sizes.
	for _, f := range []*font.Font{&p.Title.TextStyle.Font, &p.X.Label.TextStyle.Font, &p.Y.Label.TextStyle.Font,
		&p.X.Tick.Label.Font, &p.Y.Tick.Label.Font, &p.Legend.TextStyle.Font} {
		f.Variant = "Sans"
	}
	p.Title.TextStyle.Font.Size = vg.Points(13)

	xmin, xmax := math.Inf(1), math.Inf(-1)
	ymax := 0.0
	for _, x := range c.XTicks {
		xmin, xmax = math.Min(xmin, x), math.Max(xmax, x)
	}
	for _, s := range c.Series {
		for _, pt := range s.Points {
			xmin, xmax = math.Min(xmin, pt[0]), math.Max(xmax, pt[0])
			ymax = math.Max(ymax, pt[1])
		}
	}
	if math.IsInf(xmin, 0) {
		xmin, xmax = 0, 1
	}
	if xmax <= xmin {
		xmax = xmin + 1
	}
	var xt plot.ConstantTicks
	for _, x := range c.XTicks {
		xt = append(xt, plot.Tick{Value: x, Label: fmtNum(x)})
	}
	var yt plot.ConstantTicks
	ybottom, ytop := 0.0, 0.0
	if c.LogY {
		ybottom, ytop = logRange(c.Series)
		for y := ybottom; y <= ytop*(1+1e-9); y *= 10 {
			yt = append(yt, plot.Tick{Value: y, Label: fmtNum(y)})
		}
		p.Y.Scale = plot.LogScale{}
	} else {
		ystep := niceStep(ymax / 5)
		ytop = math.Ceil(ymax*1.05/ystep) * ystep
		if ytop <= 0 {
			ytop = 1
		}
		for i := 0; float64(i)*ystep <= ytop+1e-9; i++ {
			y := float64(i) * ystep
			yt = append(yt, plot.Tick{Value: y, Label: fmtNum(y)})
		}
	}
	p.X.Tick.Marker, p.Y.Tick.Marker = xt, yt

	grid := plotter.NewGrid()
	grid.Vertical.Color, grid.Horizontal.Color = colGrid, colGrid
	grid.Vertical.Width, grid.Horizontal.Width = vg.Points(0.75), vg.Points(0.75)
	p.Add(grid)

	p.Legend.ThumbnailWidth = vg.Points(24)
	p.Legend.TextStyle.Font.Size = vg.Points(10)
	p.Legend.Padding = vg.Points(4)
	p.Legend.Top, p.Legend.Left = true, true
	for _, s := range c.Series {
		xys := make(plotter.XYs, len(s.Points))
		for i, pt := range s.Points {
			xys[i] = plotter.XY{X: pt[0], Y: pt[1]}
			if c.LogY && pt[1] < ybottom {
				xys[i].Y = ybottom
			}
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, fmt.Errorf("series %q: %w", s.Label, err)
		}
		l.Color = s.Color
		l.Width = vg.Points(1.5)
		thumbs := []plot.Thumbnailer{l}
		if s.Dashed {
			l.Dashes = []vg.Length{vg.Points(6), vg.Points(4)}
		} else {
			sc, err := plotter.NewScatter(xys)
			if err != nil {
				return nil, fmt.Errorf("series %q: %w", s.Label, err)
			}
			sc.Color = s.Color
			sc.Shape = draw.CircleGlyph{}
			sc.Radius = vg.Points(2.5)
			thumbs = append(thumbs, sc)
			if len(xys) > 0 {
				p.Add(sc)
			}
		}
		if len(xys) > 0 {
			p.Add(l)
		}
		p.Legend.Add(s.Label, thumbs...)
	}

	// After p.Add, which widens the axes to the data: pin them.
	p.X.Min, p.X.Max = xmin, xmax
	p.Y.Min, p.Y.Max = ybottom, ytop
	return p, nil
}

// logRange is the y range of a log-scale chart: from the power of ten at or
// below the smallest positive value to the one at or above the largest
// (times 1.05, so that a line does not run along the top), at least one
// decade; 1 to 10 when no value is positive.
func logRange(ss []series) (bottom, top float64) {
	lo, hi := math.Inf(1), 0.0
	for _, s := range ss {
		for _, pt := range s.Points {
			if pt[1] > 0 {
				lo, hi = math.Min(lo, pt[1]), math.Max(hi, pt[1])
			}
		}
	}
	if hi == 0 {
		return 1, 10
	}
	bottom = math.Pow(10, math.Floor(math.Log10(lo)))
	top = math.Pow(10, math.Ceil(math.Log10(hi*1.05)))
	if top <= bottom {
		top = bottom * 10
	}
	return bottom, top
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

// drawOpenLoopChart plots, against the offered rate, the throughput each
// engine's open-loop runs achieved (solid, in the engine's colour; the
// offered rate itself and each engine's e2e backlog rate dashed) above their
// p99 (solid) and p50 (dashed) latency on a log scale, with the 1 s goal.
func drawOpenLoopChart(path string, res results) error {
	var xs []float64
	var thr, lat []series
	for i, er := range res.Engines {
		if len(er.OpenLoop) == 0 {
			return fmt.Errorf("no open-loop results of engine %s", er.Name)
		}
		col := engineColours[i%len(engineColours)]
		achieved := series{Label: er.Name + " achieved", Color: col}
		p99 := series{Label: er.Name + " p99", Color: col}
		p50 := series{Label: er.Name + " p50", Color: col, Dashed: true}
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, r := range er.OpenLoop {
			x := math.Round(r.Config.Offered*10) / 10
			xs = append(xs, x)
			lo, hi = math.Min(lo, x), math.Max(hi, x)
			achieved.Points = append(achieved.Points, [2]float64{x, r.Rate})
			p99.Points = append(p99.Points, [2]float64{x, float64(r.P99) / float64(time.Millisecond)})
			p50.Points = append(p50.Points, [2]float64{x, float64(r.P50) / float64(time.Millisecond)})
		}
		thr = append(thr, achieved, series{Label: er.Name + " e2e backlog drain", Color: col, Dashed: true,
			Points: [][2]float64{{lo, er.E2E.Rate}, {hi, er.E2E.Rate}}})
		lat = append(lat, p99, p50)
	}
	if len(xs) == 0 {
		return errors.New("no open-loop results")
	}
	ticks := chartTicks(xs)
	lo, hi := slices.Min(xs), slices.Max(xs)
	thr = append(thr, series{Label: "offered", Color: colBlack, Dashed: true, Points: [][2]float64{{lo, lo}, {hi, hi}}})
	lat = append(lat, series{Label: "1 s goal", Color: colBlack, Dashed: true, Points: [][2]float64{{lo, 1000}, {hi, 1000}}})
	top := chart{
		Title:  fmt.Sprintf("orderflow open loop by Temporal engine (direct-consumer baseline: %.0f events/s)", res.Baseline.Rate),
		XLabel: "offered events/s", YLabel: "achieved events/s", XTicks: ticks, Series: thr,
	}
	bottom := chart{
		Title:  "latency from publish to order_events row",
		XLabel: "offered events/s", YLabel: "ms (log scale)", XTicks: ticks, Series: lat, LogY: true,
	}
	return writeCharts(path, 860, 720, top, bottom)
}

// engineColours are the engines' colours in the chart, in the order they
// ran.
var engineColours = []color.RGBA{colBlue, colOrng, colGreen, colRed, colPurple}

// chartTicks are the x ticks of offered rates xs: the rates themselves
// when no two are closer than a twelfth of their span (one engine), else
// round numbers within the span, whose labels do not run into each other.
func chartTicks(xs []float64) []float64 {
	u := slices.Clone(xs)
	slices.Sort(u)
	u = slices.Compact(u)
	if len(u) < 2 {
		return u
	}
	span := u[len(u)-1] - u[0]
	crowded := false
	for i := 1; i < len(u); i++ {
		crowded = crowded || u[i]-u[i-1] < span/12
	}
	if !crowded {
		return u
	}
	step := niceStep(span / 6)
	var out []float64
	for x := math.Ceil(u[0]/step) * step; x <= u[len(u)-1]+1e-9; x += step {
		out = append(out, math.Round(x*1e6)/1e6)
	}
	return out
}
