// Package quota plans namespace ResourceQuotas from observed usage: sample
// each namespace's usage from the apiserver into a small local store, plan
// each quota as the historical peak plus headroom, apply reviewed plans, and
// alert (HTTP webhook, business hours only) when a namespace passes a
// threshold of any quota.
package quota

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/trellis-dev/trellis/governance/apfplan"
)

// Resources planned, in ResourceQuota names.
var Resources = []corev1.ResourceName{
	corev1.ResourceRequestsCPU, corev1.ResourceRequestsMemory, corev1.ResourceLimitsCPU, corev1.ResourceLimitsMemory,
	corev1.ResourcePods, "count/configmaps", "count/secrets", "count/services", "count/persistentvolumeclaims",
}

// Sample is one namespace's usage at one time.
type Sample struct {
	Time      time.Time                                 `json:"time"`
	Namespace string                                    `json:"namespace"`
	Usage     map[corev1.ResourceName]resource.Quantity `json:"usage"`
}

// Collect measures every namespace's usage: the requests and limits of its
// pods that are not finished, and its object counts. It lists, once per
// run: this is a periodic job, not a controller. An object count the
// caller may not list (the local cluster's sampler is refused secrets) is
// left out of the samples rather than recorded as zero; Collect returns
// those it left out.
func Collect(ctx context.Context, c kubernetes.Interface, now time.Time) ([]Sample, []corev1.ResourceName, error) {
	nss, err := c.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("failed to list namespaces: %w", err)
	}
	usage := map[string]map[corev1.ResourceName]resource.Quantity{}
	for _, ns := range nss.Items {
		u := map[corev1.ResourceName]resource.Quantity{}
		for _, r := range Resources {
			u[r] = resource.Quantity{}
		}
		usage[ns.Name] = u
	}
	add := func(ns string, r corev1.ResourceName, q resource.Quantity) {
		if u, ok := usage[ns]; ok {
			cur := u[r]
			cur.Add(q)
			u[r] = cur
		}
	}
	one := *resource.NewQuantity(1, resource.DecimalSI)
	pods, err := c.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("failed to list pods in all namespaces: %w", err)
	}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		add(p.Namespace, corev1.ResourcePods, one)
		for _, ct := range p.Spec.Containers {
			add(p.Namespace, corev1.ResourceRequestsCPU, ct.Resources.Requests[corev1.ResourceCPU])
			add(p.Namespace, corev1.ResourceRequestsMemory, ct.Resources.Requests[corev1.ResourceMemory])
			add(p.Namespace, corev1.ResourceLimitsCPU, ct.Resources.Limits[corev1.ResourceCPU])
			add(p.Namespace, corev1.ResourceLimitsMemory, ct.Resources.Limits[corev1.ResourceMemory])
		}
	}
	all := metav1.ListOptions{}
	counts := []struct {
		res  corev1.ResourceName
		list func() (runtime.Object, error)
	}{
		{"count/configmaps", func() (runtime.Object, error) { return c.CoreV1().ConfigMaps("").List(ctx, all) }},
		{"count/secrets", func() (runtime.Object, error) { return c.CoreV1().Secrets("").List(ctx, all) }},
		{"count/services", func() (runtime.Object, error) { return c.CoreV1().Services("").List(ctx, all) }},
		{"count/persistentvolumeclaims", func() (runtime.Object, error) { return c.CoreV1().PersistentVolumeClaims("").List(ctx, all) }},
	}
	var skipped []corev1.ResourceName
	for _, k := range counts {
		l, err := k.list()
		if apierrors.IsForbidden(err) {
			skipped = append(skipped, k.res)
			for _, u := range usage {
				delete(u, k.res)
			}
			continue
		}
		if err == nil {
			err = meta.EachListItem(l, func(o runtime.Object) error {
				m, err := meta.Accessor(o)
				if err != nil {
					return fmt.Errorf("an item without metadata: %w", err)
				}
				add(m.GetNamespace(), k.res, one)
				return nil
			})
		}
		if err != nil {
			return nil, nil, fmt.Errorf("failed to count the objects of %s in all namespaces: %w", k.res, err)
		}
	}
	var out []Sample
	for ns, u := range usage {
		out = append(out, Sample{Time: now, Namespace: ns, Usage: u})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Namespace < out[j].Namespace })
	return out, skipped, nil
}

// Store keeps samples as JSON lines in a local file, pruning those older
// than Retention.
type Store struct {
	Path      string
	Retention time.Duration
}

// Append adds samples.
func (s Store) Append(samples []Sample) error {
	f, err := os.OpenFile(s.Path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("failed to open the sample store %s: %w", s.Path, err)
	}
	enc := json.NewEncoder(f)
	for _, smp := range samples {
		if err := enc.Encode(smp); err != nil {
			f.Close()
			return fmt.Errorf("failed to append the sample of namespace %s to %s: %w", smp.Namespace, s.Path, err)
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("failed to close the sample store %s: %w", s.Path, err)
	}
	return nil
}

// Load reads the samples newer than now - Retention (all when Retention
// is 0).
func (s Store) Load(now time.Time) ([]Sample, error) {
	f, err := os.Open(s.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("failed to open the sample store %s: %w", s.Path, err)
	}

	defer f.Close()
	var out []Sample
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		var smp Sample
		if err := json.Unmarshal(sc.Bytes(), &smp); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", s.Path, line, err)
		}
		if s.Retention == 0 || now.Sub(smp.Time) <= s.Retention {
			out = append(out, smp)
		}
	}
	return out, sc.Err()
}

