package forecast

import (
	"math"
	"time"
)

// Forecast is a model's prediction on a regular grid.
type Forecast struct {
	Start time.Time     `json:"start"`
	Step  time.Duration `json:"step"`
	// Mean is the expected value at each step.
	Mean []float64 `json:"mean"`
	// Lower and Upper bound each step's value with the Interval's
	// probability.
	Lower []float64 `json:"lower"`
	Upper []float64 `json:"upper"`
	// PeakBound bounds each day's peak so that a week's days all stay
	// under it with probability 1-Risk: what a quota must hold. It does
	// not extrapolate a declining trend.
	PeakBound []float64 `json:"peakBound"`
}

// Time of step i.
func (f Forecast) Time(i int) time.Time { return f.Start.Add(time.Duration(i) * f.Step) }

// Predict forecasts [from, to) at the model's step (from is rounded down
// to a step). The trend's uncertainty widens the bands with the distance
// from the end of history.
func (m *Model) Predict(from, to time.Time) Forecast {
	from = from.UTC().Truncate(m.Step)
	n := int(math.Ceil(float64(to.Sub(from)) / float64(m.Step)))
	f := Forecast{Start: from, Step: m.Step, Mean: make([]float64, n), Lower: make([]float64, n), Upper: make([]float64, n), PeakBound: make([]float64, n)}
	zHour := normalQuantile(1 - (1-m.opts.Interval)/2)
	zTrend := normalQuantile(1 - m.opts.Risk)
	for i := range n {
		t := f.Time(i)
		trend := m.SlopeStdErr * math.Abs(float64(t.Sub(m.Origin))/float64(day))
		f.Mean[i] = m.value(t, 0, 0)
		f.Lower[i] = m.value(t, -zHour*trend, m.noiseMargin(-zHour))
		f.Upper[i] = m.value(t, zHour*trend, m.noiseMargin(zHour))
		// A plan follows a decline once it has happened (RecentPeak and
		// the next fit), not before: the bound does not extrapolate one.
		hold := 0.0
		if d := float64(t.Sub(m.Origin)) / float64(day); d > 0 && m.SlopePerDay < 0 {
			hold = -m.SlopePerDay * d
		}
		f.PeakBound[i] = m.value(t, zTrend*trend+hold, m.PeakMargin)
	}
	return f
}

// Crossing is the first time the forecast's Mean passes limit (the date
// the expected peak reaches it), and whether it does within the forecast.
func (f Forecast) Crossing(limit float64) (time.Time, bool) {
	for i, v := range f.Mean {
		if v > limit {
			return f.Time(i), true
		}
	}
	return time.Time{}, false
}

// Step is one planned value, held over [From, To).
type Step struct {
	From  time.Time `json:"from"`
	To    time.Time `json:"to"`
	Value float64   `json:"value"`
}

// Schedule plans [from, from+Horizon) in steps of PlanStep. A step's value
// is the largest PeakBound of the week that ends with it (the step's own
// and the six days before it, forecast or, before from, last week's
// observed peak): a quota follows the trend day by day but does not drop
// on a weekend only to be short on Monday, and is not cut below what was
// used last week.
func (m *Model) Schedule(from time.Time) []Step {
	end := from.Add(m.opts.Horizon)
	f := m.Predict(from, end)
	var out []Step
	for s := from; s.Before(end); s = s.Add(m.opts.PlanStep) {
		e := s.Add(m.opts.PlanStep)
		if e.After(end) {
			e = end
		}
		v := math.NaN()
		if s.Add(-7 * day).Before(from) {
			v = m.RecentPeak
		}
		for i := max(0, f.index(e.Add(-7*day))); i < f.index(e) && i < len(f.PeakBound); i++ {
			if math.IsNaN(v) || f.PeakBound[i] > v {
				v = f.PeakBound[i]
			}
		}
		if m.SteadyCap > 0 {
			// Above RecentPeak by construction (the same history's peak).
			v = min(v, m.SteadyCap)
		}
		out = append(out, Step{From: s, To: e, Value: v})
	}
	return out
}

func (f Forecast) index(t time.Time) int { return int(t.Sub(f.Start) / f.Step) }

// Options returns the options the model was fitted with (defaults filled).
func (m *Model) Options() Options { return m.opts }
