package definition

import (
	"fmt"
	"path"
	"slices"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/trellis-dev/trellis/internal/enilimits"
)

// PodCapacity is how many pods a group's nodes can hold on AWS, where
// netd gives every pod a VPC address from its node's ENIs: the kubelet's
// maxPods for the group, the smallest over every instance type the group
// may launch (its machine type, its mixed instances, or every type its
// instance requirements admit). Bound names the type that sets it.
type PodCapacity struct {
	MaxPods int32
	Bound   string
	Limits  enilimits.Limits
}

// GroupPodCapacity derives a group's pod capacity from the instance-type
// table; an unknown type is an error.
func GroupPodCapacity(machineType, architecture string, mi *MixedInstances) (PodCapacity, error) {
	types, err := candidateTypes(machineType, architecture, mi)
	if err != nil {
		return PodCapacity{}, err
	}
	var best PodCapacity
	for _, t := range types {
		if mp := int32(t.Limits.MaxPods()); best.Bound == "" || mp < best.MaxPods {
			best = PodCapacity{MaxPods: mp, Bound: t.Name, Limits: t.Limits}
		}
	}
	return best, nil
}

func candidateTypes(machineType, architecture string, mi *MixedInstances) ([]enilimits.Type, error) {
	names := []string{machineType}
	if mi != nil {
		names = append(names, mi.Instances...)
	}
	var out []enilimits.Type
	for _, n := range names {
		if n == "" || slices.ContainsFunc(out, func(t enilimits.Type) bool { return t.Name == n }) {
			continue
		}
		t, ok := enilimits.Lookup(n)
		if !ok {
			return nil, fmt.Errorf("instance type %q is not in the EC2 instance-type table", n)
		}
		out = append(out, t)
	}
	if mi == nil || mi.InstanceRequirements == nil {
		return out, nil
	}
	all, err := enilimits.All()
	if err != nil {
		return nil, err
	}
	arch := "x86_64"
	if architecture == ArchARM64 {
		arch = "arm64"
	}
	r := mi.InstanceRequirements
	n := 0
	for _, t := range all {
		if admits(r, arch, t) {
			out = append(out, t)
			n++
		}
	}
	if n == 0 {
		return nil, fmt.Errorf("no %s instance type meets the instance requirements", arch)
	}
	return out, nil
}

// admits reports whether instance requirements (validated) let AWS launch t.
func admits(r *InstanceRequirements, arch string, t enilimits.Type) bool {
	if !slices.Contains(t.Architectures, arch) {
		return false
	}
	for _, x := range r.Excluded {
		if ok, _ := path.Match(x, t.Name); ok {
			return false
		}
	}
	in := func(mm *MinMax, v int64, unit int64) bool {
		if mm == nil {
			return true
		}
		if q, err := resource.ParseQuantity(mm.Min); err == nil && v*unit < q.Value() {
			return false
		}
		if q, err := resource.ParseQuantity(mm.Max); err == nil && v*unit > q.Value() {
			return false
		}
		return true
	}
	return in(r.CPU, int64(t.VCPUs), 1) && in(r.Memory, int64(t.MemoryMiB), 1<<20)
}
