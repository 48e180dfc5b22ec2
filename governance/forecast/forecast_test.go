package forecast

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC) // a Monday

// synth is an hourly series of days days: f(d, hour, weekday) plus normal
// noise of sd.
func synth(days int, sd float64, f func(d float64, hour int, wd time.Weekday) float64) Series {
	r := rand.New(rand.NewPCG(7, 7))
	s := Series{Start: t0, Step: time.Hour, Values: make([]float64, days*24)}
	for i := range s.Values {
		t := s.Time(i)
		s.Values[i] = f(float64(i)/24, t.Hour(), t.Weekday()) + sd*r.NormFloat64()
	}
	return s
}

func cycle(hour int) float64 { return math.Sin(2 * math.Pi * float64(hour-9) / 24) }

func TestResampleKeepsEachStepsPeak(t *testing.T) {
	pts := []Point{
		{t0.Add(10 * time.Minute), 3}, {t0.Add(20 * time.Minute), 7}, {t0.Add(50 * time.Minute), 5},
		{t0.Add(2*time.Hour + time.Minute), 1}, {t0.Add(-time.Minute), 100}, {t0.Add(3 * time.Hour), 100},
	}
	s := Resample(pts, t0, t0.Add(3*time.Hour), time.Hour)
	if len(s.Values) != 3 || s.Values[0] != 7 || !math.IsNaN(s.Values[1]) || s.Values[2] != 1 {
		t.Fatalf("got %v, want [7 NaN 1] (points outside the range dropped)", s.Values)
	}
}

