package backtest

import (
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"

	"github.com/trellis-dev/trellis/governance/forecast"
)

const day = 24 * time.Hour

// Planner proposes the quota to hold after from, as steps covering
// [from, from+horizon), from the history before from.
type Planner interface {
	Name() string
	Plan(history forecast.Series, from time.Time, horizon time.Duration) (steps []forecast.Step, fellBack bool)
}

// PeakPlanner is today's rule (`trellis quota plan`): the peak over the
// retention, plus headroom, for the whole horizon.
type PeakPlanner struct {
	Headroom  float64
	Retention time.Duration
}

// Name of the planner.
func (p PeakPlanner) Name() string { return "peak+20%" }

// Plan holds the peak of the last Retention, times 1+Headroom.
func (p PeakPlanner) Plan(h forecast.Series, from time.Time, horizon time.Duration) ([]forecast.Step, bool) {
	i := max(0, h.Index(from.Add(-p.Retention)))
	peak := h.Slice(i, len(h.Values)).Peak()
	if math.IsNaN(peak) {
		peak = 0
	}
	return []forecast.Step{{From: from, To: from.Add(horizon), Value: peak * (1 + p.Headroom)}}, false
}

// ForecastPlanner plans from the forecast's schedule (`quota plan
// --forecast`), and falls back to Fallback where the history is too short.
type ForecastPlanner struct {
	Options  forecast.Options
	Fallback PeakPlanner
}

// Name of the planner.
func (p ForecastPlanner) Name() string { return "forecast" }

// Plan fits the history and returns its schedule.
func (p ForecastPlanner) Plan(h forecast.Series, from time.Time, horizon time.Duration) ([]forecast.Step, bool) {
	o := p.Options
	o.Horizon = horizon
	m, err := forecast.Fit(h, o)
	if err != nil {
		steps, _ := p.Fallback.Plan(h, from, horizon)
		return steps, true
	}
	return m.Schedule(from), false
}

// Planners are the two compared: today's peak plus 20% over 30 days, and
// the forecast (falling back to the former on short histories).
func Planners() []Planner { return PlannersWith(forecast.Options{}) }

// PlannersWith are Planners with the forecast fitted with opts.
func PlannersWith(opts forecast.Options) []Planner {
	peak := PeakPlanner{Headroom: 0.2, Retention: 30 * day}
	return []Planner{peak, ForecastPlanner{Options: opts, Fallback: peak}}
}

// Config of a run.
type Config struct {
	Start time.Time
	Days  int
	// First is the day of the first plan; plans are remade every Cadence
	// after it (a review), each forecasting Horizon ahead, and each holds
	// until the next one. Scoring runs from First to the last review's
	// end.
	First   int
	Cadence time.Duration
	Horizon time.Duration
	// Series per family, and the seed they are generated from.
	SeriesPerFamily int
	Seed            uint64
	// Tau is the quantile the pinball loss scores a quota as.
	Tau float64
}

// DefaultConfig: 18 weeks of hourly history per series, five series per
// family, plans from day 35 remade every week (a weekly review of the
// proposal `quota watch` makes), each forecasting 30 days.
func DefaultConfig() Config {
	return Config{Start: time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC), Days: 126, First: 35, Cadence: 7 * day, Horizon: 30 * day, SeriesPerFamily: 5, Seed: 1, Tau: 0.99}
}

// Monthly is DefaultConfig with a review every 30 days: each plan must
// last its whole horizon.
func Monthly() Config {
	c := DefaultConfig()
	c.Cadence = 30 * day
	return c
}

// Score is one planner's record on one family.
type Score struct {
	Family  string `json:"family"`
	Planner string `json:"planner"`
	// Plans made (series × reviews), and how many fell back.
	Plans     int `json:"plans"`
	Fallbacks int `json:"fallbacks"`
	// Exhaustions are episodes (runs of hours) with usage above the
	// quota; ExhaustedPlans the plans with at least one.
	Exhaustions    int `json:"exhaustions"`
	ExhaustedPlans int `json:"exhaustedPlans"`
	// OverProvisioned is quota held above each day's peak usage, in
	// resource·days (the families' level is 10 units): what a quota holds
	// that nobody used that day.
	OverProvisioned float64 `json:"overProvisionedResourceDays"`
	// Pinball is the mean pinball loss of the quota as a Tau-quantile
	// forecast of hourly usage, relative to mean usage.
	Pinball float64 `json:"pinball"`
}

// Series generates series i of a family.
func (c Config) Series(f Family, i int) forecast.Series {
	r := rand.New(rand.NewPCG(c.Seed, uint64(i)*1000+hash(f.Name)))
	return forecast.Series{Start: c.Start, Step: time.Hour, Values: f.Gen(r, c.Start, c.Days)}
}

func hash(s string) uint64 {
	var h uint64 = 14695981039346656037
	for _, b := range []byte(s) {
		h = (h ^ uint64(b)) * 1099511628211
	}
	return h
}

// Case is one series to score, under the family it belongs to.
type Case struct {
	Family string
	Series forecast.Series
}

