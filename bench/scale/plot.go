package main

import (
	"fmt"
	"os"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// plotRun writes a PNG of the run: apiserver requests per second (10-s
// averages) with the Running pod count, and the p99 latency of mutating
// calls per 10-s window against the 1 s SLO.
func plotRun(path string, r *report, series []sample, total int) error {
	win := max(1, min(10, len(r.perSecond)/30))
	var qps, p99, slo, pods plotter.XYs
	for s := 0; s+win <= len(r.perSecond); s += win {
		n := 0
		var lat []time.Duration
		for i := s; i < s+win; i++ {
			n += r.perSecond[i]
			lat = append(lat, r.mutLat[i]...)
		}
		x := (float64(s) + float64(win)/2) / 60
		qps = append(qps, plotter.XY{X: x, Y: float64(n) / float64(win)})
		p99 = append(p99, plotter.XY{X: x, Y: percentile(lat, 0.99).Seconds() * 1000})
		slo = append(slo, plotter.XY{X: x, Y: 1000})
	}
	for _, sm := range series {
		pods = append(pods, plotter.XY{X: sm.t.Minutes(), Y: float64(sm.running) / float64(total) * 100})
	}

	top := plot.New()
	top.Title.Text = fmt.Sprintf("apiserver requests/s (10 s averages) and %% of %d pods Running", total)
	top.X.Label.Text = "minutes"
	top.Y.Label.Text = "requests/s, % Running"
	qpsLine, err := plotter.NewLine(qps)
	if err != nil {
		return err
	}
	podLine, err := plotter.NewLine(pods)
	if err != nil {
		return err
	}
	podLine.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	top.Add(qpsLine, podLine, plotter.NewGrid())
	top.Legend.Add("requests/s", qpsLine)
	top.Legend.Add("% pods Running", podLine)
	top.Legend.Top = true

	bottom := plot.New()
	bottom.Title.Text = "p99 latency of mutating calls (10 s windows)"
	bottom.X.Label.Text = "minutes"
	bottom.Y.Label.Text = "ms"
	latLine, err := plotter.NewLine(p99)
	if err != nil {
		return err
	}
	sloLine, err := plotter.NewLine(slo)
	if err != nil {
		return err
	}
	sloLine.Dashes = []vg.Length{vg.Points(6), vg.Points(4)}
	bottom.Add(latLine, sloLine, plotter.NewGrid())
	bottom.Legend.Add("p99", latLine)
	bottom.Legend.Add("SLO (1 s)", sloLine)
	bottom.Legend.Top = true

	img := vgimg.New(vg.Points(900), vg.Points(700))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadX: vg.Millimeter, PadY: vg.Millimeter * 3, PadTop: vg.Millimeter, PadBottom: vg.Millimeter, PadLeft: vg.Millimeter, PadRight: vg.Millimeter}
	canvases := plot.Align([][]*plot.Plot{{top}, {bottom}}, tiles, dc)
	top.Draw(canvases[0][0])
	bottom.Draw(canvases[1][0])
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
