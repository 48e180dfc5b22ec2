package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/trellis-dev/trellis/internal/controlplane"
)

// report is the audit log of the run, aggregated.
type report struct {
	start, end time.Time
	total      int
	// byClient counts requests by user agent (its product token) and verb.
	byClient map[string]map[string]int
	// perSecond counts requests by second of the run; mutating latencies
	// are kept by second too, for the plot's p99 line.
	perSecond []int
	mutLat    [][]time.Duration
	mutating  []time.Duration
}

var mutatingVerbs = map[string]bool{"create": true, "update": true, "patch": true, "delete": true, "deletecollection": true}

// client names a user agent by its product token ("kube-scheduler/v1.36.3
// (linux/amd64) ..." -> "kube-scheduler"); controller-manager controllers
// keep their service account's name.
func clientName(ua string) string {
	product, _, _ := strings.Cut(ua, " ")
	product, _, _ = strings.Cut(product, "/")
	if product == "kube-controller-manager" {
		// With --use-service-account-credentials the agent ends in the
		// controller's name.
		return product + "/" + strings.TrimPrefix(ua[strings.LastIndex(ua, "/")+1:], "system:serviceaccount:kube-system:")
	}
	return product
}

func (r *report) fromAudit(cp *controlplane.ControlPlane, from, to time.Time) error {
	events, err := cp.ReadAudit("", from, to)
	if err != nil {
		return err
	}
	r.start, r.end, r.total = from, to, len(events)
	secs := int(to.Sub(from).Seconds()) + 1
	r.perSecond = make([]int, secs)
	r.mutLat = make([][]time.Duration, secs)
	r.byClient = map[string]map[string]int{}
	for _, e := range events {
		c := clientName(e.UserAgent)
		if r.byClient[c] == nil {
			r.byClient[c] = map[string]int{}
		}
		r.byClient[c][e.Verb]++
		s := int(e.Received.Sub(from).Seconds())
		if s < 0 || s >= secs {
			continue
		}
		r.perSecond[s]++
		if mutatingVerbs[e.Verb] && !e.Completed.IsZero() {
			lat := e.Completed.Sub(e.Received)
			r.mutating = append(r.mutating, lat)
			r.mutLat[s] = append(r.mutLat[s], lat)
		}
	}
	return nil
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

func (r *report) print(w io.Writer, run time.Duration) {
	secs := run.Seconds()
	peak := 0
	for _, n := range r.perSecond {
		peak = max(peak, n)
	}
	fmt.Fprintf(w, "apiserver: %d requests in %s: %.0f/s on average, %d/s at peak\n", r.total, run.Round(time.Second), float64(r.total)/secs, peak)
	fmt.Fprintf(w, "mutating calls: %d, latency p50 %s, p99 %s, max %s (SLO: p99 <= 1s)\n", len(r.mutating),
		percentile(r.mutating, 0.50).Round(time.Millisecond), percentile(r.mutating, 0.99).Round(time.Millisecond), percentile(r.mutating, 1).Round(time.Millisecond))
	type row struct {
		client string
		n      int
		verbs  map[string]int
	}
	var rows []row
	for c, verbs := range r.byClient {
		n := 0
		for _, v := range verbs {
			n += v
		}
		rows = append(rows, row{c, n, verbs})
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].n > rows[j].n })
	fmt.Fprintf(w, "%-52s %9s %8s  by verb\n", "client (user agent)", "requests", "QPS")
	for _, rw := range rows {
		verbs := make([]string, 0, len(rw.verbs))
		for v := range rw.verbs {
			verbs = append(verbs, v)
		}
		sort.Slice(verbs, func(i, j int) bool { return rw.verbs[verbs[i]] > rw.verbs[verbs[j]] })
		var parts []string
		for _, v := range verbs {
			parts = append(parts, fmt.Sprintf("%s %d", v, rw.verbs[v]))
		}
		fmt.Fprintf(w, "%-52s %9d %8.1f  %s\n", rw.client, rw.n, float64(rw.n)/secs, strings.Join(parts, ", "))
	}
}
