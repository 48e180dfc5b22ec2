package forecast

import (
	"fmt"
	"math"
	"time"
)

// Fit fits a model to s. s.Step must divide a day. Leading steps with no
// use (NaN or zero) are not history: a team that starts from nothing
// starts when it starts. Fit cuts the history at its last level shift,
// fits the trend after its last change of slope, tries each form with the
// last week held out, and keeps the one that predicted that week's daily
// peaks best.
func Fit(s Series, opts Options) (*Model, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	if s.Step <= 0 || day%s.Step != 0 {
		return nil, fmt.Errorf("step %s does not divide a day", s.Step)
	}
	first := -1
	for i, v := range s.Values {
		if !math.IsNaN(v) && v > 0 {
			first = i
			break
		}
	}
	if first < 0 {
		return nil, &ShortHistoryError{Want: opts.MinHistory}
	}
	if w := len(s.Values) - int(opts.Window/s.Step); w > first {
		first = w
	}
	// Days start at midnight (UTC), so that daily and weekly profiles line
	// up with the calendar.
	for i := first; i < len(s.Values) && i < first+int(day/s.Step); i++ {
		if t := s.Time(i).UTC(); t.Equal(t.Truncate(day)) {
			first = i
			break
		}
	}
	h := s.Slice(first, len(s.Values))
	var cp *time.Time
	if k := levelShift(dailyPeaks(h), h.Start.UTC().Weekday()); k > 0 {
		t := h.Start.Add(time.Duration(k) * day)
		cp = &t
		h = h.Slice(h.Index(t), len(h.Values))
	}
	if have := time.Duration(len(h.Values)) * h.Step; have < opts.MinHistory {
		return nil, &ShortHistoryError{Have: have, Want: opts.MinHistory}
	}
	m := choose(h, opts)
	m.PeakMargin = peakMargin(h, m, opts)
	m.ChangePoint = cp
	m.RecentPeak = h.Slice(max(0, len(h.Values)-int(7*day/h.Step)), len(h.Values)).Peak()
	m.SteadyCap = steadyCap(h, m, opts)
	return m, nil
}

// steadyCap is the cap of a steady namespace's plan: when the fitted
// trend is indistinguishable from none (within steadyZ standard errors of
// zero), the peak of the last steadyWindow of history (after any change
// point) plus SteadyHeadroom. 0: not steady.
func steadyCap(h Series, m *Model, opts Options) float64 {
	if opts.SteadyHeadroom < 0 || math.Abs(m.SlopePerDay) > steadyZ*m.SlopeStdErr {
		return 0
	}
	peak := h.Slice(max(0, len(h.Values)-int(steadyWindow/h.Step)), len(h.Values)).Peak()
	if math.IsNaN(peak) || peak <= 0 {
		return 0
	}
	return peak * (1 + opts.SteadyHeadroom)
}

// A trend within steadyZ standard errors of zero is no trend; the steady
// cap reads the peak of the last steadyWindow (the reactive planner's
// retention).
const (
	steadyZ      = 3
	steadyWindow = 30 * day
)

// choose fits every form that applies on all but the last week, keeps the
// one that predicted that week's daily peaks best (by a 10% margin over a
// simpler one), and refits it on all.
func choose(h Series, opts Options) *Model {
	perWeek := int(7 * day / h.Step)
	if len(h.Values)-perWeek < perWeek {
		m := fit(h, Additive, opts)
		m.HoldoutError = math.NaN()
		return m
	}
	train, test := h.Slice(0, len(h.Values)-perWeek), h.Slice(len(h.Values)-perWeek, len(h.Values))
	want := dailyPeaks(test)
	best, bestErr := Additive, math.Inf(1)
	for _, form := range []Form{Additive, SeasonalMultiplicative, Compounding} {
		if !applies(train, form) {
			continue
		}
		m := fit(train, form, opts)
		f := m.Predict(test.Start, test.End())
		got := dailyPeaks(Series{Start: f.Start, Step: f.Step, Values: f.Mean})
		var e float64
		for i := range want {
			e += math.Abs(want[i] - got[i])
		}
		// A later (less simple) form must beat the best so far clearly.
		if e /= float64(len(want)); e < bestErr*0.9 {
			best, bestErr = form, e
		}
	}
	if !applies(h, best) {
		best = Additive
	}
	m := fit(h, best, opts)
	m.HoldoutError = bestErr
	return m
}

// applies: compounding needs every value positive, multiplied seasons a
// positive trend.
func applies(h Series, form Form) bool {
	switch form {
	case Compounding:
		for _, v := range h.Values {
			if !math.IsNaN(v) && v <= 0 {
				return false
			}
		}
	case SeasonalMultiplicative:
		m := fit(h, Additive, Options{}.withDefaults())
		return m.Level > 0 && m.Level+m.SlopePerDay*(-float64(len(h.Values))*float64(h.Step)/float64(day)) > 0
	}
	return true
}

