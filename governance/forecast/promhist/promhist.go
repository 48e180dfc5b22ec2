// Package promhist reads a PromQL query's hourly peaks from Prometheus as
// forecast series: the history the quota and API capacity planners fit.
package promhist

import (
	"context"
	"fmt"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/trellis-dev/trellis/governance/forecast"
)

// Query returns the hourly peaks of query over [start, end), start and end
// on the hour: a range query of max_over_time((query)[1h:res]) at a
// one-hour step, evaluated a second before each hour's end, so that each
// point's subquery holds exactly its hour's samples, [h, h+1h).
func Query(ctx context.Context, api promv1.API, query string, res time.Duration, start, end time.Time) (model.Matrix, error) {
	q := fmt.Sprintf("max_over_time((%s)[1h:%s])", query, model.Duration(res))
	v, _, err := api.QueryRange(ctx, q, promv1.Range{Start: start.Add(time.Hour - time.Second), End: end.Add(-time.Second), Step: time.Hour})
	if err != nil {
		return nil, fmt.Errorf("failed to query the hourly peaks of %s: %w", query, err)
	}
	m, ok := v.(model.Matrix)
	if !ok {
		return nil, fmt.Errorf("got %s, want a matrix", v.Type())
	}
	return m, nil
}

// Series is one stream of Query's answer as the hourly series over
// [start, end) it stands for: each point at the start of its hour, an hour
// without one NaN.
func Series(s *model.SampleStream, start, end time.Time) forecast.Series {
	pts := make([]forecast.Point, 0, len(s.Values))
	for _, p := range s.Values {
		pts = append(pts, forecast.Point{Time: p.Timestamp.Time().Add(time.Second - time.Hour), Value: float64(p.Value)})
	}
	return forecast.Resample(pts, start, end, time.Hour)
}
