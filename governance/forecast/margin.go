package forecast

import (
	"math"
	"time"
)

// peakMargin is the PeakBound's margin, in the margin space: a week's
// usage rises above the model's peak for each day plus it with
// probability Risk.
//
// The noise that sets a day's peak is the noise at the hours near it, so
// its centre and scale are read from the residuals of the hours within
// nearPeak of their week's highest modelled hour (a robust median and
// MAD: a one-off spike does not move them). With Gaussian noise,
// independent from hour to hour, the margin follows exactly: the week
// ahead's hours all stay under their day's peak plus the margin with
// probability 1-Risk. Read from hundreds of hours, it varies little from
// one fit to the next; a margin fitted to a few weeks of daily peaks
// (below) varies by a third, and a plan must then be wide on average for
// its narrow draws not to run out.
//
// When the residuals' tail is heavier than Gaussian (more days with a
// residual beyond 3 scales than Gaussian noise makes), the Gaussian margin
// would be too narrow: the margin is then a Gumbel tail fitted to the
// daily peaks' misses, which carries what the tail really does.
//
// Few days of history widen the margin by 1+5/days: with 1+4/days the
// backtests' first plan after a level shift (14 days of history) ran out
// for an hour.
func peakMargin(h Series, m *Model, opts Options) float64 {
	miss := dailyMisses(h, m)
	if len(miss) == 0 {
		return 0
	}
	widen := 1 + 5/float64(len(miss))
	r := peakResiduals(h, m)
	centre, scale := 0.0, m.Sigma
	if len(r.values) >= minPeakResiduals {
		centre, scale = median(r.values), mad(r.values)
	}
	if r.heavyTailed(centre, scale) {
		return math.Max(gumbelMargin(miss, opts.Risk)*widen, 0)
	}
	if scale <= 0 {
		return math.Max(centre, 0) * widen
	}
	return math.Max(gaussianMargin(m, centre, scale, opts.Risk)*widen, 0)
}

// nearPeak: hours whose modelled value is at least this share of their
// week's highest are near the peak. minPeakResiduals: fewer such hours
// than this, and the noise's scale is read from all hours (Model.Sigma).
// tailDays days with a near-peak residual above tailScales scales (and
// more than Gaussian noise explains) make the tail heavy: Gaussian noise
// puts 2.3e-4 of its hours there, so a few hundred hours rarely show one,
// while a Student t with 3 degrees of freedom puts 1.4% there. 3 scales
// and 3 days were tried: the Gaussian families' fits switched to the
// Gumbel tail 1% to 8% of the time (their MAD's low draws), against 0% to
// 4% at 3.5 and 2.
const (
	nearPeak         = 0.9
	minPeakResiduals = 20
	tailScales       = 3.5
	tailDays         = 2
)

// residuals of the near-peak hours, in the form's noise space, and the day
// (from the history's start) each belongs to.
type residuals struct {
	values []float64
	days   []int
}

func peakResiduals(h Series, m *Model) residuals {
	perDay := int(day / h.Step)
	perWeek := 7 * perDay
	mv := make([]float64, len(h.Values))
	for i := range mv {
		mv[i] = m.value(h.Time(i), 0, 0)
	}
	var r residuals
	for w := 0; w < len(mv); w += perWeek {
		e := min(w+perWeek, len(mv))
		top := 0.0
		for _, v := range mv[w:e] {
			top = math.Max(top, v)
		}
		for i := w; i < e; i++ {
			if a := h.Values[i]; !math.IsNaN(a) && mv[i] > 0 && mv[i] >= nearPeak*top {
				if x, ok := noise(m.Form, a, mv[i]); ok {
					r.values = append(r.values, x)
					r.days = append(r.days, i/perDay)
				}
			}
		}
	}
	return r
}

// noise is what actual leaves of the model's value, in the form's noise
// space (as Model.Sigma is measured).
func noise(form Form, actual, model float64) (float64, bool) {
	switch form {
	case Additive:
		return actual - model, true
	case Compounding:
		if actual <= 0 {
			return 0, false
		}
		return math.Log(actual / model), true
	default:
		return actual/model - 1, true
	}
}