func TestFitRecoversTrendAndSeasons(t *testing.T) {
	truth := func(d float64, hour int, wd time.Weekday) float64 {
		v := 100 + 0.5*d + 20*cycle(hour)
		if wd == time.Saturday || wd == time.Sunday {
			v -= 30
		}
		return v
	}
	s := synth(56, 1, truth)
	m, err := Fit(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Form != Additive {
		t.Errorf("form %s, want additive", m.Form)
	}
	if math.Abs(m.SlopePerDay-0.5) > 0.05 {
		t.Errorf("slope %.3f/day, want 0.5", m.SlopePerDay)
	}
	f := m.Predict(s.End(), s.End().Add(14*day))
	var worst float64
	for i := range f.Mean {
		want := truth(56+float64(i)/24, f.Time(i).Hour(), f.Time(i).Weekday())
		worst = math.Max(worst, math.Abs(f.Mean[i]-want)/want)
		if f.Lower[i] > want || f.Upper[i] < want-3 {
			t.Fatalf("%s: band %.1f..%.1f misses %.1f", f.Time(i), f.Lower[i], f.Upper[i], want)
		}
	}
	if worst > 0.03 {
		t.Errorf("worst error of the mean over two weeks %.1f%%, want under 3%%", 100*worst)
	}
}

func TestLevelShiftCutsTheHistory(t *testing.T) {
	s := synth(56, 0.5, func(d float64, hour int, _ time.Weekday) float64 {
		if d >= 30 {
			return 50 + 5*cycle(hour)
		}
		return 20 + 5*cycle(hour)
	})
	m, err := Fit(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m.ChangePoint == nil || m.ChangePoint.Sub(t0) < 29*day || m.ChangePoint.Sub(t0) > 31*day {
		t.Fatalf("change point %v, want day 30", m.ChangePoint)
	}
	if p := m.Predict(s.End(), s.End().Add(day)); math.Abs(p.Mean[15]-(50+5*cycle(15))) > 2 {
		t.Errorf("mean after the shift %.1f, want about %.1f", p.Mean[15], 50+5*cycle(15))
	}
}

func TestCompoundingGrowthIsNotAShift(t *testing.T) {
	s := synth(56, 0.2, func(d float64, hour int, _ time.Weekday) float64 {
		return 20 * math.Pow(1.1, d/7) * (1 + 0.2*cycle(hour))
	})
	m, err := Fit(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m.ChangePoint != nil {
		t.Errorf("change point at %v in smooth growth", m.ChangePoint)
	}
	want := 20 * math.Pow(1.1, 70.0/7) * 1.2
	if got := m.Predict(s.End().Add(14*day), s.End().Add(15*day)).Mean[15]; math.Abs(got-want)/want > 0.05 {
		t.Errorf("peak in two weeks %.1f, want %.1f (within 5%%)", got, want)
	}
}

func TestShortHistoryIsRefused(t *testing.T) {
	s := synth(30, 0.1, func(float64, int, time.Weekday) float64 { return 5 })
	for i := range 20 * 24 {
		s.Values[i] = 0 // the team starts on day 20
	}
	_, err := Fit(s, Options{})
	if !IsShortHistory(err) {
		t.Fatalf("got %v, want a ShortHistoryError", err)
	}
	if _, err := Fit(Series{Start: t0, Step: 7 * time.Hour, Values: make([]float64, 100)}, Options{}); err == nil || IsShortHistory(err) {
		t.Fatalf("a step that does not divide a day: got %v", err)
	}
}

func TestScheduleHoldsTheWeeksPeakAndFollowsGrowth(t *testing.T) {
	s := synth(56, 0.3, func(d float64, hour int, wd time.Weekday) float64 {
		v := (40 + 0.4*d) * (1 + 0.3*cycle(hour))
		if wd == time.Saturday || wd == time.Sunday {
			v *= 0.5
		}
		return v
	})
	m, err := Fit(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	steps := m.Schedule(s.End())
	if len(steps) != 30 || !steps[0].From.Equal(s.End()) || !steps[29].To.Equal(s.End().Add(30*day)) {
		t.Fatalf("%d steps from %v to %v, want 30 daily steps over the horizon", len(steps), steps[0].From, steps[len(steps)-1].To)
	}
	for i, st := range steps {
		if i > 0 && st.Value < steps[i-1].Value {
			t.Errorf("step %d (%s) %.1f below the day before (%.1f): a growing quota dropped", i, st.From.Weekday(), st.Value, steps[i-1].Value)
		}
		d := float64(st.To.Sub(t0)) / float64(day)
		if peak := (40 + 0.4*d) * 1.3; st.Value < peak {
			t.Errorf("step %d %.1f under the expected weekday peak %.1f", i, st.Value, peak)
		}
	}
	if r := steps[29].Value / ((40 + 0.4*86) * 1.3); r > 1.25 {
		t.Errorf("last step %.0f%% over the expected peak, want under 25%%", 100*(r-1))
	}
}

func TestCrossing(t *testing.T) {
	f := Forecast{Start: t0, Step: time.Hour, Mean: []float64{1, 2, 3, 4}}
	if at, ok := f.Crossing(2.5); !ok || !at.Equal(t0.Add(2*time.Hour)) {
		t.Errorf("crossing 2.5: %v %v, want hour 2", at, ok)
	}
	if _, ok := f.Crossing(4); ok {
		t.Error("crossing 4: want none (4 does not pass 4)")
	}
}

// A series without a trend plans at most its last 30 days' peak plus the
// steady headroom (the default's 20% is checked, then 2%, which the
// forecast's own bound passes); one that grows gets no cap; a negative
// headroom turns the cap off.
func TestSteadyCap(t *testing.T) {
	flat := synth(56, 4, func(d float64, hour int, wd time.Weekday) float64 { return 40 * (1 + 0.3*cycle(hour)) })
	peak := flat.Slice(flat.Index(flat.End().Add(-30*day)), len(flat.Values)).Peak()
	def, err := Fit(flat, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(def.SteadyCap-peak*1.2) > 1e-9 {
		t.Fatalf("steady cap %.2f, want the last 30 days' peak %.2f plus 20%%", def.SteadyCap, peak)
	}
	m, err := Fit(flat, Options{SteadyHeadroom: 0.02})
	if err != nil {
		t.Fatal(err)
	}
	uncapped, err := Fit(flat, Options{SteadyHeadroom: -1})
	if err != nil {
		t.Fatal(err)
	}
	if uncapped.SteadyCap != 0 {
		t.Fatalf("a negative headroom still capped: %.2f", uncapped.SteadyCap)
	}
	capped, free := m.Schedule(flat.End()), uncapped.Schedule(flat.End())
	bound := false
	for i := range capped {
		if capped[i].Value > m.SteadyCap+1e-9 {
			t.Errorf("step %d: %.2f above the cap %.2f", i, capped[i].Value, m.SteadyCap)
		}
		if free[i].Value > m.SteadyCap {
			bound = true
		}
	}
	if !bound {
		t.Error("the uncapped plan never passes the cap: the test proves nothing")
	}
	growing := synth(56, 4, func(d float64, hour int, wd time.Weekday) float64 { return (40 + 0.4*d) * (1 + 0.3*cycle(hour)) })
	if g, err := Fit(growing, Options{}); err != nil || g.SteadyCap != 0 {
		t.Errorf("a growing series is capped at %.2f (%v)", g.SteadyCap, err)
	}
}
