package definition

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// FleetAPIAddon runs the fleet's API (Karmada's apiserver and its etcd)
// on a management cluster. Its one value, replicas, is the number of its
// members: each pod runs an etcd member and an apiserver over it.
const (
	FleetAPIAddon      = "karmada-apiserver"
	FleetReplicasValue = "replicas"
)

// FleetReplicas are the members of the fleet's API on this cluster: the
// karmada-apiserver addon's replicas value, else 3 on AWS (a member can be
// lost, or drained, without losing the fleet's quorum) and 1 on kind
// (whose emptyDir volumes do not outlive a pod: see validateFleet).
// Validate first: a value that is not a whole number counts as unset.
func (d *ClusterDefinition) FleetReplicas() int {
	for _, a := range d.Addons {
		if a.Name != FleetAPIAddon {
			continue
		}
		if n, ok := wholeNumber(a.Values[FleetReplicasValue]); ok {
			return n
		}
	}
	if d.Cloud == CloudAWS {
		return 3
	}
	return 1
}

// addonValues are the values each addon takes; an addon not listed takes
// none.
var addonValues = map[string][]string{FleetAPIAddon: {FleetReplicasValue}}

// validateAddonValues checks addon i's values.
func validateAddonValues(d *ClusterDefinition, p *field.Path, a Addon) field.ErrorList {
	var errs field.ErrorList
	known := addonValues[a.Name]
	for k := range a.Values {
		if !slices.Contains(known, k) {
			errs = append(errs, field.NotSupported(p.Child("values").Key(k), k, known))
		}
	}
	if a.Name != FleetAPIAddon {
		return errs
	}
	// Unset, the default for the cloud counts (and is checked against
	// the nodes the same way), named by the addon.
	n, vp, v := d.FleetReplicas(), p.Child("name"), any(a.Name)
	if raw, set := a.Values[FleetReplicasValue]; set {
		vp, v = p.Child("values").Key(FleetReplicasValue), raw
		var ok bool
		if n, ok = wholeNumber(raw); !ok || (n != 1 && n != 3 && n != 5) {
			return append(errs, field.Invalid(vp, v, "must be 1, 3 or 5: the members of the fleet's etcd, an odd number so that a quorum survives the loss of (n-1)/2"))
		}
	}
	switch {
	case n > 1 && d.Cloud == CloudKind:
		errs = append(errs, field.Invalid(vp, v, "must be 1 on kind: its etcd data is an emptyDir, and a member whose pod is replaced would come back empty under its old name"))
	case n > 1:
		if nodes := schedulableMinNodes(d); nodes < n {
			errs = append(errs, field.Invalid(vp, v, fmt.Sprintf("%d fleet etcd members: needs at least %d nodes without NoSchedule or NoExecute taints at the instance groups' minimum sizes (they sum to %d): each member runs on a node of its own, so that losing a node loses one; grow the groups or set values.replicas", n, n, nodes)))
		}
	}
	return errs
}

// schedulableMinNodes is the nodes an addon can count on: the minimum
// sizes of the instance groups whose taints do not keep its pods off.
func schedulableMinNodes(d *ClusterDefinition) int {
	n := 0
	for _, g := range d.InstanceGroups {
		if g.MinSize == nil || slices.ContainsFunc(g.Taints, func(t string) bool {
			return strings.HasSuffix(t, ":NoSchedule") || strings.HasSuffix(t, ":NoExecute")
		}) {
			continue
		}
		n += int(*g.MinSize)
	}
	return n
}

// wholeNumber reads a YAML number (float64 once decoded) or an int as an
// int.
func wholeNumber(v any) (int, bool) {
	switch n := v.(type) {
	case int:
		return n, true
	case int64:
		return int(n), true
	case float64:
		if n == math.Trunc(n) && math.Abs(n) < 1e6 {
			return int(n), true
		}
	}
	return 0, false
}