// heavyTailed: more days have a residual above centre+3·scale than
// Gaussian noise would give (one day with several: a one-off spike, is
// one day).
func (r residuals) heavyTailed(centre, scale float64) bool {
	if scale <= 0 {
		return false
	}
	seen := map[int]bool{}
	for k, x := range r.values {
		if x > centre+tailScales*scale {
			seen[r.days[k]] = true
		}
	}
	expected := float64(len(r.values)) * (1 - normalCDF(tailScales))
	return len(seen) >= tailDays && float64(len(seen)) > expected+3*math.Sqrt(expected)
}

// gaussianMargin solves for the margin x at which every hour of the week
// after the model's origin stays under its day's modelled peak plus x
// with probability 1-risk, each hour's noise Gaussian (centre, scale) and
// independent of the others.
func gaussianMargin(m *Model, centre, scale, risk float64) float64 {
	perDay := int(day / m.Step)
	type hour struct{ value, dayPeak float64 }
	var week []hour
	for d := range 7 {
		start := m.Origin.Add(time.Duration(d) * day)
		first := len(week)
		peak := 0.0
		for j := range perDay {
			v := m.value(start.Add(time.Duration(j)*m.Step), 0, 0)
			peak = math.Max(peak, v)
			week = append(week, hour{value: v})
		}
		for k := first; k < len(week); k++ {
			week[k].dayPeak = peak
		}
	}
	// logUnder is log P(every hour stays under its day's peak plus x).
	// Hours further below it than farBelow scales (nights, weekends) add
	// nothing a float64 holds.
	logUnder := func(x float64) float64 {
		var s float64
		for _, h := range week {
			if h.value <= 0 {
				continue
			}
			var limit float64 // the noise an hour may have
			switch m.Form {
			case Additive:
				limit = h.dayPeak + x - h.value
			case Compounding:
				limit = math.Log(h.dayPeak/h.value) + x
			default:
				limit = h.dayPeak*math.Exp(x)/h.value - 1
			}
			if z := (limit - centre) / scale; z < farBelow {
				s += math.Log(normalCDF(z))
			}
		}
		return s
	}
	want := math.Log(1 - risk)
	lo, hi := 0.0, math.Abs(centre)+10*scale
	for logUnder(hi) < want {
		hi *= 2
	}
	for range 40 {
		mid := (lo + hi) / 2
		if logUnder(mid) < want {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// dailyMisses are how far each day's actual peak rose above the model's
// peak for the day, in the margin space.
func dailyMisses(h Series, m *Model) []float64 {
	perDay := int(day / h.Step)
	var miss []float64
	for i := 0; i < len(h.Values); i += perDay {
		d := h.Slice(i, min(i+perDay, len(h.Values)))
		actual := d.Peak()
		if math.IsNaN(actual) {
			continue
		}
		fitted := 0.0
		for j := range d.Values {
			fitted = math.Max(fitted, m.value(d.Time(j), 0, 0))
		}
		if m.Form == Additive {
			miss = append(miss, actual-fitted)
		} else if actual > 0 && fitted > 0 {
			miss = append(miss, math.Log(actual/fitted))
		}
	}
	return miss
}

// gumbelMargin: daily peaks are maxima, so a Gumbel distribution fitted to
// the misses' median and 90th percentile (robust to a one-off spike) gives
// the quantile a day's miss stays under with probability 1-risk/7, so that
// a week's days stay under it with 1-risk.
func gumbelMargin(miss []float64, risk float64) float64 {
	p := 1 - risk/7
	med := median(miss)
	beta := (quantile(miss, 0.9) - med) / (gumbelZ(0.9) - gumbelZ(0.5))
	return med + beta*(gumbelZ(p)-gumbelZ(0.5))
}

// gumbelZ is the standard Gumbel distribution's quantile at p.
func gumbelZ(p float64) float64 { return -math.Log(-math.Log(p)) }

// farBelow: 1-Φ(9) is 1.1e-19, under float64's resolution at 1.
const farBelow = 9

// normalCDF is the standard normal distribution's CDF at z.
func normalCDF(z float64) float64 { return 0.5 * math.Erfc(-z/math.Sqrt2) }
