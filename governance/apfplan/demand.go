package apfplan

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/trellis-dev/trellis/governance/forecast"
)

// SeatsQuery is each tenant's seats at one instant: those its requests
// hold and those waiting in its queues, by flow schema.
const SeatsQuery = `sum by (flow_schema) ({__name__=~"apiserver_flowcontrol_current_executing_seats|apiserver_flowcontrol_current_inqueue_requests", flow_schema=~"` + Prefix + `.+"})`

// History is each tenant namespace's hourly peak of seats.
type History map[string]forecast.Series

// HistoryFromPrometheus reads the window before now: the hourly peak of
// SeatsQuery (at one-minute resolution), by tenant.
func HistoryFromPrometheus(ctx context.Context, url string, window time.Duration, now time.Time) (History, error) {
	c, err := api.NewClient(api.Config{Address: url})
	if err != nil {
		return nil, fmt.Errorf("prometheus %s: %w", url, err)
	}
	end := now.UTC().Truncate(time.Hour)
	start := end.Add(-window)
	q := fmt.Sprintf("max_over_time((%s)[1h:1m])", SeatsQuery)
	// A second before each hour's end, the subquery's points are the hour's.
	v, _, err := promv1.NewAPI(c).QueryRange(ctx, q, promv1.Range{Start: start.Add(time.Hour - time.Second), End: end.Add(-time.Second), Step: time.Hour})
	if err != nil {
		return nil, fmt.Errorf("prometheus %s: tenant seats: %w", url, err)
	}
	m, ok := v.(model.Matrix)
	if !ok {
		return nil, fmt.Errorf("prometheus %s: tenant seats: got %s, want a matrix", url, v.Type())
	}
	h := History{}
	for _, s := range m {
		ns := strings.TrimPrefix(string(s.Metric["flow_schema"]), Prefix)
		pts := make([]forecast.Point, 0, len(s.Values))
		for _, p := range s.Values {
			pts = append(pts, forecast.Point{Time: p.Timestamp.Time().Add(time.Second - time.Hour), Value: float64(p.Value)})
		}
		h[ns] = forecast.Resample(pts, start, end, time.Hour)
	}
	return h, nil
}

// Demands forecasts each tenant's seats: Forecast is the largest step of
// its forecast schedule over the horizon; a tenant with too little
// history is planned at its peak plus headroom.
func Demands(h History, now time.Time, opts forecast.Options, headroom float64) ([]Demand, error) {
	var out []Demand
	for _, ns := range slices.Sorted(maps.Keys(h)) {
		s := h[ns]
		d := Demand{Namespace: ns, Recent: recentPeak(s)}
		m, err := forecast.Fit(s, opts)
		switch {
		case err == nil:
			for _, st := range m.Schedule(now.UTC().Truncate(time.Hour)) {
				d.Forecast = math.Max(d.Forecast, st.Value)
			}
		case forecast.IsShortHistory(err):
			if p := s.Peak(); !math.IsNaN(p) {
				d.Forecast = p * (1 + headroom)
			}
		default:
			return nil, fmt.Errorf("tenant %s: %w", ns, err)
		}
		out = append(out, d)
	}
	return out, nil
}

func recentPeak(s forecast.Series) float64 {
	p := s.Slice(max(0, len(s.Values)-7*24), len(s.Values)).Peak()
	if math.IsNaN(p) {
		return 0
	}
	return p
}