// Plan is the quotas to apply, per namespace. A forecast plan also holds
// each namespace's schedule: Quotas is then its first step.
type Plan struct {
	Headroom float64                                              `json:"headroom"`
	Quotas   map[string]map[corev1.ResourceName]resource.Quantity `json:"quotas"`
	// Forecast says how a forecast plan was made; nil for peak plans.
	Forecast *ForecastInfo `json:"forecast,omitempty"`
	// Schedules are the steps of each namespace's quota over the horizon,
	// a step starting where the one before it ends and holding until the
	// next (or the horizon).
	Schedules map[string][]Step `json:"schedules,omitempty"`
	// Fallbacks are, per namespace, the resources planned by the peak
	// rule because their history was too short to forecast.
	Fallbacks map[string][]corev1.ResourceName `json:"fallbacks,omitempty"`
	// API is the proposed API capacity (priority levels and a FlowSchema
	// per tenant and verb class), from the tenants' forecast seats, with
	// their request rates by verb class and the forecast of those.
	API *apfplan.Proposal `json:"api,omitempty"`
}

// Step is one step of a quota schedule.
type Step struct {
	From time.Time                                 `json:"from"`
	Hard map[corev1.ResourceName]resource.Quantity `json:"hard"`
}

// Minimums keep a quiet namespace usable.
var Minimums = map[corev1.ResourceName]resource.Quantity{
	corev1.ResourceRequestsCPU: resource.MustParse("500m"), corev1.ResourceRequestsMemory: resource.MustParse("512Mi"),
	corev1.ResourceLimitsCPU: resource.MustParse("1"), corev1.ResourceLimitsMemory: resource.MustParse("1Gi"),
	corev1.ResourcePods: resource.MustParse("10"), "count/configmaps": resource.MustParse("10"), "count/secrets": resource.MustParse("10"),
	"count/services": resource.MustParse("5"), "count/persistentvolumeclaims": resource.MustParse("5"),
}

// MakePlan sets each namespace's quota to its peak usage times
// (1+headroom), rounded up (CPU to 100m, memory to 64Mi, counts to whole
// objects), and never below Minimums. Namespaces in skip get none.
func MakePlan(samples []Sample, headroom float64, skip map[string]bool) Plan {
	peak := map[string]map[corev1.ResourceName]float64{}
	for _, s := range samples {
		if skip[s.Namespace] {
			continue
		}
		p := peak[s.Namespace]
		if p == nil {
			p = map[corev1.ResourceName]float64{}
			peak[s.Namespace] = p
		}
		for r, q := range s.Usage {
			if v := q.AsApproximateFloat64(); v > p[r] {
				p[r] = v
			}
		}
	}
	plan := Plan{Headroom: headroom, Quotas: map[string]map[corev1.ResourceName]resource.Quantity{}}
	for ns, p := range peak {
		q := map[corev1.ResourceName]resource.Quantity{}
		for _, r := range Resources {
			q[r] = Round(r, p[r]*(1+headroom))
		}
		limitsCoverRequests(q)
		plan.Quotas[ns] = q
	}
	return plan
}

// limitsCoverRequests raises a limits quota to its requests quota where a
// minimum left it lower (a namespace with requests but no limits): the
// apiserver warns about such a quota, and it would refuse pods the
// requests quota admits.
func limitsCoverRequests(q map[corev1.ResourceName]resource.Quantity) {
	for lim, req := range map[corev1.ResourceName]corev1.ResourceName{corev1.ResourceLimitsCPU: corev1.ResourceRequestsCPU, corev1.ResourceLimitsMemory: corev1.ResourceRequestsMemory} {
		l, okL := q[lim]
		r, okR := q[req]
		if okL && okR && l.Cmp(r) < 0 {
			q[lim] = r.DeepCopy()
		}
	}
}

// Round turns a planned value of r into its quota: rounded up (CPU to
// 100m, memory to 64Mi, counts to whole objects), and never below
// Minimums.
func Round(r corev1.ResourceName, v float64) resource.Quantity {
	var qty resource.Quantity
	switch r {
	case corev1.ResourceRequestsCPU, corev1.ResourceLimitsCPU:
		qty = *resource.NewMilliQuantity(int64(math.Ceil(v*10))*100, resource.DecimalSI)
	case corev1.ResourceRequestsMemory, corev1.ResourceLimitsMemory:
		const step = 64 << 20
		qty = *resource.NewQuantity(int64(math.Ceil(v/step))*step, resource.BinarySI)
	default:
		qty = *resource.NewQuantity(int64(math.Ceil(v)), resource.DecimalSI)
	}
	if m, ok := Minimums[r]; ok && qty.Cmp(m) < 0 {
		qty = m.DeepCopy()
	}
	return qty
}
