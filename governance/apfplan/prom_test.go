package apfplan_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/trellis-dev/trellis/governance/apfplan"
	"github.com/trellis-dev/trellis/governance/forecast"
	"github.com/trellis-dev/trellis/internal/testutil/prom"
)

// apfHistory is two days of the apiserver's APF series, a sample a minute,
// as a Prometheus scraping two apiservers would hold them (OpenMetrics for
// promtool). team-a has split schemas: its mutating one holds 2 seats and
// 2 queued in the first half of every hour, its read one 3 seats in the
// second half, its watch one 1 seat throughout (the peak of the sum is 5;
// the sum of the peaks would be 8); its requests run at 2/s mutating in
// the first half, 4/s in the second, 0.5/s read and 0.1/s watch, half on
// each apiserver. team-old had one unsplit schema (7 seats, 9/s) the first
// day and split ones (1 seat) the second. team-read, a namespace named
// like a class, has a watch schema of 0.5 seats.
func apfHistory(start, end time.Time) string {
	var b strings.Builder
	each := func(fn func(ts time.Time) (float64, bool), series string) {
		for ts := start; ts.Before(end); ts = ts.Add(time.Minute) {
			if v, ok := fn(ts); ok {
				fmt.Fprintf(&b, "%s %g %d\n", series, v, ts.Unix())
			}
		}
	}
	firstHalf := func(ts time.Time) bool { return ts.Minute() < 30 }
	halves := func(first, second float64) func(time.Time) (float64, bool) {
		return func(ts time.Time) (float64, bool) {
			if firstHalf(ts) {
				return first, true
			}
			return second, true
		}
	}
	firstDay := func(v float64, on bool) func(time.Time) (float64, bool) {
		return func(ts time.Time) (float64, bool) { return v, ts.Before(start.Add(24*time.Hour)) == on }
	}
	gauge := func(metric, schema string) string {
		return fmt.Sprintf(`%s{flow_schema=%q,priority_level="trellis-tenants",instance="a"}`, metric, schema)
	}
	b.WriteString("# TYPE apiserver_flowcontrol_current_executing_seats gauge\n")
	exec := "apiserver_flowcontrol_current_executing_seats"
	each(halves(2, 0), gauge(exec, "trellis-tenant-team-a.mutating"))
	each(halves(0, 3), gauge(exec, "trellis-tenant-team-a.read"))
	each(halves(1, 1), gauge(exec, "trellis-tenant-team-a.watch"))
	each(firstDay(7, true), gauge(exec, "trellis-tenant-team-old"))
	each(firstDay(1, false), gauge(exec, "trellis-tenant-team-old.mutating"))
	each(halves(0.5, 0.5), gauge(exec, "trellis-tenant-team-read.watch"))
	b.WriteString("# TYPE apiserver_flowcontrol_current_inqueue_requests gauge\n")
	each(halves(2, 0), gauge("apiserver_flowcontrol_current_inqueue_requests", "trellis-tenant-team-a.mutating"))
	b.WriteString("# TYPE apiserver_flowcontrol_dispatched_requests counter\n")
	// A counter at rate(ts) per second, summed over the minutes so far.
	counter := func(rate func(ts time.Time) float64) func(time.Time) (float64, bool) {
		var n float64
		return func(ts time.Time) (float64, bool) {
			n += 60 * rate(ts)
			return n, true
		}
	}
	for _, instance := range []string{"a", "b"} {
		c := func(schema string) string {
			return fmt.Sprintf(`apiserver_flowcontrol_dispatched_requests_total{flow_schema=%q,priority_level="trellis-tenants",instance=%q}`, schema, instance)
		}
		each(counter(func(ts time.Time) float64 {
			if firstHalf(ts) {
				return 1
			}
			return 2
		}), c("trellis-tenant-team-a.mutating"))
		each(counter(func(time.Time) float64 { return 0.25 }), c("trellis-tenant-team-a.read"))
		each(counter(func(time.Time) float64 { return 0.05 }), c("trellis-tenant-team-a.watch"))
		each(counter(func(time.Time) float64 { return 4.5 }), c("trellis-tenant-team-old"))
	}
	b.WriteString("# EOF\n")
	return b.String()
}

// TestIntegrationHistoryFromPrometheus reads the tenants' seats and their
// request rates by class from a real Prometheus (backfilled by promtool):
// the seats are the hourly peak of the sum over a tenant's schemas, old
// and split; the rates the hourly peak per class, over both apiservers.
func TestIntegrationHistoryFromPrometheus(t *testing.T) {
	now := time.Now().UTC()
	end := now.Truncate(time.Hour)
	start := end.Add(-48 * time.Hour)
	url := prom.Start(t, prom.Backfill(t, apfHistory(start, end)), "")

	h, err := apfplan.HistoryFromPrometheus(context.Background(), url, 48*time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 3 {
		t.Fatalf("tenants %v, want team-a, team-old and team-read", h)
	}
	// Every hour but the first (the rates' 5-minute window) and, for
	// team-old, the one after its unsplit schema's last sample (which stays
	// current for Prometheus's 5-minute lookback).
	check := func(what string, s forecast.Series, want func(hour int) float64) {
		t.Helper()
		if len(s.Values) != 48 || !s.Start.Equal(start) {
			t.Fatalf("%s: %d hours from %s, want 48 from %s", what, len(s.Values), s.Start, start)
		}
		for i := 1; i < 48; i++ {
			if w := want(i); !math.IsNaN(w) && math.Abs(s.Values[i]-w) > 1e-6 {
				t.Fatalf("%s: hour %d (%s) reads %v, want %v; all %v", what, i, s.Time(i), s.Values[i], w, s.Values)
			}
		}
	}
	is := func(v float64) func(int) float64 { return func(int) float64 { return v } }
	check("team-a seats", h["team-a"].Seats, is(5))
	check("team-a mutating", h["team-a"].Requests[apfplan.Mutating], is(4))
	check("team-a read", h["team-a"].Requests[apfplan.Read], is(0.5))
	check("team-a watch", h["team-a"].Requests[apfplan.Watch], is(0.1))
	check("team-old seats", h["team-old"].Seats, func(i int) float64 {
		switch {
		case i < 24:
			return 7
		case i == 24:
			return math.NaN()
		}
		return 1
	})
	if r := h["team-old"].Requests; len(r) != 0 {
		t.Errorf("team-old's requests by class %v, want none (its unsplit schema's requests have no class)", r)
	}
	check("team-read seats", h["team-read"].Seats, is(0.5))

	ds, err := apfplan.Demands(h, now, forecast.Options{}, 0.2)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("demands from two days of history (the peak rule): %+v", ds)
	a := ds[0]
	if a.Namespace != "team-a" || a.Recent != 5 || math.Abs(a.Forecast-6) > 1e-9 {
		t.Errorf("team-a %+v, want 5 seats, forecast 6 (peak plus 20%%)", a)
	}
	want := map[apfplan.Class]apfplan.Rate{apfplan.Mutating: {Recent: 4, Forecast: 4.8}, apfplan.Read: {Recent: 0.5, Forecast: 0.6}, apfplan.Watch: {Recent: 0.1, Forecast: 0.12}}
	for c, w := range want {
		if a.Requests[c] != w {
			t.Errorf("team-a %s requests %+v, want %+v", c, a.Requests[c], w)
		}
	}
}
