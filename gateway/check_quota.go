package gateway

import (
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/gateway/api"
)

// Quota resource names the check compares (cpu and memory mean requests).
var quotaNames = []corev1.ResourceName{
	corev1.ResourceRequestsCPU, corev1.ResourceRequestsMemory,
	corev1.ResourceLimitsCPU, corev1.ResourceLimitsMemory, corev1.ResourcePods,
}

// Demand is what a workload's pods take of a namespace's quota when they
// all run: requests, limits and pods, from the objects the controller
// would create (so defaulted resources and injected sidecars count).
func Demand(objs []client.Object) corev1.ResourceList {
	total := corev1.ResourceList{}
	for _, o := range objs {
		var n int32 = 1
		var spec *corev1.PodSpec
		switch t := o.(type) {
		case *appsv1.Deployment:
			n, spec = replicas(t.Spec.Replicas), &t.Spec.Template.Spec
		case *appsv1.StatefulSet:
			n, spec = replicas(t.Spec.Replicas), &t.Spec.Template.Spec
		case *appsv1.DaemonSet:
			// One pod per node: counted as one (the gateway does not
			// know which nodes will run it).
			spec = &t.Spec.Template.Spec
		case *batchv1.Job:
			n, spec = replicas(t.Spec.Parallelism), &t.Spec.Template.Spec
		case *batchv1.CronJob:
			n, spec = replicas(t.Spec.JobTemplate.Spec.Parallelism), &t.Spec.JobTemplate.Spec.Template.Spec
		case *corev1.Pod:
			spec = &t.Spec
		default:
			continue
		}
		pod := podDemand(spec)
		for name, q := range pod {
			q.Mul(int64(n))
			add(total, name, q)
		}
	}
	return total
}

func replicas(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

// podDemand is a pod's effective requests and limits, as quota counts
// them: the larger of the containers' (and restartable init containers')
// sum and any one init container's.
func podDemand(spec *corev1.PodSpec) corev1.ResourceList {
	sum := corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}
	initMax := corev1.ResourceList{}
	each := func(c corev1.Container, into corev1.ResourceList, maxOnly bool) {
		for _, r := range []struct {
			name corev1.ResourceName
			from corev1.ResourceList
			key  corev1.ResourceName
		}{
			{corev1.ResourceRequestsCPU, c.Resources.Requests, corev1.ResourceCPU},
			{corev1.ResourceRequestsMemory, c.Resources.Requests, corev1.ResourceMemory},
			{corev1.ResourceLimitsCPU, c.Resources.Limits, corev1.ResourceCPU},
			{corev1.ResourceLimitsMemory, c.Resources.Limits, corev1.ResourceMemory},
		} {
			q, ok := r.from[r.key]
			if !ok {
				continue
			}
			if maxOnly {
				if cur, ok := into[r.name]; !ok || q.Cmp(cur) > 0 {
					into[r.name] = q.DeepCopy()
				}
				continue
			}
			add(into, r.name, q)
		}
	}
	for _, c := range spec.Containers {
		each(c, sum, false)
	}
	for _, c := range spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			each(c, sum, false)
		} else {
			each(c, initMax, true)
		}
	}
	for name, q := range initMax {
		if cur, ok := sum[name]; !ok || q.Cmp(cur) > 0 {
			sum[name] = q
		}
	}
	return sum
}

func add(l corev1.ResourceList, name corev1.ResourceName, q resource.Quantity) {
	cur := l[name]
	cur.Add(q)
	l[name] = cur
}

// checkQuota says, for every ResourceQuota of the namespace, by how much
// the change from old to new demand does not fit: "needs 3 CPU more than
// team-a/compute allows: 12 of 16 used".
func checkQuota(quotas []corev1.ResourceQuota, newDemand, oldDemand corev1.ResourceList) []api.Problem {
	var probs []api.Problem
	slices.SortFunc(quotas, func(a, b corev1.ResourceQuota) int { return strings.Compare(a.Name, b.Name) })
	for _, rq := range quotas {
		for _, name := range quotaNames {
			hard, ok := lookup(rq.Spec.Hard, name)
			if !ok {
				continue
			}
			delta := newDemand[name].DeepCopy()
			delta.Sub(oldDemand[name])
			if delta.Sign() <= 0 {
				continue
			}
			used, _ := lookup(rq.Status.Used, name)
			after := used.DeepCopy()
			after.Add(delta)
			if after.Cmp(hard) <= 0 {
				continue
			}
			over := after.DeepCopy()
			over.Sub(hard)
			probs = append(probs, api.Problem{Check: "quota", Field: "spec",
				Message: fmt.Sprintf("needs %s more than %s/%s allows: %s of %s used",
					quantity(name, over), rq.Namespace, rq.Name, plain(name, used), plain(name, hard))})
		}
	}
	return probs
}

// lookup reads name, or its short form (cpu for requests.cpu).
func lookup(l corev1.ResourceList, name corev1.ResourceName) (resource.Quantity, bool) {
	if q, ok := l[name]; ok {
		return q, true
	}
	switch name {
	case corev1.ResourceRequestsCPU:
		q, ok := l[corev1.ResourceCPU]
		return q, ok
	case corev1.ResourceRequestsMemory:
		q, ok := l[corev1.ResourceMemory]
		return q, ok
	}
	return resource.Quantity{}, false
}

func quantity(name corev1.ResourceName, q resource.Quantity) string {
	switch name {
	case corev1.ResourceRequestsCPU:
		return plain(name, q) + " CPU"
	case corev1.ResourceLimitsCPU:
		return plain(name, q) + " CPU of limits"
	case corev1.ResourceRequestsMemory:
		return plain(name, q) + " of memory"
	case corev1.ResourceLimitsMemory:
		return plain(name, q) + " of memory limits"
	case corev1.ResourcePods:
		return plain(name, q) + " pods"
	}
	return plain(name, q) + " " + string(name)
}

// plain writes whole CPUs without the m suffix (12, not 12000m).
func plain(name corev1.ResourceName, q resource.Quantity) string {
	if (name == corev1.ResourceRequestsCPU || name == corev1.ResourceLimitsCPU) && q.MilliValue()%1000 == 0 {
		return fmt.Sprint(q.MilliValue() / 1000)
	}
	return q.String()
}
