package quota

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/governance/apfplan"
	"github.com/trellis-dev/trellis/governance/forecast"
)

// Name of the ResourceQuota Trellis manages in each namespace.
const Name = "trellis-quota"

// AnnotationSchedule on a Trellis quota holds the rest of its forecast
// schedule (JSON steps): `quota watch` applies each step when it starts.
const AnnotationSchedule = "quota.trellis.dev/schedule"

// Apply applies the plan's quotas (server-side apply) and returns the
// namespaces it touched. A namespace with a schedule gets the step in force
// at now, and the schedule's steps from it on in AnnotationSchedule.
func Apply(ctx context.Context, c kubernetes.Interface, plan Plan, now time.Time) ([]string, error) {
	var done []string
	names := make([]string, 0, len(plan.Quotas))
	for ns := range plan.Quotas {
		names = append(names, ns)
	}
	sort.Strings(names)
	for _, ns := range names {
		hard := plan.Quotas[ns]
		var rest []Step
		if steps := plan.Schedules[ns]; len(steps) > 0 {
			cur := StepAt(steps, now)
			hard = cur.Hard
			for _, st := range steps {
				if !st.From.Before(cur.From) {
					rest = append(rest, st)
				}
			}
		}
		if err := applyQuota(ctx, c, ns, hard, rest); err != nil {
			return done, fmt.Errorf("namespace %s: %w", ns, err)
		}
		done = append(done, ns)
	}
	if plan.API != nil {
		if err := apfplan.Apply(ctx, c, *plan.API); err != nil {
			return done, fmt.Errorf("API capacity: %w", err)
		}
	}
	return done, nil
}

func applyQuota(ctx context.Context, c kubernetes.Interface, ns string, hard map[corev1.ResourceName]resource.Quantity, schedule []Step) error {
	rq := &corev1.ResourceQuota{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ResourceQuota"},
		ObjectMeta: metav1.ObjectMeta{Name: Name, Namespace: ns, Labels: map[string]string{wellknown.LabelManagedBy: "trellis-quota"}},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList(hard)},
	}
	if len(schedule) > 0 {
		b, err := json.Marshal(schedule)
		if err != nil {
			return fmt.Errorf("failed to encode the schedule of ResourceQuota %s: %w", Name, err)
		}
		rq.Annotations = map[string]string{AnnotationSchedule: string(b)}
	}
	b, err := json.Marshal(rq)
	if err != nil {
		return fmt.Errorf("failed to encode ResourceQuota %s: %w", Name, err)
	}
	if _, err := c.CoreV1().ResourceQuotas(ns).Patch(ctx, Name, types.ApplyPatchType, b, metav1.PatchOptions{FieldManager: "trellis-quota", Force: new(true)}); err != nil {
		return fmt.Errorf("failed to apply ResourceQuota %s: %w", Name, err)
	}
	return nil
}

// ApplyDue applies, in every Trellis quota with a schedule, the step in
// force at now when it is not what the quota holds, and returns the
// namespaces it changed. A schedule that cannot be read is an error naming
// the namespace; the others are still applied.
func ApplyDue(ctx context.Context, c kubernetes.Interface, now time.Time) ([]string, error) {
	l, err := c.CoreV1().ResourceQuotas(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + Name})
	if err != nil {
		return nil, fmt.Errorf("failed to list ResourceQuotas named %s: %w", Name, err)
	}
	var changed []string
	var errs []error
	for _, rq := range l.Items {
		raw, ok := rq.Annotations[AnnotationSchedule]
		if !ok {
			continue
		}
		var steps []Step
		if err := json.Unmarshal([]byte(raw), &steps); err != nil || len(steps) == 0 {
			errs = append(errs, fmt.Errorf("namespace %s: annotation %s: %v", rq.Namespace, AnnotationSchedule, err))
			continue
		}
		cur := StepAt(steps, now)
		if sameHard(rq.Spec.Hard, cur.Hard) {
			continue
		}
		var rest []Step
		for _, st := range steps {
			if !st.From.Before(cur.From) {
				rest = append(rest, st)
			}
		}
		if err := applyQuota(ctx, c, rq.Namespace, cur.Hard, rest); err != nil {
			errs = append(errs, fmt.Errorf("namespace %s: %w", rq.Namespace, err))
			continue
		}
		changed = append(changed, rq.Namespace)
	}
	sort.Strings(changed)
	return changed, errors.Join(errs...)
}

