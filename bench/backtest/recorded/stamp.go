package recorded

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/rest"

	"github.com/trellis-dev/trellis/governance/apfplan"
)

// Scrape is the tenants' dispatched-requests counters as the apiserver
// exposed them, stamped with the time they stand for (a virtual hour's
// end), not the time they were read: a stamped recording's samples say
// exactly which hour each request fell in, however slow the machine was.
type Scrape struct {
	At time.Time
	// Series are the counters' values by their labels, rendered as
	// OpenMetrics writes them (`flow_schema="…",priority_level="…"`).
	Series map[string]float64
}

// ReadCounters reads the apiserver's /metrics through c (an admin's REST
// client: its requests are exempt from APF and counted in no tenant's
// schema) and returns the tenants' dispatched-requests counters, those of
// the flow schemas apfplan names, stamped at.
func ReadCounters(ctx context.Context, c rest.Interface, at time.Time) (Scrape, error) {
	b, err := c.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return Scrape{}, fmt.Errorf("failed to read the apiserver's /metrics: %w", err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		return Scrape{}, fmt.Errorf("failed to parse the apiserver's /metrics: %w", err)
	}
	out := Scrape{At: at, Series: map[string]float64{}}
	for _, m := range fams[Dispatched].GetMetric() {
		var labels []string
		schema := ""
		for _, l := range m.GetLabel() {
			labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			if l.GetName() == "flow_schema" {
				schema = l.GetValue()
			}
		}
		if !strings.HasPrefix(schema, apfplan.Prefix) {
			continue
		}
		sort.Strings(labels)
		out.Series[strings.Join(labels, ",")] = m.GetCounter().GetValue()
	}
	return out, nil
}

// OpenMetrics renders scrapes as the OpenMetrics text promtool backfills
// (`promtool tsdb create-blocks-from openmetrics`): the Dispatched counter,
// each series' samples together and in time order. A series appears from
// the first scrape that has it, as a Prometheus scraping would have seen
// it.
func OpenMetrics(scrapes []Scrape) string {
	sort.SliceStable(scrapes, func(i, j int) bool { return scrapes[i].At.Before(scrapes[j].At) })
	seen := map[string]bool{}
	var keys []string
	for _, s := range scrapes {
		for k := range s.Series {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	w := &strings.Builder{}
	fmt.Fprintf(w, "# TYPE %s counter\n", strings.TrimSuffix(Dispatched, "_total"))
	for _, k := range keys {
		for _, s := range scrapes {
			if v, ok := s.Series[k]; ok {
				fmt.Fprintf(w, "%s{%s} %s %d.%03d\n", Dispatched, k, strconv.FormatFloat(v, 'f', -1, 64), s.At.Unix(), s.At.Nanosecond()/1e6)
			}
		}
	}
	fmt.Fprintln(w, "# EOF")
	return w.String()
}
