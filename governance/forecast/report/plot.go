package report

import (
	"fmt"
	"image/color"
	"io"
	"path/filepath"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// Save draws the report to path, as PNG or SVG by its extension.
func (r Report) Save(path string) error {
	switch filepath.Ext(path) {
	case ".png", ".svg":
	default:
		return fmt.Errorf("%s: want a .png or .svg file", path)
	}
	p, err := r.plot()
	if err != nil {
		return err
	}
	if err := p.Save(24*vg.Centimeter, 12*vg.Centimeter, path); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// WriteSVG draws the report as SVG to w (the web console serves it).
func (r Report) WriteSVG(w io.Writer) error {
	p, err := r.plot()
	if err != nil {
		return err
	}
	wt, err := p.WriterTo(24*vg.Centimeter, 12*vg.Centimeter, "svg")
	if err != nil {
		return fmt.Errorf("failed to draw the %s %s plot: %w", r.Namespace, r.Resource, err)
	}
	if _, err := wt.WriteTo(w); err != nil {
		return fmt.Errorf("failed to write the %s %s plot: %w", r.Namespace, r.Resource, err)
	}
	return nil
}

func x(t time.Time) float64 { return float64(t.Unix()) }

func (r Report) plot() (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: %s", r.Namespace, r.Resource)
	if r.Crosses != nil {
		p.Title.Text += fmt.Sprintf(" (forecast reaches the quota on %s)", r.Crosses.Format(time.DateOnly))
	} else if r.Note != "" {
		p.Title.Text += " (" + r.Note + ")"
	}
	p.X.Tick.Marker = plot.TimeTicks{Format: "Jan 2"}
	p.Y.Label.Text = r.Resource
	p.Add(plotter.NewGrid())
	if len(r.Forecast) > 0 {
		var band plotter.XYs
		for _, b := range r.Forecast {
			band = append(band, plotter.XY{X: x(b.Time), Y: b.Upper})
		}
		for i := len(r.Forecast) - 1; i >= 0; i-- {
			band = append(band, plotter.XY{X: x(r.Forecast[i].Time), Y: r.Forecast[i].Lower})
		}
		poly, err := plotter.NewPolygon(band)
		if err != nil {
			return nil, fmt.Errorf("failed to draw the forecast band of the %s %s plot: %w", r.Namespace, r.Resource, err)
		}
		poly.Color = rgba(70, 130, 180, 70)
		poly.Width = 0
		p.Add(poly)
		p.Legend.Add("forecast band", poly)
		var mean plotter.XYs
		for _, b := range r.Forecast {
			mean = append(mean, plotter.XY{X: x(b.Time), Y: b.Mean})
		}
		l, err := plotter.NewLine(mean)
		if err != nil {
			return nil, fmt.Errorf("failed to draw the forecast line of the %s %s plot: %w", r.Namespace, r.Resource, err)
		}
		l.Color = rgba(70, 130, 180, 255)
		p.Add(l)
		p.Legend.Add("forecast", l)
	}
	if len(r.History) > 0 {
		var h plotter.XYs
		for _, pt := range r.History {
			h = append(h, plotter.XY{X: x(pt.Time), Y: pt.Value})
		}
		l, err := plotter.NewLine(h)
		if err != nil {
			return nil, fmt.Errorf("failed to draw the usage line of the %s %s plot: %w", r.Namespace, r.Resource, err)
		}
		l.Color = rgba(40, 40, 40, 255)
		p.Add(l)
		p.Legend.Add("usage (hourly peak)", l)
	}
	if len(r.Quota) > 0 {
		end := r.Quota[len(r.Quota)-1].Time
		if n := len(r.Forecast); n > 0 {
			end = r.Forecast[n-1].Time
		}
		var q plotter.XYs
		for i, pt := range r.Quota {
			to := end
			if i+1 < len(r.Quota) {
				to = r.Quota[i+1].Time
			}
			q = append(q, plotter.XY{X: x(pt.Time), Y: pt.Value}, plotter.XY{X: x(to), Y: pt.Value})
		}
		l, err := plotter.NewLine(q)
		if err != nil {
			return nil, fmt.Errorf("failed to draw the quota line of the %s %s plot: %w", r.Namespace, r.Resource, err)
		}
		l.Color = rgba(200, 30, 30, 255)
		l.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
		p.Add(l)
		p.Legend.Add("quota", l)
	}
	if r.Crosses != nil {
		lo, hi := p.Y.Min, p.Y.Max
		l, err := plotter.NewLine(plotter.XYs{{X: x(*r.Crosses), Y: lo}, {X: x(*r.Crosses), Y: hi}})
		if err != nil {
			return nil, fmt.Errorf("failed to draw the quota crossing line of the %s %s plot: %w", r.Namespace, r.Resource, err)
		}
		l.Color = rgba(200, 30, 30, 255)
		p.Add(l)
	}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	return p, nil
}

func rgba(r, g, b, a uint8) color.NRGBA { return color.NRGBA{R: r, G: g, B: b, A: a} }