func sameHard(a corev1.ResourceList, b map[corev1.ResourceName]resource.Quantity) bool {
	if len(a) != len(b) {
		return false
	}
	for r, q := range b {
		if p, ok := a[r]; !ok || p.Cmp(q) != 0 {
			return false
		}
	}
	return true
}

// Alert is a namespace past the threshold of one of its quotas.
type Alert struct {
	Namespace string  `json:"namespace"`
	Resource  string  `json:"resource"`
	Used      string  `json:"used"`
	Hard      string  `json:"hard"`
	Percent   float64 `json:"percent"`
}

// Check reads every Trellis quota's status and returns the resources used
// past threshold (0.8 = 80%).
func Check(ctx context.Context, c kubernetes.Interface, threshold float64) ([]Alert, error) {
	l, err := c.CoreV1().ResourceQuotas(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + Name})
	if err != nil {
		return nil, fmt.Errorf("failed to list ResourceQuotas named %s: %w", Name, err)
	}
	var out []Alert
	for _, rq := range l.Items {
		for r, hard := range rq.Status.Hard {
			used, ok := rq.Status.Used[r]
			if !ok || hard.IsZero() {
				continue
			}
			pct := used.AsApproximateFloat64() / hard.AsApproximateFloat64()
			if pct >= threshold {
				out = append(out, Alert{Namespace: rq.Namespace, Resource: string(r), Used: used.String(), Hard: hard.String(), Percent: 100 * pct})
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

// Hours are when people are there to act on an alert.
type Hours struct {
	Location   *time.Location
	Start, End int // hours of the day, [Start, End)
	Weekdays   bool
}

// BusinessHours are 9:00-17:00, Monday to Friday, in loc.
func BusinessHours(loc *time.Location) Hours {
	return Hours{Location: loc, Start: 9, End: 17, Weekdays: true}
}

// Open reports whether t is within the hours.
func (h Hours) Open(t time.Time) bool {
	loc := h.Location
	if loc == nil {
		loc = time.UTC
	}
	t = t.In(loc)
	if h.Weekdays && (t.Weekday() == time.Saturday || t.Weekday() == time.Sunday) {
		return false
	}
	return t.Hour() >= h.Start && t.Hour() < h.End
}

// Notify posts the alerts to a webhook as JSON.
func Notify(ctx context.Context, url string, alerts []Alert, forecasts []ForecastAlert) error {
	text := fmt.Sprintf("%d namespace quotas past their threshold, %d forecast to run out", len(alerts), len(forecasts))
	b, err := json.Marshal(map[string]any{"text": text, "alerts": alerts, "forecasts": forecasts})
	if err != nil {
		return fmt.Errorf("failed to encode the quota alerts: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("failed to make the webhook request: %w", err)
	}

	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("webhook answered %s", resp.Status)
	}
	return nil
}

// WatchConfig is what `quota watch` checks and where it reports.
type WatchConfig struct {
	// Threshold alerts at this fraction of a quota (0.8 = 80%).
	Threshold float64
	// Webhook receives the alerts, within Hours only.
	Webhook string
	Hours   Hours
	// History, when set, turns on forecast alerts: a namespace whose
	// forecast reaches a quota within Lead.
	History  History
	Lead     time.Duration
	Forecast forecast.Options
}

// WatchResult is what one check did and found.
type WatchResult struct {
	// Applied are the namespaces whose scheduled step was applied.
	Applied   []string
	Alerts    []Alert
	Forecasts []ForecastAlert
	// Sent is whether the webhook got them (outside hours they are
	// reported, not sent).
	Sent bool
}

// Watch runs one check: it applies the quota schedules' due steps, reads
// every quota's usage against the threshold and, with a history, every
// forecast against its quota, and notifies the webhook when anything is
// found and it is within hours.
func Watch(ctx context.Context, c kubernetes.Interface, cfg WatchConfig, now time.Time) (WatchResult, error) {
	var res WatchResult
	var err error
	if res.Applied, err = ApplyDue(ctx, c, now); err != nil {
		return res, err
	}
	if res.Alerts, err = Check(ctx, c, cfg.Threshold); err != nil {
		return res, err
	}
	if cfg.History != nil {
		if res.Forecasts, err = CheckForecasts(ctx, c, cfg.History, cfg.Lead, cfg.Forecast, now); err != nil {
			return res, err
		}
	}
	if len(res.Alerts)+len(res.Forecasts) == 0 || cfg.Webhook == "" || !cfg.Hours.Open(now) {
		return res, nil
	}
	if err := Notify(ctx, cfg.Webhook, res.Alerts, res.Forecasts); err != nil {
		return res, err
	}
	res.Sent = true
	return res, nil
}