// Run scores every planner on every family.
func Run(c Config, families []Family, planners []Planner) []Score {
	var cases []Case
	for _, f := range families {
		for i := range c.SeriesPerFamily {
			cases = append(cases, Case{Family: f.Name, Series: c.Series(f, i)})
		}
	}
	return ScoreCases(c, cases, planners)
}

// ScoreCases scores every planner on the given series (from c.Start, for
// c.Days), one Score per family and planner, families in the order they
// first appear: the first plan on day c.First, a new one every c.Cadence.
func ScoreCases(c Config, cases []Case, planners []Planner) []Score {
	var order []string
	byFamily := map[string][]forecast.Series{}
	for _, k := range cases {
		if _, ok := byFamily[k.Family]; !ok {
			order = append(order, k.Family)
		}
		byFamily[k.Family] = append(byFamily[k.Family], k.Series)
	}
	var out []Score
	for _, f := range order {
		scores := make([]Score, len(planners))
		for k, p := range planners {
			scores[k] = Score{Family: f, Planner: p.Name()}
		}
		var usageSum float64
		var usageN int
		for _, s := range byFamily[f] {
			end := c.Start.Add(time.Duration(c.Days) * day)
			for from := c.Start.Add(time.Duration(c.First) * day); !from.Add(c.Cadence).After(end); from = from.Add(c.Cadence) {
				hist := s.Slice(0, s.Index(from))
				test := s.Slice(s.Index(from), s.Index(from.Add(c.Cadence)))
				for _, v := range test.Values {
					if !math.IsNaN(v) {
						usageSum += v
						usageN++
					}
				}
				for k, p := range planners {
					steps, fell := p.Plan(hist, from, c.Horizon)
					scores[k].add(test, steps, fell, c.Tau)
				}
			}
		}
		mean := usageSum / float64(usageN)
		for k := range scores {
			scores[k].Pinball /= float64(usageN) * mean
			out = append(out, scores[k])
		}
	}
	return out
}

// add scores one plan against what happened while it held. An episode
// that runs on past a review is counted again by the next plan: the new
// plan did not end it.
func (s *Score) add(test forecast.Series, steps []forecast.Step, fell bool, tau float64) {
	s.Plans++
	if fell {
		s.Fallbacks++
	}
	over, episodes := false, 0
	for i, v := range test.Values {
		if math.IsNaN(v) { // a missed hour neither starts nor ends an episode
			continue
		}
		q := quotaAt(steps, test.Time(i))
		if v > q {
			if !over {
				episodes++
			}
			over = true
			s.Pinball += tau * (v - q)
		} else {
			over = false
			s.Pinball += (1 - tau) * (q - v)
		}
	}
	perDay := int(day / test.Step)
	for i := 0; i < len(test.Values); i += perDay {
		d := test.Slice(i, min(i+perDay, len(test.Values)))
		q := math.Inf(1)
		for j := range d.Values {
			q = math.Min(q, quotaAt(steps, d.Time(j)))
		}
		if p := d.Peak(); q > p {
			s.OverProvisioned += (q - p) * float64(len(d.Values)) / float64(perDay)
		}
	}
	s.Exhaustions += episodes
	if episodes > 0 {
		s.ExhaustedPlans++
	}
}

func quotaAt(steps []forecast.Step, t time.Time) float64 {
	for _, st := range steps {
		if !t.Before(st.From) && t.Before(st.To) {
			return st.Value
		}
	}
	return 0
}

// RunSeeds runs c once per seed and sums each family's scores.
func RunSeeds(c Config, seeds []uint64, families []Family, planners []Planner) []Score {
	return Sum(RunEach(c, seeds, families, planners))
}

// RunEach runs c once per seed, the seeds in parallel (one per CPU: a run
// is single-threaded), and returns each seed's scores in seeds' order.
func RunEach(c Config, seeds []uint64, families []Family, planners []Planner) [][]Score {
	perSeed := make([][]Score, len(seeds))
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(runtime.GOMAXPROCS(0), len(seeds)) {
		wg.Go(func() {
			for i := range next {
				c := c
				c.Seed = seeds[i]
				perSeed[i] = Run(c, families, planners)
			}
		})
	}
	for i := range seeds {
		next <- i
	}
	close(next)
	wg.Wait()
	return perSeed
}

// Sum adds runs' scores (of the same families and planners) family by
// family; pinball losses are averaged.
func Sum(runs [][]Score) []Score {
	if len(runs) == 0 {
		return nil
	}
	sum := append([]Score(nil), runs[0]...)
	for _, scores := range runs[1:] {
		for k, s := range scores {
			t := &sum[k]
			t.Plans += s.Plans
			t.Fallbacks += s.Fallbacks
			t.Exhaustions += s.Exhaustions
			t.ExhaustedPlans += s.ExhaustedPlans
			t.OverProvisioned += s.OverProvisioned
			t.Pinball += s.Pinball
		}
	}
	for k := range sum {
		sum[k].Pinball /= float64(len(runs))
	}
	return sum
}
