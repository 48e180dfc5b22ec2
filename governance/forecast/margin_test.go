package forecast

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// weekdayModel is an additive model at level 100: a daily cycle of ±20
// peaking at 15:00 and weekends 30 lower (its top is 120).
func weekdayModel() *Model {
	m := &Model{Origin: t0, Step: time.Hour, Form: Additive, Level: 100, Daily: make([]float64, 24), Weekly: make([]float64, 7)}
	for h := range m.Daily {
		m.Daily[h] = 20 * cycle(h)
	}
	m.Weekly[time.Saturday], m.Weekly[time.Sunday] = -30, -30
	return m
}

// The Gaussian margin is exact for the model it assumes: weeks drawn from
// that model (a daily cycle, weekends lower, Gaussian noise each hour) rise
// above their days' peaks plus the margin in a Risk share of them.
func TestGaussianMarginHoldsItsRisk(t *testing.T) {
	m := weekdayModel()
	const sd, weeks = 2.0, 20000
	r := rand.New(rand.NewPCG(1, 2))
	for _, risk := range []float64{0.2, 0.05} {
		x := gaussianMargin(m, 0, sd, risk)
		over := 0
		for range weeks {
			for h := range 7 * 24 {
				at := t0.Add(time.Duration(h) * time.Hour)
				peak := m.value(at.Truncate(day).Add(15*time.Hour), 0, 0) // the cycle's top
				if m.value(at, 0, 0)+sd*r.NormFloat64() > peak+x {
					over++
					break
				}
			}
		}
		got := float64(over) / weeks
		t.Logf("risk %.2f: margin %.2f (%.2f noise scales), %.4f of %d weeks over", risk, x, x/sd, got, weeks)
		if tol := 4 * math.Sqrt(risk*(1-risk)/weeks); math.Abs(got-risk) > tol {
			t.Errorf("risk %.2f: %.4f of the weeks rose above the margin, want %.2f±%.4f", risk, got, risk, tol)
		}
	}
}

// A heavy tail (Student t noise, 3 degrees of freedom) switches the margin
// to the Gumbel tail of the daily peaks, wider than the Gaussian one;
// Gaussian noise and a one-off spike (many hours, one day) do not.
func TestHeavyTailSwitchesToTheGumbelMargin(t *testing.T) {
	shape := func(_ float64, hour int, wd time.Weekday) float64 {
		v := 100 + 20*cycle(hour)
		if wd == time.Saturday || wd == time.Sunday {
			v -= 30
		}
		return v
	}
	r := rand.New(rand.NewPCG(3, 4))
	student := func() float64 {
		var chi float64
		for range 3 {
			z := r.NormFloat64()
			chi += z * z
		}
		return r.NormFloat64() / math.Sqrt(chi/3)
	}
	gauss := synth(56, 2, shape)
	spike := synth(56, 2, shape)
	for i := 30*24 + 13; i < 30*24+17; i++ {
		spike.Values[i] *= 3
	}
	heavy := synth(56, 0, shape)
	for i := range heavy.Values {
		heavy.Values[i] += 2 * student()
	}
	for _, c := range []struct {
		name  string
		s     Series
		heavy bool
	}{{"gaussian", gauss, false}, {"one-off spike", spike, false}, {"student t", heavy, true}} {
		m, err := Fit(c.s, Options{})
		if err != nil {
			t.Fatal(err)
		}
		r := peakResiduals(c.s, m.along(c.s), m.Form)
		centre, scale := r.centreAndScale()
		if got := r.heavyTailed(centre, scale); got != c.heavy {
			t.Errorf("%s (%s): heavy tail %v, want %v", c.name, m, got, c.heavy)
		}
		g := gaussianMargin(m, centre, scale, m.opts.Risk) * (1 + 5/56.0)
		t.Logf("%s: %s; Gaussian margin %.2f", c.name, m, g)
		if c.heavy && m.PeakMargin <= g {
			t.Errorf("%s: margin %.2f, want the Gumbel tail's, wider than the Gaussian %.2f", c.name, m.PeakMargin, g)
		}
		if !c.heavy && math.Abs(m.PeakMargin-g) > 1e-9 {
			t.Errorf("%s: margin %.2f, want the Gaussian %.2f", c.name, m.PeakMargin, g)
		}
	}
}

// Usage flat at most hours (integer pods, say) has a MAD of 0 at the
// peaks: the margin then comes from the daily peaks' misses, not 0.
func TestFlatUsageKeepsAMargin(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	s := Series{Start: t0, Step: time.Hour, Values: make([]float64, 56*24)}
	for i := range s.Values {
		s.Values[i] = 20
		if r.Float64() < 0.03 {
			s.Values[i] += float64(1 + r.IntN(5))
		}
	}
	m, err := Fit(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	peak := s.Peak()
	bound := m.Predict(s.End(), s.End().Add(7*day)).PeakBound[0]
	t.Logf("%s: bound %.2f, history's peak %.0f", m, bound, peak)
	if bound < peak {
		t.Errorf("bound %.2f, under the history's peak %.0f that a week reaches every few days", bound, peak)
	}
}

func TestOptionsOutOfRangeAreRefused(t *testing.T) {
	s := synth(28, 1, func(float64, int, time.Weekday) float64 { return 10 })
	for _, o := range []Options{{Risk: -0.01}, {Risk: 1}, {Interval: 1.5}, {Window: -day}} {
		if _, err := Fit(s, o); err == nil {
			t.Errorf("%+v: fitted, want a refusal", o)
		} else {
			t.Logf("%+v: %v", o, err)
		}
	}
}

// In the additive form the near-peak residuals are read at their block's
// top: noise that grows with the level (usage's usually does) is as wide
// there as at the peak, not as at the hours just under it; noise of one
// size everywhere is overstated by under 1/nearPeak.
func TestAdditiveScaleIsReadAtThePeak(t *testing.T) {
	m := weekdayModel()
	const top, weeks = 120.0, 200
	r := rand.New(rand.NewPCG(9, 10))
	for _, c := range []struct {
		name   string
		sd     func(v float64) float64
		lo, hi float64 // the scale read, in the peak's noise scales
	}{
		{"noise growing with the level", func(v float64) float64 { return 0.02 * v }, 0.98, 1.02},
		{"noise of one size", func(float64) float64 { return 2.4 }, 0.98, 1 / nearPeak},
	} {
		s := Series{Start: t0, Step: time.Hour, Values: make([]float64, weeks*7*24)}
		for i := range s.Values {
			v := m.value(s.Time(i), 0, 0)
			s.Values[i] = v + c.sd(v)*r.NormFloat64()
		}
		_, scale := peakResiduals(s, m.along(s), m.Form).centreAndScale()
		got := scale / c.sd(top)
		t.Logf("%s: scale %.3f, %.3f of the peak's", c.name, scale, got)
		if got < c.lo || got > c.hi {
			t.Errorf("%s: scale %.3f of the peak's noise, want %.2f to %.2f", c.name, got, c.lo, c.hi)
		}
	}
}
