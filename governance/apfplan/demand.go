package apfplan

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/trellis-dev/trellis/governance/forecast"
)

// Rate is one verb class's requests per second: its recent hourly peak and
// the forecast's bound of its peak over the horizon.
type Rate struct {
	Recent   float64 `json:"recentPerSecond"`
	Forecast float64 `json:"forecastPerSecond"`
}

// Demands forecasts each tenant's seats and its request rate by class:
// a forecast is the largest step of its forecast schedule over the
// horizon; a series with too little history is planned at its peak plus
// headroom.
func Demands(h History, now time.Time, opts forecast.Options, headroom float64) ([]Demand, error) {
	var out []Demand
	for _, ns := range slices.Sorted(maps.Keys(h)) {
		th := h[ns]
		d := Demand{Namespace: ns}
		var err error
		if d.Recent, d.Forecast, err = peaks(th.Seats, now, opts, headroom); err != nil {
			return nil, fmt.Errorf("tenant %s: seats: %w", ns, err)
		}
		for _, c := range Classes {
			s, ok := th.Requests[c]
			if !ok {
				continue
			}
			recent, fc, err := peaks(s, now, opts, headroom)
			if err != nil {
				return nil, fmt.Errorf("tenant %s: %s requests: %w", ns, c, err)
			}
			if d.Requests == nil {
				d.Requests = map[Class]Rate{}
			}
			d.Requests[c] = Rate{Recent: round(recent), Forecast: round(fc)}
		}
		out = append(out, d)
	}
	return out, nil
}

// peaks is a series' peak over its last week and the largest step of its
// forecast schedule (its peak plus headroom when its history is short).
func peaks(s forecast.Series, now time.Time, opts forecast.Options, headroom float64) (recent, fc float64, err error) {
	if len(s.Values) == 0 {
		return 0, 0, nil
	}
	recent = s.Slice(max(0, len(s.Values)-7*24), len(s.Values)).Peak()
	if math.IsNaN(recent) {
		recent = 0
	}
	m, err := forecast.Fit(s, opts)
	switch {
	case err == nil:
		for _, st := range m.Schedule(now.UTC().Truncate(time.Hour)) {
			fc = math.Max(fc, st.Value)
		}
	case forecast.IsShortHistory(err):
		if p := s.Peak(); !math.IsNaN(p) {
			fc = p * (1 + headroom)
		}
	default:
		return 0, 0, err
	}
	return recent, fc, nil
}

// round keeps a rate to a thousandth of a request per second.
func round(v float64) float64 { return math.Round(v*1000) / 1000 }
