package forecast

import (
	"fmt"
	"math"
	"time"
)

// Form is how trend and seasons combine.
type Form string

const (
	// Additive: value = trend + daily + weekly.
	Additive Form = "additive"
	// SeasonalMultiplicative: value = trend × daily × weekly (Holt-Winters'
	// multiplicative seasons: the daily swing grows with the level).
	SeasonalMultiplicative Form = "multiplicative-seasons"
	// Compounding: log(value) = trend + daily + weekly (growth by a
	// percentage a week).
	Compounding Form = "compounding"
)

// Model is a fitted series. Its trend is Level + SlopePerDay·days from
// Origin (of the value, or of its logarithm when compounding); Daily holds
// one seasonal term per step of the day and Weekly one per weekday (UTC),
// added or multiplied as the Form says.
type Model struct {
	Origin      time.Time     `json:"origin"`
	Step        time.Duration `json:"step"`
	Form        Form          `json:"form"`
	Level       float64       `json:"level"`
	SlopePerDay float64       `json:"slopePerDay"`
	Daily       []float64     `json:"daily"`
	Weekly      []float64     `json:"weekly,omitempty"`
	// Sigma is the noise's robust scale, in the form's noise space (the
	// value when additive, a ratio or a logarithm otherwise).
	Sigma       float64 `json:"sigma"`
	SlopeStdErr float64 `json:"slopeStdErr"`
	// PeakMargin is how far a week's hours can rise above the model's
	// peak for their day, at the Risk's quantile, in the margin space (the
	// value when additive, its logarithm otherwise): the bound of a day's
	// peak is the model's peak plus it. Measured on the history from the
	// noise at the hours near the peaks, not its average size; from a
	// median and MAD, so that a one-off spike does not set it (see
	// peakMargin).
	PeakMargin float64 `json:"peakMargin"`
	// ChangePoint is the start of the history used, when a level shift
	// cut the older part off; TrendFrom the start of the trend's fit, when
	// the trend's slope changed later.
	ChangePoint *time.Time `json:"changePoint,omitempty"`
	TrendFrom   *time.Time `json:"trendFrom,omitempty"`
	// RecentPeak is the largest value of the last plan step of history:
	// no planned step goes below it.
	RecentPeak float64 `json:"recentPeak"`
	// SteadyCap, when positive, caps every planned step: the series has no
	// trend (Options.SteadyHeadroom).
	SteadyCap float64 `json:"steadyCap,omitempty"`
	// HoldoutError is the mean absolute error of the chosen form's daily
	// peaks on the last week of history, fitted without it (NaN when the
	// history was too short to hold a week out).
	HoldoutError float64 `json:"holdoutError"`

	opts    Options
	earlier *line // the trend before TrendFrom
}

type line struct{ level, slope float64 }

// trend at t, shifted by dTrend (the extrapolated line only).
func (m *Model) trend(t time.Time, dTrend float64) float64 {
	d := float64(t.Sub(m.Origin)) / float64(day)
	if m.earlier != nil && t.Before(*m.TrendFrom) {
		return m.earlier.level + m.earlier.slope*d
	}
	return m.Level + m.SlopePerDay*d + dTrend
}

// value is the model at t with the trend shifted by dTrend and the noise
// term at margin (in the form's margin space).
func (m *Model) value(t time.Time, dTrend, margin float64) float64 {
	tr := m.trend(t, dTrend)
	var x float64
	switch m.Form {
	case Compounding:
		x = math.Exp(tr + m.Daily[m.slot(t)] + m.weekly(t) + margin)
	case SeasonalMultiplicative:
		w := 1.0
		if m.Weekly != nil {
			w = m.weekly(t)
		}
		x = tr * m.Daily[m.slot(t)] * w * math.Exp(margin)
	default:
		x = tr + m.Daily[m.slot(t)] + m.weekly(t) + margin
	}
	return math.Max(x, 0)
}

// along is the model's value at each of h's steps.
func (m *Model) along(h Series) []float64 {
	v := make([]float64, len(h.Values))
	for i := range v {
		v[i] = m.value(h.Time(i), 0, 0)
	}
	return v
}

// noiseMargin turns z noise scales into the margin space.
func (m *Model) noiseMargin(z float64) float64 {
	if m.Form == SeasonalMultiplicative {
		return math.Log(math.Max(1+z*m.Sigma, 1e-3))
	}
	return z * m.Sigma
}

func (m *Model) slot(t time.Time) int {
	t = t.UTC()
	return int(t.Sub(t.Truncate(day)) / m.Step)
}

func (m *Model) weekly(t time.Time) float64 {
	if m.Weekly == nil {
		return 0
	}
	return m.Weekly[t.UTC().Weekday()]
}

// String summarises the model for logs and reports.
func (m *Model) String() string {
	return fmt.Sprintf("%s trend %.4g%+.4g/day, noise %.3g, peak margin %.3g", m.Form, m.Level, m.SlopePerDay, m.Sigma, m.PeakMargin)
}
