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

// series is one line of a panel, solid, dashed or dotted, with a dot at
// each point unless Plain.
type series struct {
	Label          string
	Color          color.RGBA
	Points         plotter.XYs
	Dashed, Dotted bool
	Plain          bool
}

// black draws the reference lines; engineColours are the engines' colours,
// in the order they ran.
var (
	black         = color.RGBA{0, 0, 0, 255}
	engineColours = []color.RGBA{{31, 119, 180, 255}, {255, 127, 14, 255}, {44, 160, 44, 255}, {214, 39, 40, 255}}
)

// drawSweepChart plots, against the offered rate, each engine's capacity
// sweeps (every step and the cells at 0.5 and 0.9 × the capacity), in the
// engine's colour, orderflow solid, the pipeline floor dashed and the
// direct floor, when measured, dotted: the achieved rate
// above (the offered rate itself dashed black), the p99 below on a log
// scale with the 1 s goal.
func drawSweepChart(path string, res results) error {
	var thr, lat []series
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, er := range res.Engines {
		if er.Sweep == nil {
			return fmt.Errorf("no sweep of engine %s", er.Name)
		}
		col := engineColours[i%len(engineColours)]
		for _, sw := range []struct {
			name string
			s    *sweepResult
		}{{stageOrderflow, er.Sweep}, {stagePipeline, er.FloorSweep}, {stageDirect, er.DirectSweep}} {
			if sw.s == nil {
				continue
			}
			label := fmt.Sprintf("%s %s", er.Name, sw.name)
			if sw.s.Capacity > 0 {
				label += fmt.Sprintf(" (capacity %.0f)", sw.s.Capacity)
			}
			achieved := series{Label: label, Color: col, Dashed: sw.name == stagePipeline, Dotted: sw.name == stageDirect}
			p99 := achieved
			for _, r := range sw.s.points() {
				x := r.Config.Offered
				lo, hi = math.Min(lo, x), math.Max(hi, x)
				achieved.Points = append(achieved.Points, plotter.XY{X: x, Y: r.Rate})
				p99.Points = append(p99.Points, plotter.XY{X: x, Y: float64(r.P99) / float64(time.Millisecond)})
			}
			thr, lat = append(thr, achieved), append(lat, p99)
		}
	}
	if len(thr) == 0 {
		return errors.New("no sweep results")
	}
	thr = append(thr, series{Label: "offered", Color: black, Dashed: true, Plain: true, Points: plotter.XYs{{X: lo, Y: lo}, {X: hi, Y: hi}}})
	lat = append(lat, series{Label: "1 s goal", Color: black, Dashed: true, Plain: true, Points: plotter.XYs{{X: lo, Y: 1000}, {X: hi, Y: 1000}}})
	top, err := panel("capacity sweeps by Temporal engine: orderflow solid, pipeline floor dashed, direct floor dotted", "achieved events/s", thr, false)
	if err != nil {
		return err
	}
	bottom, err := panel("p99 from publish or signal to applied (orderflow: order_events row; floors: received)", "ms (log scale)", lat, true)
	if err != nil {
		return err
	}
	return writePanels(path, top, bottom)
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
		switch {
		case s.Dashed:
			l.Dashes = []vg.Length{vg.Points(6), vg.Points(4)}
		case s.Dotted:
			l.Dashes = []vg.Length{vg.Points(1.5), vg.Points(3)}
		}
		if !s.Plain {
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

// writePanels draws plots stacked top to bottom into a PNG of 860 x 720
// pixels at path.
func writePanels(path string, ps ...*plot.Plot) error {
	img := vgimg.NewWith(vgimg.UseImage(image.NewRGBA(image.Rect(0, 0, 860, 720))), vgimg.UseDPI(96))
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
