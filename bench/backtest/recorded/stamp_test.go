package recorded_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/bench/backtest/recorded"
	"github.com/trellis-dev/trellis/governance/apfplan"
	"github.com/trellis-dev/trellis/internal/testutil/prom"
)

// TestIntegrationStampedSamplesReadBack: counters stamped at virtual hour
// boundaries, backfilled into a real Prometheus by promtool, come back
// through Read as exactly the increase of each hour (not counting what the
// counters held before the first boundary), summed over a
// tenant's schemas; a schema that first appears mid-recording counts from
// 0 at the boundary before, and a tenant with no schema has no series.
func TestIntegrationStampedSamplesReadBack(t *testing.T) {
	const hours = 30
	series := func(ns string, c apfplan.Class) string {
		return fmt.Sprintf("flow_schema=%q,priority_level=%q", apfplan.SchemaName(ns, c), apfplan.TenantsLevel)
	}
	// team-a: mutating 3h+1 in hour h, reads 2 an hour; team-b's reads
	// appear after hour 10, at h an hour.
	want := map[string][]float64{"team-a": make([]float64, hours), "team-b": make([]float64, hours)}
	var scrapes []recorded.Scrape
	// The counters do not start at 0: the requests before the recording
	// (the classification probes) are in them.
	mut, read, late := 7.0, 4.0, 0.0
	for b := 0; b <= hours; b++ {
		s := recorded.Scrape{At: recorded.VirtualStart.Add(time.Duration(b) * time.Hour), Series: map[string]float64{
			series("team-a", apfplan.Mutating): mut, series("team-a", apfplan.Read): read,
			// Not a tenant's schema: left out by Read.
			`flow_schema="exempt",priority_level="exempt"`: 1000 * float64(b),
		}}
		if b > 10 {
			s.Series[series("team-b", apfplan.Read)] = late
		}
		scrapes = append(scrapes, s)
		if b == hours {
			break
		}
		mut += float64(3*b + 1)
		read += 2
		want["team-a"][b] = float64(3*b+1) + 2
		if b >= 10 {
			late += float64(b)
			want["team-b"][b] = float64(b)
		}
	}
	url := prom.Start(t, prom.Backfill(t, recorded.OpenMetrics(scrapes)), "")
	got, err := recorded.Read(context.Background(), url, recorded.VirtualStart, time.Hour, hours)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("Read gave tenants %v, want team-a and team-b", got)
	}
	for ns, w := range want {
		for h := range w {
			if v := got[ns].Values[h] * time.Hour.Seconds(); math.Abs(v-w[h]) > 1e-9 {
				t.Errorf("%s hour %d: read %v requests, want %v", ns, h, v, w[h])
			}
		}
	}
}
