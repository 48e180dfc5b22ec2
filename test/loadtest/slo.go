package loadtest

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/rest"

	"github.com/trellis-dev/trellis/internal/controlplane"
)

// The Kubernetes API call latency SLO: for mutating calls on single
// objects, the 99th percentile per (resource, subresource, verb) is at
// most 1 s. Its SLI is the apiserver's
// apiserver_request_sli_duration_seconds, which leaves out the time a
// request waits in an API Priority and Fairness queue and in webhooks: a
// request that is held back on purpose is not a slow apiserver.
const (
	SLO       = time.Second
	sliMetric = "apiserver_request_sli_duration_seconds"
)

// metricVerbs maps the apiserver's metric verbs of mutating calls to
// Kubernetes verbs.
var metricVerbs = map[string]string{"POST": "create", "PUT": "update", "PATCH": "patch", "APPLY": "patch", "DELETE": "delete"}

// MutatingVerbs are the verbs the SLO covers.
var MutatingVerbs = map[string]bool{"create": true, "update": true, "patch": true, "delete": true}

// SLISnapshot is the apiserver's SLI histogram at one moment, per
// "verb resource[/subresource]" of mutating calls.
type SLISnapshot map[string]*histogram

type histogram struct {
	count   uint64
	bounds  []float64
	buckets []uint64 // cumulative
}

// ScrapeSLI reads the apiserver's /metrics.
func ScrapeSLI(ctx context.Context, cfg *rest.Config) (SLISnapshot, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("apiserver metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("apiserver metrics: %s", resp.Status)
	}
	return parseSLI(resp.Body)
}

func parseSLI(r io.Reader) (SLISnapshot, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("apiserver metrics: %w", err)
	}
	out := SLISnapshot{}
	fam := fams[sliMetric]
	if fam == nil {
		return out, nil
	}
	for _, m := range fam.GetMetric() {
		l := labelsOf(m)
		verb, ok := metricVerbs[l["verb"]]
		if !ok || l["resource"] == "" {
			continue
		}
		key := verb + " " + l["resource"]
		if l["subresource"] != "" {
			key += "/" + l["subresource"]
		}
		h := out[key]
		hist := m.GetHistogram()
		if h == nil {
			h = &histogram{}
			for _, b := range hist.GetBucket() {
				h.bounds = append(h.bounds, b.GetUpperBound())
			}
			h.buckets = make([]uint64, len(h.bounds))
			out[key] = h
		}
		// Several series (scope, component, group, version) can share a
		// key: their buckets are the same and add up.
		h.count += hist.GetSampleCount()
		for i, b := range hist.GetBucket() {
			if i < len(h.buckets) {
				h.buckets[i] += b.GetCumulativeCount()
			}
		}
	}
	return out, nil
}

func labelsOf(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, lp := range m.GetLabel() {
		out[lp.GetName()] = lp.GetValue()
	}
	return out
}

// SLIWindow is the SLI between two snapshots, per verb and resource.
type SLIWindow []SLIEntry

// SLIEntry is one verb and resource's calls in a window and their 99th
// percentile: the upper bound of the histogram bucket it falls in (the
// apiserver's buckets are 50 ms to 60 s, 1 s being one of them).
type SLIEntry struct {
	Key   string
	Count uint64
	P99   time.Duration
}

// Window is what happened between before and after, worst p99 first.
func Window(before, after SLISnapshot) SLIWindow {
	var out SLIWindow
	for k, a := range after {
		b := before[k]
		count := a.count
		cum := append([]uint64(nil), a.buckets...)
		if b != nil {
			count -= b.count
			for i := range cum {
				if i < len(b.buckets) {
					cum[i] -= b.buckets[i]
				}
			}
		}
		if count == 0 {
			continue
		}
		rank := uint64(math.Ceil(0.99 * float64(count)))
		p99 := time.Duration(math.MaxInt64)
		for i, c := range cum {
			if c >= rank {
				p99 = time.Duration(a.bounds[i] * float64(time.Second))
				break
			}
		}
		out = append(out, SLIEntry{Key: k, Count: count, P99: p99})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].P99 != out[j].P99 {
			return out[i].P99 > out[j].P99
		}
		return out[i].Count > out[j].Count
	})
	return out
}

// Met reports whether every verb and resource with at least min calls
// kept its p99 within the SLO.
func (w SLIWindow) Met(min uint64) bool {
	for _, e := range w {
		if e.Count >= min && e.P99 > SLO {
			return false
		}
	}
	return true
}

// Print prints the n worst entries with at least min calls.
func (w SLIWindow) Print(out io.Writer, n int, min uint64) {
	shown := 0
	for _, e := range w {
		if e.Count < min {
			continue
		}
		p := "> 60s"
		if e.P99 != time.Duration(math.MaxInt64) {
			p = "<= " + e.P99.String()
		}
		fmt.Fprintf(out, "    %-40s %6d calls  p99 %s\n", e.Key, e.Count, p)
		if shown++; shown == n {
			break
		}
	}
}

// LatencyGroup is the latency, as a client sees it (queueing included),
// of one client's calls of one verb on one resource, from the audit log.
type LatencyGroup struct {
	Key           string
	Count         int
	P50, P99, Max time.Duration
}

// MutatingByClient groups the mutating calls of evs by client, verb and
// resource, worst p99 first.
func MutatingByClient(evs []controlplane.AuditEvent) []LatencyGroup {
	by := map[string][]time.Duration{}
	for _, e := range evs {
		if !MutatingVerbs[e.Verb] || e.Completed.IsZero() {
			continue
		}
		k := fmt.Sprintf("%-24s %-6s %s", ClientName(e.UserAgent), e.Verb, e.Resource())
		by[k] = append(by[k], e.Completed.Sub(e.Received))
	}
	out := make([]LatencyGroup, 0, len(by))
	for k, d := range by {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		out = append(out, LatencyGroup{Key: k, Count: len(d), P50: Percentile(d, 0.5), P99: Percentile(d, 0.99), Max: d[len(d)-1]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].P99 > out[j].P99 })
	return out
}

// Percentile of sorted durations.
func Percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d[min(len(d)-1, int(float64(len(d))*p))]
}

// ClientName shortens a user agent to its program name and, for
// kube-controller-manager's per-controller credentials, the controller.
func ClientName(ua string) string {
	name, _, _ := strings.Cut(ua, "/")
	if strings.Contains(ua, "system:serviceaccount:") {
		return name + ":" + ua[strings.LastIndex(ua, ":")+1:]
	}
	return name
}

// PrintGroups prints the n slowest groups with at least min calls.
func PrintGroups(out io.Writer, g []LatencyGroup, n, min int) {
	shown := 0
	for _, e := range g {
		if e.Count < min {
			continue
		}
		fmt.Fprintf(out, "    %-60s %6d calls  p50 %-8s p99 %-8s max %s\n", e.Key, e.Count,
			e.P50.Round(time.Millisecond), e.P99.Round(time.Millisecond), e.Max.Round(time.Millisecond))
		if shown++; shown == n {
			break
		}
	}
}
