package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/trellis-dev/trellis/gateway/api"
	"github.com/trellis-dev/trellis/governance/forecast"
	"github.com/trellis-dev/trellis/governance/forecast/report"
	"github.com/trellis-dev/trellis/governance/quota"
)

// HistorySource gives each namespace's hourly usage peaks, as trellis
// quota report reads them: the local sample store or Prometheus.
type HistorySource interface {
	History(ctx context.Context, now time.Time) (quota.History, error)
}

// StoreHistory reads the sample store trellis quota sample appends to.
type StoreHistory struct {
	Path   string
	Window time.Duration // default 28 days
}

// History implements HistorySource.
func (s StoreHistory) History(_ context.Context, now time.Time) (quota.History, error) {
	w := s.Window
	if w == 0 {
		w = 28 * 24 * time.Hour
	}
	smp, err := (quota.Store{Path: s.Path, Retention: w}).Load(now)
	if err != nil {
		return nil, fmt.Errorf("failed to read the sample store %s: %w", s.Path, err)
	}
	return quota.HistoryFromSamples(smp, now.Add(-w).Truncate(time.Hour), now.Truncate(time.Hour)), nil
}

// PrometheusHistory reads kube-state-metrics' history from Prometheus.
type PrometheusHistory struct {
	URL    string
	Window time.Duration // default 28 days
}

// History implements HistorySource.
func (p PrometheusHistory) History(ctx context.Context, now time.Time) (quota.History, error) {
	w := p.Window
	if w == 0 {
		w = 28 * 24 * time.Hour
	}
	return quota.HistoryFromPrometheus(ctx, p.URL, w, now)
}

// capacityRow is one resource of one quota.
type capacityRow struct {
	Quota, Resource, Hard, Used string
	Percent                     int
	// Crosses is when the forecast reaches the quota; Lead the time left.
	Crosses string
	Lead    string
	Note    string
	Plot    string // the plot's URL, when there is a history
}

// quotasOf returns the namespace's quotas through the gateway's API (so
// its SubjectAccessReview decides who sees them), or the page to render.
func (c *Console) quotasOf(r *http.Request, s *Session, ns string) (api.QuotaList, *page, int) {
	l := api.QuotaList{}
	code, apiErr, err := c.call(r, s, http.MethodGet, "/v1/namespaces/"+url.PathEscape(ns)+"/quotas", nil, &l)
	switch {
	case err != nil:
		return l, &page{Session: s, Title: "Capacity", Nav: "capacity", Namespace: ns, Message: err.Error()}, http.StatusBadGateway
	case apiErr != nil:
		return l, &page{Session: s, Title: apiErr.Reason, Nav: "capacity", Namespace: ns, Message: apiErr.Message}, code
	}
	return l, nil, http.StatusOK
}

func (c *Console) capacity(w http.ResponseWriter, r *http.Request, s *Session) {
	ns, ok := c.namespace(r)
	p := page{Session: s, Title: "Capacity", Nav: "capacity", Namespace: ns}
	if !ok {
		p.Message = "namespace " + ns + " is not a valid name"
		c.render(w, http.StatusBadRequest, "error", p)
		return
	}
	l, refused, code := c.quotasOf(r, s, ns)
	if refused != nil {
		c.render(w, code, "error", *refused)
		return
	}
	now := c.cfg.Clock.Now()
	var h quota.History
	if c.cfg.Capacity != nil {
		var err error
		if h, err = c.cfg.Capacity.History(r.Context(), now); err != nil {
			p.Message = err.Error()
		}
	} else {
		p.Message = "no usage history is configured (--capacity-store or --prometheus): quotas and usage only"
	}
	var rows []capacityRow
	for _, q := range l.Items {
		for _, res := range sortedKeys(q.Hard) {
			row := capacityRow{Quota: q.Name, Resource: res, Hard: q.Hard[res], Used: q.Used[res]}
			row.Percent = percent(row.Used, row.Hard)
			if series, ok := h[ns][corev1.ResourceName(res)]; ok {
				rep := c.report(ns, res, now, series, q)
				row.Plot = c.cfg.BasePath + "/capacity/plot.svg?" + url.Values{"namespace": {ns}, "resource": {res}}.Encode()
				row.Note = rep.Note
				if rep.Crosses != nil {
					row.Crosses = rep.Crosses.Format(time.DateOnly)
					row.Lead = fmt.Sprintf("%.1f days", rep.Crosses.Sub(now).Hours()/24)
				} else if rep.Note == "" {
					row.Lead = "not within the forecast horizon"
				}
			}
			rows = append(rows, row)
		}
	}
	p.Data = rows
	c.render(w, http.StatusOK, "capacity", p)
}

// plot draws one resource's report as SVG, for whoever may see the quota.
func (c *Console) plot(w http.ResponseWriter, r *http.Request, s *Session) {
	ns, ok := c.namespace(r)
	res := r.FormValue("resource")
	if !ok || c.cfg.Capacity == nil {
		http.Error(w, "no such plot", http.StatusNotFound)
		return
	}
	l, refused, code := c.quotasOf(r, s, ns)
	if refused != nil {
		http.Error(w, refused.Message, code)
		return
	}
	now := c.cfg.Clock.Now()
	h, err := c.cfg.Capacity.History(r.Context(), now)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	series, ok := h[ns][corev1.ResourceName(res)]
	if !ok {
		http.Error(w, "no history of "+res+" in "+ns, http.StatusNotFound)
		return
	}
	var q api.Quota
	for _, it := range l.Items {
		if _, ok := it.Hard[res]; ok {
			q = it
		}
	}
	w.Header().Set("Content-Type", "image/svg+xml")
	_ = c.report(ns, res, now, series, q).WriteSVG(w)
}

// report is the forecast of one resource against its quota: the plan's
// schedule when the quota has one, else its hard limit throughout.
func (c *Console) report(ns, res string, now time.Time, series forecast.Series, q api.Quota) report.Report {
	var steps []forecast.Step
	var sched []quota.Step
	if q.Schedule != "" && json.Unmarshal([]byte(q.Schedule), &sched) == nil {
		for _, st := range sched {
			if v, ok := st.Hard[corev1.ResourceName(res)]; ok {
				steps = append(steps, forecast.Step{From: st.From, Value: v.AsApproximateFloat64()})
			}
		}
	}
	if hard, err := resource.ParseQuantity(q.Hard[res]); len(steps) == 0 && err == nil {
		steps = []forecast.Step{{From: series.Start, Value: hard.AsApproximateFloat64()}}
	}
	m, err := forecast.Fit(series, forecast.Options{Horizon: c.cfg.Horizon})
	rep := report.New(ns, res, now, series, m, steps)
	if err != nil {
		rep.Note = "no forecast: " + err.Error()
	}
	return rep
}

func percent(used, hard string) int {
	u, err1 := resource.ParseQuantity(used)
	h, err2 := resource.ParseQuantity(hard)
	if err1 != nil || err2 != nil || h.IsZero() {
		return 0
	}
	return int(100 * u.AsApproximateFloat64() / h.AsApproximateFloat64())
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
