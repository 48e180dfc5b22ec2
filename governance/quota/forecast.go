package quota

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/trellis-dev/trellis/governance/forecast"
	"github.com/trellis-dev/trellis/governance/forecast/promhist"
)

// History is each namespace's hourly usage peak of each planned resource.
type History map[string]map[corev1.ResourceName]forecast.Series

// HistoryFromSamples resamples the local store's samples into hourly peaks
// over [from, to).
func HistoryFromSamples(samples []Sample, from, to time.Time) History {
	pts := map[string]map[corev1.ResourceName][]forecast.Point{}
	for _, s := range samples {
		if pts[s.Namespace] == nil {
			pts[s.Namespace] = map[corev1.ResourceName][]forecast.Point{}
		}
		for r, q := range s.Usage {
			pts[s.Namespace][r] = append(pts[s.Namespace][r], forecast.Point{Time: s.Time, Value: q.AsApproximateFloat64()})
		}
	}
	h := History{}
	for ns, byRes := range pts {
		h[ns] = map[corev1.ResourceName]forecast.Series{}
		for r, p := range byRes {
			h[ns][r] = forecast.Resample(p, from, to, time.Hour)
		}
	}
	return h
}

// HistoryFromPrometheus reads each namespace's hourly peak of every planned
// resource over the window before now (range queries of the hourly
// max_over_time of PromQueries at 5-minute resolution, promhist).
func HistoryFromPrometheus(ctx context.Context, url string, window time.Duration, now time.Time) (History, error) {
	c, err := api.NewClient(api.Config{Address: url})
	if err != nil {
		return nil, fmt.Errorf("prometheus %s: %w", url, err)
	}
	prom := promv1.NewAPI(c)
	end := now.UTC().Truncate(time.Hour)
	start := end.Add(-window)
	h := History{}
	for _, r := range Resources {
		m, err := promhist.Query(ctx, prom, PromQueries[r], 5*time.Minute, start, end)
		if err != nil {
			return nil, fmt.Errorf("prometheus %s: history of %s: %w", url, r, err)
		}
		for _, s := range m {
			ns := string(s.Metric["namespace"])
			if ns == "" {
				continue
			}
			if h[ns] == nil {
				h[ns] = map[corev1.ResourceName]forecast.Series{}
			}
			h[ns][r] = promhist.Series(s, start, end)
		}
	}
	return h, nil
}

// ForecastInfo records how a forecast plan was made.
type ForecastInfo struct {
	Made    time.Time     `json:"made"`
	Horizon time.Duration `json:"horizon"`
	Risk    float64       `json:"risk"`
}

// MakeForecastPlan plans each namespace's quotas from its forecast: a
// schedule of daily steps over the horizon (merged where the rounded
// quotas do not change), each the week's upper bound of the forecast peak
// (forecast.Model.Schedule). A resource whose history is too short is
// planned by the peak rule (its peak times 1+headroom) and listed in
// Fallbacks. Namespaces in skip get none.
func MakeForecastPlan(h History, now time.Time, opts forecast.Options, headroom float64, skip map[string]bool) (Plan, error) {
	full := forecast.DefaultOptions(opts)
	plan := Plan{
		Headroom:  headroom,
		Quotas:    map[string]map[corev1.ResourceName]resource.Quantity{},
		Forecast:  &ForecastInfo{Made: now, Horizon: full.Horizon, Risk: full.Risk},
		Schedules: map[string][]Step{},
		Fallbacks: map[string][]corev1.ResourceName{},
	}
	from := now.UTC().Truncate(time.Hour)
	for _, ns := range slices.Sorted(maps.Keys(h)) {
		if skip[ns] {
			continue
		}
		var steps []Step
		for _, r := range Resources {
			values, fell, err := plannedValues(h[ns][r], from, opts, headroom)
			if err != nil {
				return Plan{}, fmt.Errorf("namespace %s: %s: %w", ns, r, err)
			}
			if fell {
				plan.Fallbacks[ns] = append(plan.Fallbacks[ns], r)
			}
			if steps == nil {
				for _, v := range values {
					steps = append(steps, Step{From: v.From, Hard: map[corev1.ResourceName]resource.Quantity{}})
				}
			}
			for i, v := range values {
				steps[i].Hard[r] = Round(r, v.Value)
			}
		}
		for _, st := range steps {
			limitsCoverRequests(st.Hard)
		}
		steps = mergeSteps(steps)
		plan.Schedules[ns] = steps
		plan.Quotas[ns] = steps[0].Hard
	}
	if len(plan.Fallbacks) == 0 {
		plan.Fallbacks = nil
	}
	return plan, nil
}

