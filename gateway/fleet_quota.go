package gateway

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/fleet"
	"github.com/trellis-dev/trellis/gateway/api"
)

// FederatedResourceQuotaGVR is Karmada's quota of a namespace across the
// fleet. Trellis writes it with static assignments (governance/quota's
// Federate): Karmada pushes each member's assignment to that member as a
// ResourceQuota (a member without one gets none: it is unbounded), and
// collects the members' use into its status.
var FederatedResourceQuotaGVR = schema.GroupVersionResource{Group: "policy.karmada.io", Version: "v1alpha1", Resource: "federatedresourcequotas"}

// frq is the part of a FederatedResourceQuota the check reads.
type frq struct {
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Overall           corev1.ResourceList `json:"overall"`
		StaticAssignments []struct {
			ClusterName string              `json:"clusterName"`
			Hard        corev1.ResourceList `json:"hard"`
		} `json:"staticAssignments"`
	} `json:"spec"`
	Status struct {
		AggregatedStatus []struct {
			ClusterName string              `json:"clusterName"`
			Used        corev1.ResourceList `json:"used"`
		} `json:"aggregatedStatus"`
	} `json:"status"`
}

// spreadMode is how a placed workload's replicas land on the members.
type spreadMode int

const (
	// spreadWhole: every selected member runs the whole workload
	// (duplicated, or a kind whose replicas the fleet does not divide).
	spreadWhole spreadMode = iota
	// spreadWeighted: static weights fix each member's share in advance.
	spreadWeighted
	// spreadCapacity: Karmada's scheduler decides the shares later.
	spreadCapacity
)

// bound is one ResourceQuota-shaped bound and the demand that must fit it.
type bound struct {
	rq       corev1.ResourceQuota
	new, old corev1.ResourceList
}

// checkFleetQuota is the quota check of a placed submission, against the
// namespace's FederatedResourceQuotas in the fleet, for the members the
// placement can select now. Each member is bound by its static
// assignment:
//   - spread whole: each selected member with an assignment must fit the
//     whole change;
//   - weighted: each must fit its share, ceil(replicas × weight / total
//     weight of the selected members), the most Karmada's division gives
//     it;
//   - capacity: the selected members' assignments together must fit it,
//     and only when every one has an assignment (one without is unbounded).
//
// Used is what Karmada collected from the members; a member whose quota
// it has not collected yet counts as using nothing. The running version's
// demand is subtracted as if it ran the same way.
func (g *Gateway) checkFleetQuota(ctx context.Context, sub *Submission, existing client.Object, ft *fleetTarget) ([]api.Problem, error) {
	ns := sub.Obj.GetNamespace()
	list, err := g.fleet.Resource(FederatedResourceQuotaGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("failed to read the fleet's quotas of %s: %w", ns, err)
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	objs, err := g.admission.Translate(ctx, sub.Obj)
	if err != nil {
		return nil, nil // the validation check reports why
	}
	var old corev1.ResourceList
	if existing != nil {
		if prev, err := g.admission.Translate(ctx, existing); err == nil {
			old = Demand(prev)
		}
	}
	p := ft.placement
	mode := spreadCapacity
	switch {
	case p.Spec.Spread == fleet.SpreadDuplicated || !fleet.DividesReplicas(sub.Kind()):
		mode = spreadWhole
	case p.Spec.Spread == fleet.SpreadWeighted:
		mode = spreadWeighted
	}
	replicas := int64(1)
	if n, ok, _ := unstructured.NestedInt64(sub.Raw, "spec", "replicas"); ok && n > 0 {
		replicas = n
	}
	var probs []api.Problem
	for _, item := range list.Items {
		var q frq
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(item.Object, &q); err != nil {
			return nil, fmt.Errorf("failed to read FederatedResourceQuota %s/%s: %w", ns, item.GetName(), err)
		}
		for _, b := range memberBounds(q, ft.members, mode, p.Spec.Weights, replicas, Demand(objs), old) {
			probs = append(probs, checkQuota([]corev1.ResourceQuota{b.rq}, b.new, b.old)...)
		}
	}
	return probs, nil
}

// memberBounds turns one FederatedResourceQuota into the bounds to
// check, as ResourceQuotas named for the message ("trellis-quota in
// member east", "trellis-quota across members east, west") with the
// demand each must take.
func memberBounds(q frq, members []string, mode spreadMode, weights map[string]int64, replicas int64, newD, oldD corev1.ResourceList) []bound {
	used := map[string]corev1.ResourceList{}
	for _, a := range q.Status.AggregatedStatus {
		used[a.ClusterName] = a.Used
	}
	hard := map[string]corev1.ResourceList{}
	for _, a := range q.Spec.StaticAssignments {
		hard[a.ClusterName] = a.Hard
	}
	var total int64
	for _, m := range members {
		total += weights[m]
	}
	member := func(m string, share, of int64) bound {
		return bound{
			rq: corev1.ResourceQuota{
				ObjectMeta: metav1.ObjectMeta{Namespace: q.Namespace, Name: q.Name + " in member " + m},
				Spec:       corev1.ResourceQuotaSpec{Hard: hard[m]},
				Status:     corev1.ResourceQuotaStatus{Used: used[m]},
			},
			new: scale(newD, share, of), old: scale(oldD, share, of),
		}
	}
	var out []bound
	switch mode {
	case spreadWhole:
		for _, m := range members {
			if hard[m] != nil {
				out = append(out, member(m, 1, 1))
			}
		}
	case spreadWeighted:
		for _, m := range members {
			if hard[m] == nil || weights[m] <= 0 || total <= 0 {
				continue
			}
			share := (replicas*weights[m] + total - 1) / total
			out = append(out, member(m, share, replicas))
		}
	case spreadCapacity:
		sumHard, sumUsed := corev1.ResourceList{}, corev1.ResourceList{}
		for _, m := range members {
			if hard[m] == nil {
				return nil // an unbounded member can take what the others cannot
			}
			for name, h := range hard[m] {
				add(sumHard, name, h)
				if u, ok := used[m][name]; ok {
					add(sumUsed, name, u)
				}
			}
		}
		if len(members) == 0 {
			return nil
		}
		names := slices.Clone(members)
		slices.Sort(names)
		out = append(out, bound{
			rq: corev1.ResourceQuota{
				ObjectMeta: metav1.ObjectMeta{Namespace: q.Namespace, Name: q.Name + " across members " + strings.Join(names, ", ")},
				Spec:       corev1.ResourceQuotaSpec{Hard: sumHard},
				Status:     corev1.ResourceQuotaStatus{Used: sumUsed},
			},
			new: newD, old: oldD,
		})
	}
	return out
}

// scale is l × share / of, each quantity rounded up to the milli.
func scale(l corev1.ResourceList, share, of int64) corev1.ResourceList {
	if l == nil || share == of {
		return l
	}
	out := corev1.ResourceList{}
	for name, q := range l {
		m := q.MilliValue()*share + of - 1
		out[name] = *resource.NewMilliQuantity(m/of, q.Format)
	}
	return out
}
