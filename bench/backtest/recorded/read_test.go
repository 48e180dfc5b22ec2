package recorded

import (
	"math"
	"testing"
	"time"

	"github.com/prometheus/common/model"
)

func samples(start time.Time, every time.Duration, values ...float64) []model.SamplePair {
	out := make([]model.SamplePair, len(values))
	for i, v := range values {
		out[i] = model.SamplePair{Timestamp: model.TimeFromUnixNano(start.Add(time.Duration(i) * every).UnixNano()), Value: model.SampleValue(v)}
	}
	return out
}

func TestHourlyInterpolatesAtTheBoundaries(t *testing.T) {
	start := time.Unix(1000, 0)
	for _, tc := range []struct {
		name    string
		samples []model.SamplePair
		want    []float64
	}{
		{"a steady counter, samples off the boundaries",
			// 10 a second, sampled every 250 ms from 125 ms before the start.
			samples(start.Add(-125*time.Millisecond), 250*time.Millisecond, 0, 2.5, 5, 7.5, 10, 12.5, 15, 17.5, 20, 22.5, 25, 27.5, 30, 32.5),
			[]float64{10, 10, 10}},
		{"a counter that appears in the second hour was 0 a scrape before",
			samples(start.Add(1250*time.Millisecond), 250*time.Millisecond, 2, 4, 6, 8, 10, 12, 14, 16),
			[]float64{0, 8, 8}},
		{"a restart counts on from 0",
			samples(start, 500*time.Millisecond, 0, 5, 10, 2, 7, 12, 17),
			[]float64{10, 7, 10}},
		{"an hour after the last sample is unknown",
			samples(start, 500*time.Millisecond, 0, 5, 10, 15, 20),
			[]float64{10, 10, math.NaN()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := hourly(tc.samples, start, time.Second, 3)
			for h := range tc.want {
				if math.IsNaN(tc.want[h]) != math.IsNaN(got[h]) || math.Abs(got[h]-tc.want[h]) > 1e-9 {
					t.Fatalf("hourly = %v, want %v", got, tc.want)
				}
			}
		})
	}
}
