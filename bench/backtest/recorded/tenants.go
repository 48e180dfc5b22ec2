// Package recorded backtests the planners on series a real apiserver and a
// real Prometheus recorded, not generated ones: tenants whose request rates
// follow known shapes (daily and weekly cycles, growth, a step, a spike, a
// team starting from nothing) drive a kube-apiserver through their own
// service accounts and flow schemas, Prometheus scrapes the apiserver's
// apiserver_flowcontrol_dispatched_requests_total, and each tenant's hourly
// request rate is read back from Prometheus.
//
// Weeks of hourly history cannot be recorded in a test, so the recording
// runs on a compressed clock: one hour of the tenants' day lasts Hour of
// wall time (one second in the full recording). Everything between the
// shapes and the series is real: the clients, APF's classification and
// counters, the scrapes and their timing, the requests the apiserver was
// slow to serve.
package recorded

import (
	"math"
	"math/rand/v2"
	"time"
)

// Tenant is a namespace whose request rate follows a known shape.
type Tenant struct {
	Name  string `json:"name"`
	About string `json:"about"`
	// From is the day it starts sending (0: from the start).
	From float64 `json:"from,omitempty"`
	// rate is requests per second of wall time at virtual time t, d days
	// after the recording's start; noise is the hour's random factor.
	rate func(t time.Time, d, noise float64) float64
	// noiseSD is the relative size of an hour's random factor.
	noiseSD float64
}

// Rate is the tenant's target request rate during the hour starting at
// virtual time t (d days after the start), with that hour's noise drawn
// from r.
func (tn Tenant) Rate(t time.Time, d float64, r *rand.Rand) float64 {
	return math.Max(0, tn.rate(t, d, 1+tn.noiseSD*r.NormFloat64()))
}

// Base shape, as the generated families': a daily cycle peaking
// mid-afternoon (±30%) and weekends at 60% of weekdays.
func cycle(t time.Time) float64 {
	t = t.UTC()
	v := 1 + 0.3*math.Sin(2*math.Pi*(float64(t.Hour())-9)/24)
	if wd := t.Weekday(); wd == time.Saturday || wd == time.Sunday {
		v *= 0.6
	}
	return v
}

// Tenants are the recorded shapes, at rates a 2-core machine serves with
// room to spare (about 110 requests a second in all on average, 200 at
// the busiest hours). SpikeDay, StepDay and the new team's start come
// before the first plan (FirstDay): structure a planner must read.
func Tenants() []Tenant {
	return []Tenant{
		{Name: "team-seasonal", About: "daily and weekly cycles, 3% noise", noiseSD: 0.03,
			rate: func(t time.Time, _, n float64) float64 { return 20 * cycle(t) * n }},
		{Name: "team-noisy", About: "the same cycles, 10% noise", noiseSD: 0.10,
			rate: func(t time.Time, _, n float64) float64 { return 20 * cycle(t) * n }},
		{Name: "team-growth", About: "compounding growth, 10% a week", noiseSD: 0.03,
			rate: func(t time.Time, d, n float64) float64 { return 15 * math.Pow(1.10, d/7) * cycle(t) * n }},
		{Name: "team-step", About: "level ×1.6 from day 5", noiseSD: 0.03,
			rate: func(t time.Time, d, n float64) float64 {
				if d >= StepDay {
					return 1.6 * 12 * cycle(t) * n
				}
				return 12 * cycle(t) * n
			}},
		{Name: "team-spike", About: "one 3-hour spike to 3× on day 10", noiseSD: 0.03,
			rate: func(t time.Time, d, n float64) float64 {
				if d >= SpikeDay+14.0/24 && d < SpikeDay+17.0/24 {
					return 3 * 15 * cycle(t) * n
				}
				return 15 * cycle(t) * n
			}},
		{Name: "team-new", About: "nothing until day 3, then a ramp to the full level over 3 weeks", noiseSD: 0.03, From: 3,
			rate: func(t time.Time, d, n float64) float64 {
				switch {
				case d < 3:
					return 0
				case d < 24:
					return 20 * (d - 3) / 21 * cycle(t) * n
				default:
					return 20 * cycle(t) * n
				}
			}},
	}
}

// The shapes' days, in days from the recording's start.
const (
	StepDay  = 5
	SpikeDay = 10
	// FirstDay is the first plan's day in the full recording: 16 days
	// after the step, more than the 14 the forecaster needs.
	FirstDay = 21
	// FullDays is the full recording's length: plans on days 21, 28
	// and 35, each scored for the week it holds.
	FullDays = 42
)

// VirtualStart is the recordings' virtual start: a Monday, midnight UTC.
var VirtualStart = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
