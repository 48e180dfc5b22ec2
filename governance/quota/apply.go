package quota

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/trellis-dev/trellis/api/wellknown"
)

// Name of the ResourceQuota Trellis manages in each namespace.
const Name = "trellis-quota"

// Apply applies the plan's quotas (server-side apply) and returns the
// namespaces it touched.
func Apply(ctx context.Context, c kubernetes.Interface, plan Plan) ([]string, error) {
	var done []string
	names := make([]string, 0, len(plan.Quotas))
	for ns := range plan.Quotas {
		names = append(names, ns)
	}
	sort.Strings(names)
	for _, ns := range names {
		hard := corev1.ResourceList{}
		for r, q := range plan.Quotas[ns] {
			hard[r] = q
		}
		rq := &corev1.ResourceQuota{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ResourceQuota"},
			ObjectMeta: metav1.ObjectMeta{Name: Name, Namespace: ns, Labels: map[string]string{wellknown.LabelManagedBy: "trellis-quota"}},
			Spec:       corev1.ResourceQuotaSpec{Hard: hard},
		}
		b, err := json.Marshal(rq)
		if err != nil {
			return done, err
		}
		if _, err := c.CoreV1().ResourceQuotas(ns).Patch(ctx, Name, types.ApplyPatchType, b, metav1.PatchOptions{FieldManager: "trellis-quota", Force: new(true)}); err != nil {
			return done, fmt.Errorf("namespace %s: %w", ns, err)
		}
		done = append(done, ns)
	}
	return done, nil
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
		return nil, err
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
func Notify(ctx context.Context, url string, alerts []Alert) error {
	b, err := json.Marshal(map[string]any{"text": fmt.Sprintf("%d namespace quotas past their threshold", len(alerts)), "alerts": alerts})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return err
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

// Watch checks the quotas once and notifies the webhook when any is past
// threshold and it is within hours. It returns the alerts and whether they
// were sent (outside hours they are reported, not sent).
func Watch(ctx context.Context, c kubernetes.Interface, threshold float64, webhook string, hours Hours, now time.Time) ([]Alert, bool, error) {
	alerts, err := Check(ctx, c, threshold)
	if err != nil || len(alerts) == 0 || webhook == "" || !hours.Open(now) {
		return alerts, false, err
	}
	if err := Notify(ctx, webhook, alerts); err != nil {
		return alerts, false, err
	}
	return alerts, true, nil
}
