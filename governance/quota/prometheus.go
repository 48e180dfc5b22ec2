package quota

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// PromQueries are the kube-state-metrics expressions whose per-namespace
// value is each planned resource's usage at one instant.
var PromQueries = map[corev1.ResourceName]string{
	corev1.ResourceRequestsCPU:     `sum by (namespace) (kube_pod_container_resource_requests{resource="cpu"} * on (namespace, pod) group_left() max by (namespace, pod) (kube_pod_status_phase{phase=~"Pending|Running"} == 1))`,
	corev1.ResourceRequestsMemory:  `sum by (namespace) (kube_pod_container_resource_requests{resource="memory"} * on (namespace, pod) group_left() max by (namespace, pod) (kube_pod_status_phase{phase=~"Pending|Running"} == 1))`,
	corev1.ResourceLimitsCPU:       `sum by (namespace) (kube_pod_container_resource_limits{resource="cpu"} * on (namespace, pod) group_left() max by (namespace, pod) (kube_pod_status_phase{phase=~"Pending|Running"} == 1))`,
	corev1.ResourceLimitsMemory:    `sum by (namespace) (kube_pod_container_resource_limits{resource="memory"} * on (namespace, pod) group_left() max by (namespace, pod) (kube_pod_status_phase{phase=~"Pending|Running"} == 1))`,
	corev1.ResourcePods:            `sum by (namespace) (kube_pod_status_phase{phase=~"Pending|Running"})`,
	"count/configmaps":             `count by (namespace) (kube_configmap_info)`,
	"count/secrets":                `count by (namespace) (kube_secret_info)`,
	"count/services":               `count by (namespace) (kube_service_info)`,
	"count/persistentvolumeclaims": `count by (namespace) (kube_persistentvolumeclaim_info)`,
}

// FromPrometheus reads each namespace's peak usage over window (ending at
// now, at step resolution) from a Prometheus that scrapes kube-state-metrics,
// as one Sample per namespace: MakePlan plans from it as from the local
// store. A query that fails is an error naming the resource; a resource with
// no series is zero (the plan's minimums apply).
func FromPrometheus(ctx context.Context, url string, window, step time.Duration, now time.Time) ([]Sample, error) {
	c, err := api.NewClient(api.Config{Address: url})
	if err != nil {
		return nil, fmt.Errorf("prometheus %s: %w", url, err)
	}
	prom := promv1.NewAPI(c)
	usage := map[string]map[corev1.ResourceName]resource.Quantity{}
	for _, r := range Resources {
		q := fmt.Sprintf("max_over_time((%s)[%s:%s])", PromQueries[r], model.Duration(window), model.Duration(step))
		v, _, err := prom.Query(ctx, q, now)
		if err != nil {
			return nil, fmt.Errorf("prometheus %s: peak %s: %w", url, r, err)
		}
		vec, ok := v.(model.Vector)
		if !ok {
			return nil, fmt.Errorf("prometheus %s: peak %s: got %s, want a vector", url, r, v.Type())
		}
		for _, s := range vec {
			ns := string(s.Metric["namespace"])
			if ns == "" {
				continue
			}
			if usage[ns] == nil {
				usage[ns] = map[corev1.ResourceName]resource.Quantity{}
			}
			usage[ns][r] = *resource.NewMilliQuantity(int64(float64(s.Value)*1000), resource.DecimalSI)
		}
	}
	out := make([]Sample, 0, len(usage))
	for ns, u := range usage {
		out = append(out, Sample{Time: now, Namespace: ns, Usage: u})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Namespace < out[j].Namespace })
	return out, nil
}
