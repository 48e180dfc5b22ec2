// Package backtest scores quota planners on series with known structure:
// fit on the history before an origin, hold the plan for the horizon
// after it, and count what the plan would have caused. It runs the
// forecast planner and today's peak-plus-20% planner side by side.
package backtest

import (
	"math"
	"math/rand/v2"
	"time"
)

// Family generates series of one known structure.
type Family struct {
	Name string
	// What is in it, for the report.
	About string
	// Gen returns hourly values for days days from start.
	Gen func(r *rand.Rand, start time.Time, days int) []float64
}

// Base shape shared by the families: a level of 10 (say, CPU cores), a
// daily cycle peaking mid-afternoon (±30%), weekends at 60% of weekdays,
// and 3% multiplicative noise.
const (
	level    = 10.0
	dailyAmp = 0.3
	weekend  = 0.6
	noise    = 0.03
)

func seasonal(r *rand.Rand, t time.Time, noiseSD float64) float64 {
	t = t.UTC()
	h := float64(t.Hour()) + float64(t.Minute())/60
	v := 1 + dailyAmp*math.Sin(2*math.Pi*(h-9)/24)
	if wd := t.Weekday(); wd == time.Saturday || wd == time.Sunday {
		v *= weekend
	}
	return v * (1 + noiseSD*r.NormFloat64())
}

func gen(f func(r *rand.Rand, t time.Time, d float64) float64) func(*rand.Rand, time.Time, int) []float64 {
	return func(r *rand.Rand, start time.Time, days int) []float64 {
		out := make([]float64, days*24)
		for i := range out {
			t := start.Add(time.Duration(i) * time.Hour)
			out[i] = math.Max(0, f(r, t, float64(i)/24))
		}
		return out
	}
}

// Families are the generated families every planner is scored on. Level
// changes and the one-off spike happen before the first origin (day 35):
// they are structure in the history a planner must read, not surprises in
// the future no planner can see.
func Families() []Family {
	return []Family{
		{Name: "seasonal", About: "daily and weekly cycles, 3% noise",
			Gen: gen(func(r *rand.Rand, t time.Time, _ float64) float64 { return level * seasonal(r, t, noise) })},
		{Name: "noisy", About: "the same cycles, 10% noise",
			Gen: gen(func(r *rand.Rand, t time.Time, _ float64) float64 { return level * seasonal(r, t, 0.10) })},
		{Name: "growth", About: "compounding growth, 10% a week",
			Gen: gen(func(r *rand.Rand, t time.Time, d float64) float64 {
				return level * math.Pow(1.10, d/7) * seasonal(r, t, noise)
			})},
		{Name: "linear-growth", About: "a steady +2% of the starting level a day",
			Gen: gen(func(r *rand.Rand, t time.Time, d float64) float64 {
				return level * (1 + 0.02*d) * seasonal(r, t, noise)
			})},
		{Name: "step-up", About: "level ×1.6 from day 21",
			Gen: gen(func(r *rand.Rand, t time.Time, d float64) float64 {
				if d >= 21 {
					return 1.6 * level * seasonal(r, t, noise)
				}
				return level * seasonal(r, t, noise)
			})},
		{Name: "step-down", About: "level ×0.5 from day 21 (a service moved away)",
			Gen: gen(func(r *rand.Rand, t time.Time, d float64) float64 {
				if d >= 21 {
					return 0.5 * level * seasonal(r, t, noise)
				}
				return level * seasonal(r, t, noise)
			})},
		{Name: "one-off-spike", About: "one 3-hour spike to 3× between days 14 and 28",
			Gen: func(r *rand.Rand, start time.Time, days int) []float64 {
				out := gen(func(r *rand.Rand, t time.Time, _ float64) float64 { return level * seasonal(r, t, noise) })(r, start, days)
				at := 14*24 + r.IntN(14*24)
				for i := at; i < at+3 && i < len(out); i++ {
					out[i] *= 3
				}
				return out
			}},
		{Name: "new-team", About: "nothing until day 20, then a ramp to the full level over 6 weeks, then flat",
			Gen: gen(func(r *rand.Rand, t time.Time, d float64) float64 {
				switch {
				case d < 20:
					return 0
				case d < 62:
					return level * (d - 20) / 42 * seasonal(r, t, noise)
				default:
					return level * seasonal(r, t, noise)
				}
			})},
	}
}

// HeavyTailed is not one of the families the goal is scored on: the
// seasonal family's cycles with Student-t noise (3 degrees of freedom,
// scale 3%), whose tail the forecast's Gaussian margin does not hold; it
// shows what the heavy-tail check does (`go run ./bench/backtest -family
// heavy-tailed`).
func HeavyTailed() Family {
	return Family{Name: "heavy-tailed", About: "the cycles, Student-t noise (3 degrees of freedom, 3% scale)",
		Gen: gen(func(r *rand.Rand, t time.Time, _ float64) float64 {
			var chi2 float64
			for range 3 {
				z := r.NormFloat64()
				chi2 += z * z
			}
			student := r.NormFloat64() / math.Sqrt(chi2/3)
			return level * seasonal(r, t, 0) * (1 + noise*student)
		})}
}
