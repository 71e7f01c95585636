package main

import (
	"errors"
	"fmt"
	"image"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// series is one line of a panel: solid with a dot at each point, or dashed.
type series struct {
	Label  string
	Color  color.RGBA
	Points plotter.XYs
	Dashed bool
}

var (
	colBlack = color.RGBA{0, 0, 0, 255}
	colBlue  = color.RGBA{31, 119, 180, 255}
	colOrng  = color.RGBA{255, 127, 14, 255}
	colGreen = color.RGBA{44, 160, 44, 255}
	colRed   = color.RGBA{214, 39, 40, 255}
)

// engineColours are the engines' colours in the chart, in the order they
// ran.
var engineColours = []color.RGBA{colBlue, colOrng, colGreen, colRed}

// drawOpenLoopChart plots, against the offered rate, the throughput each
// engine's open-loop runs achieved (solid, in the engine's colour; the
// offered rate itself and each engine's e2e backlog rate dashed) above their
// p99 (solid) and p50 (dashed) latency on a log scale, with the 1 s goal.
func drawOpenLoopChart(path string, res results) error {
	var thr, lat []series
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, er := range res.Engines {
		if len(er.OpenLoop) == 0 {
			return fmt.Errorf("no open-loop results of engine %s", er.Name)
		}
		col := engineColours[i%len(engineColours)]
		achieved := series{Label: er.Name + " achieved", Color: col}
		p99 := series{Label: er.Name + " p99", Color: col}
		p50 := series{Label: er.Name + " p50", Color: col, Dashed: true}
		elo, ehi := math.Inf(1), math.Inf(-1)
		for _, r := range er.OpenLoop {
			x := r.Config.Offered
			elo, ehi = math.Min(elo, x), math.Max(ehi, x)
			achieved.Points = append(achieved.Points, plotter.XY{X: x, Y: r.Rate})
			p99.Points = append(p99.Points, plotter.XY{X: x, Y: float64(r.P99) / float64(time.Millisecond)})
			p50.Points = append(p50.Points, plotter.XY{X: x, Y: float64(r.P50) / float64(time.Millisecond)})
		}
		lo, hi = math.Min(lo, elo), math.Max(hi, ehi)
		thr = append(thr, achieved, series{Label: er.Name + " e2e backlog drain", Color: col, Dashed: true,
			Points: plotter.XYs{{X: elo, Y: er.E2E.Rate}, {X: ehi, Y: er.E2E.Rate}}})
		lat = append(lat, p99, p50)
	}
	if len(thr) == 0 {
		return errors.New("no open-loop results")
	}
	thr = append(thr, series{Label: "offered", Color: colBlack, Dashed: true, Points: plotter.XYs{{X: lo, Y: lo}, {X: hi, Y: hi}}})
	lat = append(lat, series{Label: "1 s goal", Color: colBlack, Dashed: true, Points: plotter.XYs{{X: lo, Y: 1000}, {X: hi, Y: 1000}}})
	top, err := panel(fmt.Sprintf("orderflow open loop by Temporal engine (direct-consumer baseline: %.0f events/s)", res.Baseline.Rate),
		"achieved events/s", thr, false)
	if err != nil {
		return err
	}
	bottom, err := panel("latency from publish to order_events row", "ms (log scale)", lat, true)
	if err != nil {
		return err
	}
	return writePanels(path, 860, 720, top, bottom)
}

// panel is one plot of the chart against the offered rate: y from zero,
// or on a log scale between the powers of ten around the positive values
// (a value of zero or less is drawn at the bottom).
func panel(title, yLabel string, ss []series, logY bool) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = title, "offered events/s", yLabel
	p.Add(plotter.NewGrid())
	p.Legend.XOffs, p.Legend.YOffs = -vg.Points(8), vg.Points(8) // bottom right, where no line runs
	bottom, top := logRange(ss)
	for _, s := range ss {
		xys := append(plotter.XYs(nil), s.Points...)
		for i := range xys {
			if logY {
				xys[i].Y = max(xys[i].Y, bottom)
			}
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, fmt.Errorf("series %q: %w", s.Label, err)
		}
		l.Color, l.Width = s.Color, vg.Points(1.5)
		thumbs := []plot.Thumbnailer{l}
		if s.Dashed {
			l.Dashes = []vg.Length{vg.Points(6), vg.Points(4)}
		} else {
			sc, err := plotter.NewScatter(xys)
			if err != nil {
				return nil, fmt.Errorf("series %q: %w", s.Label, err)
			}
			sc.Color, sc.Shape, sc.Radius = s.Color, draw.CircleGlyph{}, vg.Points(2.5)
			p.Add(sc)
			thumbs = append(thumbs, sc)
		}
		p.Add(l)
		p.Legend.Add(s.Label, thumbs...)
	}
	if logY {
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
		p.Y.Min, p.Y.Max = bottom, top
	} else {
		p.Y.Min, p.Y.Max = 0, p.Y.Max*1.05
	}
	return p, nil
}

// logRange is the y range of a log-scale panel: from the power of ten at
// or below the smallest positive value to the one at or above the largest
// (times 1.05, so that a line does not run along the top); 1 to 10 when no
// value is positive.
func logRange(ss []series) (bottom, top float64) {
	lo, hi := math.Inf(1), 0.0
	for _, s := range ss {
		for _, pt := range s.Points {
			if pt.Y > 0 {
				lo, hi = math.Min(lo, pt.Y), math.Max(hi, pt.Y)
			}
		}
	}
	if hi == 0 {
		return 1, 10
	}
	bottom = math.Pow(10, math.Floor(math.Log10(lo)))
	return bottom, max(bottom*10, math.Pow(10, math.Ceil(math.Log10(hi*1.05))))
}

// writePanels draws plots stacked top to bottom into a PNG of w x h
// pixels at path.
func writePanels(path string, w, h int, ps ...*plot.Plot) error {
	if w <= 0 || h <= 0 {
		return fmt.Errorf("chart size %dx%d", w, h)
	}
	img := vgimg.NewWith(vgimg.UseImage(image.NewRGBA(image.Rect(0, 0, w, h))), vgimg.UseDPI(96))
	rows := make([][]*plot.Plot, len(ps))
	for i, p := range ps {
		rows[i] = []*plot.Plot{p}
	}
	pad := vg.Points(6)
	tiles := draw.Tiles{Rows: len(ps), Cols: 1, PadTop: pad, PadBottom: pad, PadLeft: pad, PadRight: pad, PadY: 2 * pad}
	for i, row := range plot.Align(rows, tiles, draw.New(img)) {
		ps[i].Draw(row[0])
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
