package quota

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Federated is a namespace's quota across a fleet: Karmada's
// FederatedResourceQuota, whose static assignments Karmada pushes to each
// member as a ResourceQuota of the same name, and whose overall is their
// sum.
type Federated struct {
	Namespace string
	// Assignments are the members' quotas, by member name.
	Assignments map[string]map[corev1.ResourceName]resource.Quantity
}

// Federate joins plans made per member (each from that member's own
// history) into one quota per namespace that runs in at least minMembers
// of them (2: the namespaces that span clusters). A namespace in only
// some members gets assignments for those only.
func Federate(plans map[string]Plan, minMembers int) []Federated {
	byNS := map[string]map[string]map[corev1.ResourceName]resource.Quantity{}
	for member, p := range plans {
		for ns, q := range p.Quotas {
			if byNS[ns] == nil {
				byNS[ns] = map[string]map[corev1.ResourceName]resource.Quantity{}
			}
			byNS[ns][member] = q
		}
	}
	var out []Federated
	for ns, a := range byNS {
		if len(a) >= minMembers {
			out = append(out, Federated{Namespace: ns, Assignments: a})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Namespace < out[j].Namespace })
	return out
}

// Overall is the sum of the members' quotas, per resource.
func (f Federated) Overall() map[corev1.ResourceName]resource.Quantity {
	out := map[corev1.ResourceName]resource.Quantity{}
	for _, q := range f.Assignments {
		for r, v := range q {
			sum := out[r]
			sum.Add(v)
			out[r] = sum
		}
	}
	return out
}

// Object is the FederatedResourceQuota (policy.karmada.io/v1alpha1),
// named like the per-cluster quota (trellis-quota).
func (f Federated) Object() *unstructured.Unstructured {
	members := make([]string, 0, len(f.Assignments))
	for m := range f.Assignments {
		members = append(members, m)
	}
	sort.Strings(members)
	var static []any
	for _, m := range members {
		static = append(static, map[string]any{"clusterName": m, "hard": resourceList(f.Assignments[m])})
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "policy.karmada.io/v1alpha1", "kind": "FederatedResourceQuota",
		"metadata": map[string]any{"name": Name, "namespace": f.Namespace,
			"labels": map[string]any{"app.kubernetes.io/managed-by": "trellis-quota"}},
		"spec": map[string]any{"overall": resourceList(f.Overall()), "staticAssignments": static},
	}}
}

func resourceList(q map[corev1.ResourceName]resource.Quantity) map[string]any {
	out := make(map[string]any, len(q))
	for r, v := range q {
		out[string(r)] = v.String()
	}
	return out
}

// String is one line per namespace: its members and overall CPU requests.
func (f Federated) String() string {
	o := f.Overall()
	cpu := o[corev1.ResourceRequestsCPU]
	mem := o[corev1.ResourceRequestsMemory]
	return fmt.Sprintf("%s: %d members, overall requests.cpu %s, requests.memory %s", f.Namespace, len(f.Assignments), cpu.String(), mem.String())
}
