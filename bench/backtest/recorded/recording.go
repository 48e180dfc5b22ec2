package recorded

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/trellis-dev/trellis/governance/forecast"
	"github.com/trellis-dev/trellis/governance/forecast/backtest"
)

// Recording is what a recording run kept: each tenant's hourly request
// rate as Prometheus had it, and how the run was made.
type Recording struct {
	Recorded time.Time `json:"recorded"`
	// Hour is how long a virtual hour lasted; Scrape Prometheus's scrape
	// interval.
	Hour       time.Duration `json:"hour"`
	Scrape     time.Duration `json:"scrape"`
	Days       int           `json:"days"`
	Kubernetes string        `json:"kubernetes"`
	Tenants    []Recorded    `json:"tenants"`
}

// Recorded is one tenant's series: requests per second, by virtual hour
// from VirtualStart (null where no sample covered the hour).
type Recorded struct {
	Name    string     `json:"name"`
	About   string     `json:"about"`
	Issued  int        `json:"issued"`
	Failed  int        `json:"failed"`
	Dropped int        `json:"dropped"`
	Rates   []*float64 `json:"requestsPerSecond"`
}

// Series is the tenant's rates as a forecast series.
func (r Recorded) Series() forecast.Series {
	s := forecast.Series{Start: VirtualStart, Step: time.Hour, Values: make([]float64, len(r.Rates))}
	for i, v := range r.Rates {
		s.Values[i] = math.NaN()
		if v != nil {
			s.Values[i] = *v
		}
	}
	return s
}

// NewRecorded keeps a tenant's series (rounded to a hundredth of a
// request per second) and what its driver did.
func NewRecorded(tn Tenant, s forecast.Series, d Drove) Recorded {
	r := Recorded{Name: tn.Name, About: tn.About, Failed: d.Failed[tn.Name], Dropped: d.Dropped[tn.Name], Rates: make([]*float64, len(s.Values))}
	for _, n := range d.Issued[tn.Name] {
		r.Issued += n
	}
	for i, v := range s.Values {
		if !math.IsNaN(v) {
			v = math.Round(v*100) / 100
			r.Rates[i] = &v
		}
	}
	return r
}

// Cases are the recording's series for backtest.ScoreCases, each tenant a
// family of one.
func (rec Recording) Cases() []backtest.Case {
	out := make([]backtest.Case, len(rec.Tenants))
	for i, t := range rec.Tenants {
		out[i] = backtest.Case{Family: t.Name, Series: t.Series()}
	}
	return out
}

// Config is the backtest over a full recording: the first plan on
// FirstDay, a new one each week, each forecasting 30 days.
func (rec Recording) Config() backtest.Config {
	c := backtest.DefaultConfig()
	c.Start, c.Days, c.First = VirtualStart, rec.Days, FirstDay
	return c
}

// Save writes rec as indented JSON.
func (rec Recording) Save(path string) error {
	b, err := json.MarshalIndent(rec, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// Load reads a recording Save wrote.
func Load(path string) (Recording, error) {
	var rec Recording
	b, err := os.ReadFile(path)
	if err != nil {
		return rec, err
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, fmt.Errorf("%s: %w", path, err)
	}
	for _, t := range rec.Tenants {
		if len(t.Rates) != rec.Days*24 {
			return rec, fmt.Errorf("%s: tenant %s has %d hours, want %d (%d days)", path, t.Name, len(t.Rates), rec.Days*24, rec.Days)
		}
	}
	return rec, nil
}
