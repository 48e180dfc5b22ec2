package forecast

import (
	"math"
	"slices"
	"time"
)

// peakMargin is the PeakBound's margin, in the margin space: a week's
// usage rises above the model's peak for each day plus it with
// probability Risk.
//
// The noise that sets a day's peak is the noise at the hours near it, so
// its centre and scale are read from the residuals of the hours within
// nearPeak of the highest modelled hour of their 7 days (a robust median
// and MAD: a one-off spike does not move them). In the additive form each
// is read at its block's top (scaled by top/model): usage's noise usually
// grows with the level, and the hours just under the top would otherwise
// understate it by about 4%, enough for a noisy plan to run out; noise of
// one size is then overstated by under 1/nearPeak. With Gaussian noise,
// independent from hour to hour, the margin follows exactly: the coming
// week's hours all stay under their calendar day's modelled peak plus the
// margin with probability 1-Risk (a plan step holds the week's largest
// bound, so plans run out less often than that). Read from hundreds of
// hours, it varies little from one fit to the next; a margin fitted to a
// few weeks of daily peaks (gumbelMargin) varies by a third, and a plan
// must then be wide on average for its narrow draws not to run out.
//
// When the residuals' tail is heavier than Gaussian (more days with a
// residual beyond tailScales scales than Gaussian noise makes), or their
// scale is 0 (usage flat most hours), the Gaussian margin would be too
// narrow: the margin is then at least the Gumbel tail fitted to the daily
// peaks' misses, which carries what the tail really does.
//
// Few days of history widen the margin by 1+5/days: the first plan after
// a level shift has only the days since it to fit, and a narrower widening
// lets that plan run out (docs/design/forecast.md).
func peakMargin(h Series, m *Model, opts Options) float64 {
	fitted := m.along(h)
	miss := dailyMisses(h, fitted, m.Form)
	if len(miss) == 0 {
		return 0
	}
	widen := 1 + 5/float64(len(miss))
	r := peakResiduals(h, fitted, m.Form)
	centre, scale := 0.0, m.Sigma
	if len(r) >= minPeakResiduals {
		centre, scale = r.centreAndScale()
	}
	var margin float64
	switch {
	case scale <= 0:
		margin = gumbelMargin(miss, opts.Risk)
	case r.heavyTailed(centre, scale):
		margin = math.Max(gumbelMargin(miss, opts.Risk), gaussianMargin(m, centre, scale, opts.Risk))
	default:
		margin = gaussianMargin(m, centre, scale, opts.Risk)
	}
	return math.Max(margin*widen, 0)
}

// nearPeak: hours whose modelled value is at least this share of the
// highest of their 7 days are near the peak (in the additive form a large
// level makes most weekday hours near it; the scale read is then the
// noise's at most hours). minPeakResiduals: fewer such hours than this,
// and the noise's scale is read from all hours (Model.Sigma).
//
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

// residual is what one near-peak hour's usage left of the model, in the
// form's noise space, and the day (from the history's start) it fell on.
type residual struct {
	value float64
	day   int
}

type residuals []residual

// peakResiduals are the residuals of the history's near-peak hours
// (fitted: the model's value at each of h's steps). The history is read
// in 7-day blocks counted back from its end, so that a partial block
// (skipped when a whole one exists) is the oldest.
func peakResiduals(h Series, fitted []float64, form Form) residuals {
	perDay := int(day / h.Step)
	perWeek := 7 * perDay
	var r residuals
	for e := len(h.Values); e > 0; e -= perWeek {
		w := max(0, e-perWeek)
		if e-w < perWeek && len(r) > 0 {
			break
		}
		mv := fitted[w:e]
		top := 0.0
		for _, v := range mv {
			top = math.Max(top, v)
		}
		for i, v := range mv {
			if a := h.Values[w+i]; !math.IsNaN(a) && v > 0 && v >= nearPeak*top {
				if x, ok := noise(form, a, v); ok {
					if form == Additive {
						x *= top / v
					}
					r = append(r, residual{value: x, day: (w + i) / perDay})
				}
			}
		}
	}
	return r
}

// centreAndScale are the residuals' median and MAD.
func (r residuals) centreAndScale() (centre, scale float64) {
	xs := make([]float64, len(r))
	for i, x := range r {
		xs[i] = x.value
	}
	return median(xs), mad(xs)
}

