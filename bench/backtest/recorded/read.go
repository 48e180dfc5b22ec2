package recorded

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/trellis-dev/trellis/governance/apfplan"
	"github.com/trellis-dev/trellis/governance/forecast"
)

// Dispatched is the apiserver's counter of the requests APF dispatched,
// by flow schema: the tenants' request rates are read from it.
const Dispatched = "apiserver_flowcontrol_dispatched_requests_total"

// Read returns each tenant's request rate (requests per second of the
// samples' timeline, all verb classes) in every virtual hour of a recording that began
// at start, as hourly series from VirtualStart. It reads the counter's raw
// samples from Prometheus, takes its value at each hour's boundaries by
// linear interpolation between the samples around them, and sums the
// tenant's schemas. An hour not covered by samples is NaN.
func Read(ctx context.Context, url string, start time.Time, hour time.Duration, hours int) (map[string]forecast.Series, error) {
	c, err := api.NewClient(api.Config{Address: url})
	if err != nil {
		return nil, fmt.Errorf("prometheus %s: %w", url, err)
	}
	end := start.Add(time.Duration(hours) * hour)
	// Evaluated an hour after the end (the last hour's late scrapes), from
	// a minute before the start, so that every counter's value at the
	// first boundary is known, whatever an hour lasts.
	window := end.Sub(start) + hour + time.Minute
	q := fmt.Sprintf(`%s{flow_schema=~"%s.+"}[%dms]`, Dispatched, apfplan.Prefix, window.Milliseconds())
	v, _, err := promv1.NewAPI(c).Query(ctx, q, end.Add(hour))
	if err != nil {
		return nil, fmt.Errorf("prometheus %s: %s: %w", url, q, err)
	}
	m, ok := v.(model.Matrix)
	if !ok {
		return nil, fmt.Errorf("prometheus %s: %s: got %s, want a matrix", url, q, v.Type())
	}
	out := map[string]forecast.Series{}
	for _, s := range m {
		ns, _, ok := apfplan.ParseSchema(string(s.Metric["flow_schema"]))
		if !ok {
			continue
		}
		counts := hourly(s.Values, start, hour, hours)
		sum, ok := out[ns]
		if !ok {
			sum = forecast.Series{Start: VirtualStart, Step: time.Hour, Values: make([]float64, hours)}
			out[ns] = sum
		}
		for h, n := range counts {
			sum.Values[h] += n / hour.Seconds()
		}
	}
	return out, nil
}

// hourly is a counter's increase in each hour [start+h·hour,
// start+(h+1)·hour), from its value interpolated at the boundaries;
// samples come in time order, as Prometheus returns them. A
// counter that appears during the recording was 0 one scrape before its
// first sample; a decrease is a restart (counted from 0).
func hourly(samples []model.SamplePair, start time.Time, hour time.Duration, hours int) []float64 {
	type pt struct {
		t time.Time
		v float64
	}
	pts := make([]pt, 0, len(samples)+1)
	if len(samples) > 1 {
		gap := samples[1].Timestamp.Time().Sub(samples[0].Timestamp.Time())
		pts = append(pts, pt{samples[0].Timestamp.Time().Add(-gap), 0})
	}
	var offset, prev float64
	for _, s := range samples {
		v := float64(s.Value)
		if v < prev {
			offset += prev
		}
		prev = v
		pts = append(pts, pt{s.Timestamp.Time(), v + offset})
	}
	at := func(t time.Time) float64 {
		i := sort.Search(len(pts), func(i int) bool { return !pts[i].t.Before(t) })
		switch {
		case len(pts) == 0 || i == len(pts):
			return math.NaN()
		case i == 0:
			if pts[0].t.Equal(t) {
				return pts[0].v
			}
			return 0 // before the counter existed
		}
		a, b := pts[i-1], pts[i]
		f := float64(t.Sub(a.t)) / float64(b.t.Sub(a.t))
		return a.v + f*(b.v-a.v)
	}
	out := make([]float64, hours)
	for h := range out {
		out[h] = at(start.Add(time.Duration(h+1)*hour)) - at(start.Add(time.Duration(h)*hour))
	}
	return out
}
