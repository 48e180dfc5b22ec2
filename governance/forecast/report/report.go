// Package report renders a forecast for people: one namespace's resource,
// its history, the forecast's mean and band, the quota over time and the
// date the forecast crosses it, as JSON and as a PNG or SVG plot.
package report

import (
	"math"
	"time"

	"github.com/trellis-dev/trellis/governance/forecast"
)

// Point is one value at one time.
type Point struct {
	Time  time.Time `json:"time"`
	Value float64   `json:"value"`
}

// Band is the forecast at one time.
type Band struct {
	Time  time.Time `json:"time"`
	Mean  float64   `json:"mean"`
	Lower float64   `json:"lower"`
	Upper float64   `json:"upper"`
	// Bound is the upper bound a quota is planned from.
	Bound float64 `json:"bound"`
}

// Report is what is drawn, and what the JSON holds.
type Report struct {
	Namespace string     `json:"namespace"`
	Resource  string     `json:"resource"`
	Made      time.Time  `json:"made"`
	Model     string     `json:"model,omitempty"`
	History   []Point    `json:"history"`
	Forecast  []Band     `json:"forecast,omitempty"`
	Quota     []Point    `json:"quota,omitempty"` // each value holds from its time to the next
	Crosses   *time.Time `json:"crosses,omitempty"`
	// Note says why there is no forecast (too little history).
	Note string `json:"note,omitempty"`
}

// New builds the report of one series: m may be nil (no forecast), quota
// may be empty (no quota). The forecast runs from the end of the history
// over the model's horizon; Crosses is where its mean first passes the
// quota in force.
func New(ns, res string, made time.Time, s forecast.Series, m *forecast.Model, quota []forecast.Step) Report {
	r := Report{Namespace: ns, Resource: res, Made: made}
	for i, v := range s.Values {
		if !math.IsNaN(v) {
			r.History = append(r.History, Point{Time: s.Time(i), Value: v})
		}
	}
	for _, q := range quota {
		r.Quota = append(r.Quota, Point{Time: q.From, Value: q.Value})
	}
	if m == nil {
		return r
	}
	r.Model = m.String()
	f := m.Predict(s.End(), s.End().Add(m.Options().Horizon))
	for i := range f.Mean {
		t := f.Time(i)
		r.Forecast = append(r.Forecast, Band{Time: t, Mean: f.Mean[i], Lower: f.Lower[i], Upper: f.Upper[i], Bound: f.PeakBound[i]})
		if q, ok := quotaAt(quota, t); ok && r.Crosses == nil && f.Mean[i] > q {
			r.Crosses = &t
		}
	}
	return r
}

func quotaAt(quota []forecast.Step, t time.Time) (float64, bool) {
	v, ok := 0.0, false
	for _, q := range quota {
		if !q.From.After(t) {
			v, ok = q.Value, true
		}
	}
	return v, ok
}