// fit decomposes h in one form: a Theil-Sen trend through the daily means
// (after the last change of slope), a daily profile (median per step of
// the day), a weekly profile (median per weekday, from two weeks of
// history) and the noise's robust scale. Fit adds the peaks' margin to
// the model it keeps.
func fit(h Series, form Form, opts Options) *Model {
	perDay := int(day / h.Step)
	origin := h.End()
	days := func(t time.Time) float64 { return float64(t.Sub(origin)) / float64(day) }
	// The trend's space: the value, or its logarithm when compounding.
	tv := make([]float64, len(h.Values))
	for i, v := range h.Values {
		tv[i] = v
		if form == Compounding {
			tv[i] = math.Log(v)
		}
	}
	dt, dm := dailyMeans(h, tv, days)
	m := &Model{Origin: origin, Step: h.Step, Form: form, opts: opts}
	from := slopeChange(dm)
	if from > 0 {
		t := origin.Add(time.Duration(dt[from]*float64(day)) - day/2)
		m.TrendFrom = &t
	}
	m.Level, m.SlopePerDay = theilSen(dt[from:], dm[from:])
	// Before a change of slope, the history is detrended by its own line:
	// the seasons and the noise are read from all of it.
	if m.TrendFrom != nil {
		m.earlier = &line{}
		m.earlier.level, m.earlier.slope = theilSen(dt[:from], dm[:from])
	}
	trend := func(t time.Time) float64 { return m.trend(t, 0) }
	mult := form == SeasonalMultiplicative
	// r: what the trend leaves, as a ratio or a difference.
	r := make([]float64, len(tv))
	for i := range tv {
		tr := trend(h.Time(i))
		switch {
		case !mult:
			r[i] = tv[i] - tr
		case tr > 0:
			r[i] = tv[i] / tr
		default:
			r[i] = math.NaN()
		}
	}
	remove := func(i int, s float64) {
		if mult {
			r[i] /= s
		} else {
			r[i] -= s
		}
	}
	neutral := 0.0
	if mult {
		neutral = 1
	}
	m.Daily = make([]float64, perDay)
	for s := range perDay {
		var xs []float64
		for i := range r {
			if m.slot(h.Time(i)) == s {
				xs = append(xs, r[i])
			}
		}
		if m.Daily[s] = median(xs); math.IsNaN(m.Daily[s]) || (mult && m.Daily[s] <= 0) {
			m.Daily[s] = neutral
		}
	}
	for i := range r {
		remove(i, m.Daily[m.slot(h.Time(i))])
	}
	if len(tv) >= 2*7*perDay {
		m.Weekly = make([]float64, 7)
		byDay := map[time.Weekday][]float64{}
		for i := 0; i < len(r); i += perDay {
			if v := meanOf(r[i:min(i+perDay, len(r))]); !math.IsNaN(v) {
				wd := h.Time(i).UTC().Weekday()
				byDay[wd] = append(byDay[wd], v)
			}
		}
		for wd := range m.Weekly {
			if m.Weekly[wd] = median(byDay[time.Weekday(wd)]); math.IsNaN(m.Weekly[wd]) || (mult && m.Weekly[wd] <= 0) {
				m.Weekly[wd] = neutral
			}
		}
		for i := range r {
			remove(i, m.weekly(h.Time(i)))
		}
	}
	if mult {
		for i := range r {
			r[i]--
		}
	}
	m.Sigma = mad(r)
	// The slope's uncertainty, from the scatter of the daily means about
	// the whole model's daily means.
	fitted := m.along(h)
	if form == Compounding {
		for i := range fitted {
			fitted[i] = math.Log(math.Max(fitted[i], 1e-300))
		}
	}
	_, fm := dailyMeans(h, fitted, days)
	res := make([]float64, len(dm))
	for k := range dm {
		res[k] = dm[k] - fm[k]
	}
	m.SlopeStdErr = slopeStdErr(dt[from:], mad(res[from:]))
	return m
}

// dailyMeans are each day's mean of v (NaNs skipped), at the day's middle
// in days from the origin.
func dailyMeans(h Series, v []float64, days func(time.Time) float64) (dt, dm []float64) {
	perDay := int(day / h.Step)
	for i := 0; i < len(v); i += perDay {
		j := min(i+perDay, len(v))
		if mv := meanOf(v[i:j]); !math.IsNaN(mv) {
			dt = append(dt, days(h.Time(i).Add(time.Duration(j-i)*h.Step/2)))
			dm = append(dm, mv)
		}
	}
	return dt, dm
}

func meanOf(xs []float64) float64 {
	var s float64
	var n int
	for _, x := range xs {
		if !math.IsNaN(x) {
			s += x
			n++
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return s / float64(n)
}

// dailyPeaks is each whole or partial day's maximum, days counted from
// the series' start.
func dailyPeaks(s Series) []float64 {
	perDay := int(day / s.Step)
	var out []float64
	for i := 0; i < len(s.Values); i += perDay {
		out = append(out, s.Slice(i, min(i+perDay, len(s.Values))).Peak())
	}
	return out
}