// plannedValues is one resource's schedule from its series; when the
// series is missing or too short, the peak rule's constant over the same
// steps.
func plannedValues(s forecast.Series, from time.Time, opts forecast.Options, headroom float64) ([]forecast.Step, bool, error) {
	full := forecast.DefaultOptions(opts)
	if s.Step > 0 {
		m, err := forecast.Fit(s, opts)
		switch {
		case err == nil:
			return m.Schedule(from), false, nil
		case !forecast.IsShortHistory(err):
			return nil, false, err
		}
	}
	peak := s.Peak()
	if math.IsNaN(peak) {
		peak = 0
	}
	var out []forecast.Step
	for t := from; t.Before(from.Add(full.Horizon)); t = t.Add(full.PlanStep) {
		out = append(out, forecast.Step{From: t, To: t.Add(full.PlanStep), Value: peak * (1 + headroom)})
	}
	return out, true, nil
}

// mergeSteps drops each step whose quotas equal the one before it.
func mergeSteps(steps []Step) []Step {
	out := steps[:1]
	for _, s := range steps[1:] {
		prev := out[len(out)-1]
		same := true
		for r, q := range s.Hard {
			if p, ok := prev.Hard[r]; !ok || p.Cmp(q) != 0 {
				same = false
				break
			}
		}
		if !same {
			out = append(out, s)
		}
	}
	return out
}

// StepAt is the schedule's step in force at t: the last one starting at
// or before t (the first when t is before them all).
func StepAt(steps []Step, t time.Time) Step {
	i := sort.Search(len(steps), func(i int) bool { return steps[i].From.After(t) })
	return steps[max(0, i-1)]
}

// ForecastAlert is a namespace whose forecast usage of a resource reaches
// its quota (the scheduled one, where there is a schedule) within the
// lead time.
type ForecastAlert struct {
	Namespace string    `json:"namespace"`
	Resource  string    `json:"resource"`
	Hard      string    `json:"hard"`
	Crosses   time.Time `json:"crosses"`
	Days      float64   `json:"days"`
}

// CheckForecasts forecasts every Trellis quota's namespace from h and
// returns the resources whose expected peak passes the quota within lead.
// A namespace without enough history has no forecast and no alert.
func CheckForecasts(ctx context.Context, c kubernetes.Interface, h History, lead time.Duration, opts forecast.Options, now time.Time) ([]ForecastAlert, error) {
	l, err := c.CoreV1().ResourceQuotas(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + Name})
	if err != nil {
		return nil, fmt.Errorf("failed to list ResourceQuotas named %s: %w", Name, err)
	}

	var out []ForecastAlert
	for _, rq := range l.Items {
		var steps []Step
		if raw, ok := rq.Annotations[AnnotationSchedule]; ok {
			_ = json.Unmarshal([]byte(raw), &steps) // ApplyDue reports a bad one
		}
		for _, r := range slices.Sorted(maps.Keys(rq.Spec.Hard)) {
			s, ok := h[rq.Namespace][r]
			if !ok {
				continue
			}
			m, err := forecast.Fit(s, opts)
			if err != nil {
				continue
			}
			f := m.Predict(now, now.Add(lead))
			for i, v := range f.Mean {
				t := f.Time(i)
				hard := rq.Spec.Hard[r]
				if len(steps) > 0 {
					if q, ok := StepAt(steps, t).Hard[r]; ok {
						hard = q
					}
				}
				if v > hard.AsApproximateFloat64() {
					out = append(out, ForecastAlert{Namespace: rq.Namespace, Resource: string(r), Hard: hard.String(), Crosses: t, Days: math.Round(t.Sub(now).Hours()/24*10) / 10})
					break
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Resource < out[j].Resource
	})
	return out, nil
}

// Source is where usage history comes from: a Prometheus scraping
// kube-state-metrics, or else the local sample store.
type Source struct {
	Prometheus string
	Store      string
}

// History reads the window before now from the source; an empty history
// is an error saying what to do.
func (s Source) History(ctx context.Context, window time.Duration, now time.Time) (History, error) {
	if s.Prometheus != "" {
		h, err := HistoryFromPrometheus(ctx, s.Prometheus, window, now)
		if err == nil && len(h) == 0 {
			err = fmt.Errorf("prometheus %s has no kube-state-metrics series for any namespace", s.Prometheus)
		}
		return h, err
	}
	smp, err := (Store{Path: s.Store, Retention: window}).Load(now)
	if err != nil {
		return nil, err
	}
	if len(smp) == 0 {
		return nil, fmt.Errorf("%s holds no samples: run `trellis quota sample` first", s.Store)
	}
	return HistoryFromSamples(smp, now.Add(-window), now), nil
}
