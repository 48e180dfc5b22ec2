package apfplan

import (
	"math"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/trellis-dev/trellis/governance/forecast"
)

// hourly is a query's series as Prometheus answers it: one point a second
// before each hour's end, from the hour starting at start.
func hourly(labels model.Metric, start time.Time, values ...float64) *model.SampleStream {
	s := &model.SampleStream{Metric: labels}
	for i, v := range values {
		ts := start.Add(time.Duration(i+1)*time.Hour - time.Second)
		s.Values = append(s.Values, model.SamplePair{Timestamp: model.TimeFromUnixNano(ts.UnixNano()), Value: model.SampleValue(v)})
	}
	return s
}

func TestHistoryMapsQueryResultsOntoTenantsAndClasses(t *testing.T) {
	end := time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)
	start := end.Add(-4 * time.Hour)
	seats := model.Matrix{
		hourly(model.Metric{"tenant": "team-a"}, start, 1, 2, 3, 4),
		hourly(model.Metric{"tenant": "team-read"}, start.Add(2*time.Hour), 5, 6),
		hourly(model.Metric{}, start, 9), // no tenant: not a tenant's
	}
	requests := model.Matrix{
		hourly(model.Metric{"flow_schema": "trellis-tenant-team-a.mutating"}, start, 10, 20, 30, 40),
		hourly(model.Metric{"flow_schema": "trellis-tenant-team-a.watch"}, start, 0.5, 0.5, 0.5, 0.5),
		hourly(model.Metric{"flow_schema": "trellis-tenant-team-read.read"}, start, 7, 7, 7, 7),
		// Only requests so far: its seats are empty, not missing.
		hourly(model.Metric{"flow_schema": "trellis-tenant-team-new.read"}, start.Add(3*time.Hour), 1),
		// Unsplit or foreign: no class to put them in.
		hourly(model.Metric{"flow_schema": "trellis-tenant-team-a"}, start, 99),
		hourly(model.Metric{"flow_schema": "global-default"}, start, 99),
	}
	h := historyOf(seats, requests, start, end)

	if len(h) != 3 {
		t.Fatalf("tenants %v, want team-a, team-read and team-new", keys(h))
	}
	same := func(what string, s forecast.Series, want ...float64) {
		t.Helper()
		if !s.Start.Equal(start) || s.Step != time.Hour || len(s.Values) != len(want) {
			t.Fatalf("%s: series from %s by %s of %d, want from %s hourly of %d", what, s.Start, s.Step, len(s.Values), start, len(want))
		}
		for i, v := range s.Values {
			if !(v == want[i] || math.IsNaN(v) && math.IsNaN(want[i])) {
				t.Errorf("%s: hour %d holds %v, want %v (series %v)", what, i, v, want[i], s.Values)
				return
			}
		}
	}
	nan := math.NaN()
	same("team-a seats", h["team-a"].Seats, 1, 2, 3, 4)
	same("team-a mutating", h["team-a"].Requests[Mutating], 10, 20, 30, 40)
	same("team-a watch", h["team-a"].Requests[Watch], 0.5, 0.5, 0.5, 0.5)
	if _, ok := h["team-a"].Requests[Read]; ok || len(h["team-a"].Requests) != 2 {
		t.Errorf("team-a classes %v, want mutating and watch (the unsplit schema's requests have no class)", h["team-a"].Requests)
	}
	same("team-read seats", h["team-read"].Seats, nan, nan, 5, 6)
	same("team-read read", h["team-read"].Requests[Read], 7, 7, 7, 7)
	same("team-new seats", h["team-new"].Seats, nan, nan, nan, nan)
	same("team-new read", h["team-new"].Requests[Read], nan, nan, nan, 1)
}

func TestDemandsForecastsRequestsByClass(t *testing.T) {
	now := time.Date(2026, 5, 4, 12, 30, 0, 0, time.UTC)
	end := now.Truncate(time.Hour)
	series := func(hours int, f func(i int) float64) forecast.Series {
		s := forecast.Series{Start: end.Add(-time.Duration(hours) * time.Hour), Step: time.Hour, Values: make([]float64, hours)}
		for i := range s.Values {
			s.Values[i] = f(i)
		}
		return s
	}
	// Three weeks of a steady daily cycle: forecast; two days: peak+20%.
	daily := func(base float64) func(int) float64 {
		return func(i int) float64 { return base * (1 + 0.3*math.Sin(2*math.Pi*float64(i%24)/24)) }
	}
	h := History{
		"team-a": {Seats: series(21*24, daily(2)), Requests: map[Class]forecast.Series{
			Mutating: series(21*24, daily(10)),
			Watch:    series(2*24, func(int) float64 { return 0.5 }),
		}},
		"team-new": {Seats: series(2*24, func(int) float64 { return math.NaN() })},
	}
	ds, err := Demands(h, now, forecast.Options{}, 0.2)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 2 || ds[0].Namespace != "team-a" || ds[1].Namespace != "team-new" {
		t.Fatalf("demands %+v", ds)
	}
	a := ds[0]
	if math.Abs(a.Recent-2.6) > 0.01 || a.Forecast < 2.6 || a.Forecast > 2.6*1.5 {
		t.Errorf("team-a seats %v -> %v, want 2.6 -> a little more", a.Recent, a.Forecast)
	}
	if len(a.Requests) != 2 {
		t.Fatalf("team-a requests %+v, want mutating and watch", a.Requests)
	}
	if m := a.Requests[Mutating]; math.Abs(m.Recent-13) > 0.01 || m.Forecast < 13 || m.Forecast > 13*1.5 {
		t.Errorf("team-a mutating %+v, want 13/s recently, forecast a little more (a steady cycle)", m)
	}
	if w := a.Requests[Watch]; w.Recent != 0.5 || w.Forecast != 0.6 {
		t.Errorf("team-a watch %+v, want 0.5/s, and 0.6/s on the peak rule (two days of history)", w)
	}
	if n := ds[1]; n.Recent != 0 || n.Forecast != 0 || n.Requests != nil {
		t.Errorf("team-new %+v, want nothing to plan", n)
	}
}

func keys(h History) []string {
	var out []string
	for k := range h {
		out = append(out, k)
	}
	return out
}