// noise is what actual leaves of the model's value, in the form's noise
// space (as Model.Sigma is measured).
func noise(form Form, actual, model float64) (float64, bool) {
	switch form {
	case Compounding:
		if actual <= 0 {
			return 0, false
		}
		return math.Log(actual / model), true
	case SeasonalMultiplicative:
		return actual/model - 1, true
	default:
		return actual - model, true
	}
}

// heavyTailed: more days have a residual above centre+tailScales·scale
// than Gaussian noise would give (one day with several, such as a one-off
// spike, is one day).
func (r residuals) heavyTailed(centre, scale float64) bool {
	seen := map[int]bool{}
	for _, x := range r {
		if x.value > centre+tailScales*scale {
			seen[x.day] = true
		}
	}
	expected := float64(len(r)) * normalTail(tailScales)
	return len(seen) >= tailDays && float64(len(seen)) > expected+3*math.Sqrt(expected)
}

// gaussianMargin solves for the margin x at which every hour of the 7
// calendar days from the model's origin stays under its day's modelled
// peak plus x with probability 1-risk, each hour's noise Gaussian
// (centre, scale) and independent of the others.
func gaussianMargin(m *Model, centre, scale, risk float64) float64 {
	week := weekAhead(m)
	want := math.Log1p(-risk)
	lo, hi := 0.0, math.Abs(centre)+10*scale
	for range bisections {
		if logUnder(m.Form, week, centre, scale, hi) >= want {
			break
		}
		lo, hi = hi, 2*hi
	}
	for range bisections {
		mid := (lo + hi) / 2
		if logUnder(m.Form, week, centre, scale, mid) < want {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// bisections bound both the search for an upper end and the halvings
// after it (10 scales doubled 40 times is beyond any noise).
const bisections = 40

// hour is one modelled hour and its calendar day's modelled peak.
type hour struct{ value, dayPeak float64 }

// weekAhead is the model's 7 calendar days (UTC) from the day of its
// origin.
func weekAhead(m *Model) []hour {
	perDay := int(day / m.Step)
	start := m.Origin.UTC().Truncate(day)
	week := make([]hour, 0, 7*perDay)
	for d := range 7 {
		first := len(week)
		peak := 0.0
		for j := range perDay {
			v := m.value(start.Add(time.Duration(d)*day+time.Duration(j)*m.Step), 0, 0)
			peak = math.Max(peak, v)
			week = append(week, hour{value: v})
		}
		for k := first; k < len(week); k++ {
			week[k].dayPeak = peak
		}
	}
	return week
}

// logUnder is log P(every hour stays under its day's peak plus x). Hours
// further below it than farBelow scales (nights, weekends) add nothing a
// float64 holds.
func logUnder(form Form, week []hour, centre, scale, x float64) float64 {
	var s float64
	for _, h := range week {
		if h.value <= 0 {
			continue
		}
		var limit float64 // the noise an hour may have
		switch form {
		case Compounding:
			limit = math.Log(h.dayPeak/h.value) + x
		case SeasonalMultiplicative:
			limit = h.dayPeak*math.Exp(x)/h.value - 1
		default:
			limit = h.dayPeak + x - h.value
		}
		if z := (limit - centre) / scale; z < farBelow {
			s += math.Log1p(-normalTail(z))
		}
	}
	return s
}

// farBelow: the normal tail beyond 9 is 1.1e-19, under float64's
// resolution next to 1.
const farBelow = 9

// normalTail is the standard normal distribution's upper tail, 1-Φ(z).
func normalTail(z float64) float64 { return 0.5 * math.Erfc(z/math.Sqrt2) }

// dailyMisses are how far each day's actual peak rose above the model's
// peak for the day (fitted: the model's value at each of h's steps), in
// the margin space.
func dailyMisses(h Series, fitted []float64, form Form) []float64 {
	perDay := int(day / h.Step)
	var miss []float64
	for i := 0; i < len(h.Values); i += perDay {
		j := min(i+perDay, len(h.Values))
		actual := h.Slice(i, j).Peak()
		if math.IsNaN(actual) {
			continue
		}
		peak := slices.Max(fitted[i:j])
		if form == Additive {
			miss = append(miss, actual-peak)
		} else if actual > 0 && peak > 0 {
			miss = append(miss, math.Log(actual/peak))
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
