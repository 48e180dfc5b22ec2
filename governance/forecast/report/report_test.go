package report

import (
	"encoding/json"
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/governance/forecast"
	"github.com/trellis-dev/trellis/internal/testutil/golden"
)

// fixture is three weeks of a growing, daily-cycling series, its model
// (a 10-day horizon) and a flat quota the forecast passes.
func fixture(t *testing.T) Report {
	t.Helper()
	start := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)
	s := forecast.Series{Start: start, Step: time.Hour, Values: make([]float64, 21*24)}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range s.Values {
		d := float64(i) / 24
		s.Values[i] = (10 + 0.3*d) * (1 + 0.25*math.Sin(2*math.Pi*(float64(i%24)-9)/24)) * (1 + 0.03*r.NormFloat64())
	}
	s.Values[100] = math.NaN() // a missed scrape is not drawn
	m, err := forecast.Fit(s, forecast.Options{Horizon: 10 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	quota := []forecast.Step{{From: start, Value: 22}}
	return New("team-a", "requests.cpu", s.End(), s, m, quota)
}

func TestReportJSONAndPlots(t *testing.T) {
	r := fixture(t)
	if r.Crosses == nil {
		t.Fatal("the forecast never crosses the quota of 22")
	}
	if len(r.History) != 21*24-1 || len(r.Forecast) != 10*24 {
		t.Fatalf("%d history points, %d forecast points: want 503 and 240", len(r.History), len(r.Forecast))
	}
	for _, b := range r.Forecast {
		if b.Lower > b.Mean || b.Mean > b.Upper || b.Upper > b.Bound {
			t.Fatalf("%s: lower %.2f mean %.2f upper %.2f bound %.2f out of order", b.Time, b.Lower, b.Mean, b.Upper, b.Bound)
		}
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden.Assert(t, "testdata/report.json", append(b, '\n'))

	dir := t.TempDir()
	svg := filepath.Join(dir, "r.svg")
	if err := r.Save(svg); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	golden.Assert(t, "testdata/report.svg", got)
	pngPath := filepath.Join(dir, "r.png")
	if err := r.Save(pngPath); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(pngPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", pngPath, err)
	}
	if w := img.Bounds().Dx(); w < 500 {
		t.Errorf("PNG %d pixels wide, want a readable plot", w)
	}
	if err := r.Save(filepath.Join(dir, "r.pdf")); err == nil {
		t.Error("a .pdf path was accepted")
	}
}
