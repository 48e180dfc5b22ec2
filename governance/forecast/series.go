// Package forecast forecasts a namespace's resource and API needs from
// their history: a trend (linear, or compounding when growth is
// multiplicative), daily and weekly seasonality, and a prediction band
// wide enough for the peak of a whole planning step, over a horizon. It
// turns a forecast into a quota schedule (one step per review interval)
// and finds the date a forecast crosses a limit.
//
// The model is deliberately small and robust: Theil-Sen trends on daily
// peaks, medians for the seasonal profiles, the MAD for the noise, and one
// change point, so that a one-off spike or an old level does not set
// next month's quota. Its references were VPA's recommender (percentile
// plus margin), Crane's DSP predictor (periodicity, per-slot maxima) and
// ARIMA-style trend-plus-season decompositions.
package forecast

import (
	"math"
	"time"
)

// Point is one observation.
type Point struct {
	Time  time.Time
	Value float64
}

// Series is a regularly sampled series: Values[i] is the peak observed in
// [Start + i·Step, Start + (i+1)·Step). NaN marks a step with no
// observation.
type Series struct {
	Start  time.Time
	Step   time.Duration
	Values []float64
}

// Time of step i.
func (s Series) Time(i int) time.Time { return s.Start.Add(time.Duration(i) * s.Step) }

// End is the end of the last step.
func (s Series) End() time.Time { return s.Time(len(s.Values)) }

// Index of the step holding t (may be out of range).
func (s Series) Index(t time.Time) int {
	return int(math.Floor(float64(t.Sub(s.Start)) / float64(s.Step)))
}

// Resample buckets points into steps aligned to step (in UTC), keeping
// each bucket's maximum: a quota has to hold a step's peak, not its mean.
// Points outside [from, to) are dropped.
func Resample(points []Point, from, to time.Time, step time.Duration) Series {
	from = from.UTC().Truncate(step)
	n := int(math.Ceil(float64(to.Sub(from)) / float64(step)))
	if n < 0 {
		n = 0
	}
	s := Series{Start: from, Step: step, Values: make([]float64, n)}
	for i := range s.Values {
		s.Values[i] = math.NaN()
	}
	for _, p := range points {
		i := s.Index(p.Time)
		if i < 0 || i >= n {
			continue
		}
		if math.IsNaN(s.Values[i]) || p.Value > s.Values[i] {
			s.Values[i] = p.Value
		}
	}
	return s
}

// Slice returns steps [i, j).
func (s Series) Slice(i, j int) Series {
	return Series{Start: s.Time(i), Step: s.Step, Values: s.Values[i:j]}
}

// Peak is the largest value (NaN when there is none).
func (s Series) Peak() float64 {
	p := math.NaN()
	for _, v := range s.Values {
		if !math.IsNaN(v) && (math.IsNaN(p) || v > p) {
			p = v
		}
	}
	return p
}
