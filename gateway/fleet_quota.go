package gateway

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/fleet"
	"github.com/trellis-dev/trellis/gateway/api"
)

// FederatedResourceQuotaGVR is Karmada's quota of a namespace across the
// fleet. Trellis writes it with static assignments (governance/quota's
// Federate): Karmada pushes each member's assignment to that member as a
// ResourceQuota, and collects the members' use into its status.
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

// checkFleetQuota is the quota check of a placed submission, against the
// namespace's FederatedResourceQuotas in the fleet. A member is bound by
// its static assignment (the ResourceQuota Karmada pushes to it), so:
//   - where every selected member runs the whole workload (spread
//     duplicated, or a kind whose replicas are not divided), each selected
//     member with an assignment must fit the whole change;
//   - where replicas are divided (capacity or weighted spread), the
//     selected members' assignments together must fit it: Karmada's
//     scheduler decides the shares, so this is the bound known before.
//
// Used is what Karmada collected from the members; a member whose quota
// it has not collected yet counts as using nothing.
func (g *Gateway) checkFleetQuota(ctx context.Context, sub *Submission, existing client.Object, p *fleet.Placement) ([]api.Problem, error) {
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
	whole := p.Spec.Spread == fleet.SpreadDuplicated || !fleet.DividesReplicas(sub.Kind())
	var bounds []corev1.ResourceQuota
	for _, item := range list.Items {
		var q frq
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(item.Object, &q); err != nil {
			return nil, fmt.Errorf("failed to read FederatedResourceQuota %s/%s: %w", ns, item.GetName(), err)
		}
		bounds = append(bounds, memberBounds(q, p.Spec.Clusters, whole)...)
	}
	return checkQuota(bounds, Demand(objs), old), nil
}

// memberBounds turns one FederatedResourceQuota into the bounds the
// check compares with, as ResourceQuotas named for the message: one per
// selected member with an assignment ("trellis-quota in east"), or one
// for the selected members together ("trellis-quota across east, west").
// selected nil means every member (a placement without clusters).
func memberBounds(q frq, selected []string, whole bool) []corev1.ResourceQuota {
	used := map[string]corev1.ResourceList{}
	for _, a := range q.Status.AggregatedStatus {
		used[a.ClusterName] = a.Used
	}
	var names []string
	sumHard, sumUsed := corev1.ResourceList{}, corev1.ResourceList{}
	var out []corev1.ResourceQuota
	for _, a := range q.Spec.StaticAssignments {
		if selected != nil && !slices.Contains(selected, a.ClusterName) {
			continue
		}
		if whole {
			out = append(out, corev1.ResourceQuota{
				ObjectMeta: metav1.ObjectMeta{Namespace: q.Namespace, Name: q.Name + " in member " + a.ClusterName},
				Spec:       corev1.ResourceQuotaSpec{Hard: a.Hard},
				Status:     corev1.ResourceQuotaStatus{Used: used[a.ClusterName]},
			})
			continue
		}
		names = append(names, a.ClusterName)
		for name := range a.Hard {
			add(sumHard, name, a.Hard[name])
			if u, ok := used[a.ClusterName][name]; ok {
				add(sumUsed, name, u)
			}
		}
	}
	if whole || len(names) == 0 {
		return out
	}
	slices.Sort(names)
	return []corev1.ResourceQuota{{
		ObjectMeta: metav1.ObjectMeta{Namespace: q.Namespace, Name: q.Name + " across members " + strings.Join(names, ", ")},
		Spec:       corev1.ResourceQuotaSpec{Hard: sumHard},
		Status:     corev1.ResourceQuotaStatus{Used: sumUsed},
	}}
}
