package render

import (
	"maps"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kops/pkg/apis/kops"

	"github.com/trellis-dev/trellis/bootstrap/definition"
)

// instanceSettings renders instance metadata and the root volume (with
// the definition's instanceDefaults filled in) into an instance group.
func instanceSettings(d *definition.ClusterDefinition, spec *kops.InstanceGroupSpec, m *definition.InstanceMetadata, v *definition.RootVolume) {
	m, v = d.Instances(m, v)
	if m != nil {
		spec.InstanceMetadata = &kops.InstanceMetadataOptions{HTTPPutResponseHopLimit: m.HopLimit}
		if m.HTTPTokens != "" {
			spec.InstanceMetadata.HTTPTokens = new(m.HTTPTokens)
		}
	}
	if v != nil {
		spec.RootVolume = &kops.InstanceRootVolumeSpec{Size: v.Size, IOPS: v.IOPS, Throughput: v.Throughput, Encryption: v.Encrypted}
		if v.Type != "" {
			spec.RootVolume.Type = new(v.Type)
		}
	}
}

// minMax renders a validated range.
func minMax(mm *definition.MinMax) *kops.MinMaxSpec {
	if mm == nil {
		return nil
	}
	out := &kops.MinMaxSpec{}
	if q, err := resource.ParseQuantity(mm.Min); err == nil {
		out.Min = &q
	}
	if q, err := resource.ParseQuantity(mm.Max); err == nil {
		out.Max = &q
	}
	return out
}

// nodeGroupSettings renders what a node group adds: mixed instances and
// spot, warm pool, lifetime, cloud labels and kubelet settings.
func nodeGroupSettings(spec *kops.InstanceGroupSpec, g *definition.InstanceGroup) {
	if mi := g.MixedInstances; mi != nil {
		spec.MixedInstancesPolicy = &kops.MixedInstancesPolicySpec{
			Instances: slices.Clone(mi.Instances), OnDemandBase: mi.OnDemandBase, OnDemandAboveBase: mi.OnDemandAboveBase,
		}
		if r := mi.InstanceRequirements; r != nil {
			spec.MixedInstancesPolicy.InstanceRequirements = &kops.InstanceRequirementsSpec{
				CPU: minMax(r.CPU), Memory: minMax(r.Memory), ExcludedInstanceTypes: slices.Clone(r.Excluded),
			}
		}
		if mi.SpotAllocationStrategy != "" {
			spec.MixedInstancesPolicy.SpotAllocationStrategy = new(mi.SpotAllocationStrategy)
		}
		spec.CapacityRebalance = mi.CapacityRebalance
	}
	if wp := g.WarmPool; wp != nil {
		spec.WarmPool = &kops.WarmPoolSpec{MinSize: wp.MinSize, MaxSize: wp.MaxSize, EnableLifecycleHook: wp.LifecycleHook}
	}
	if g.MaxInstanceLifetime != "" {
		if d, err := time.ParseDuration(g.MaxInstanceLifetime); err == nil && d > 0 {
			spec.MaxInstanceLifetime = &metav1.Duration{Duration: d}
		}
	}
	if len(g.CloudLabels) > 0 {
		spec.CloudLabels = maps.Clone(g.CloudLabels)
	}
	if k := g.Kubelet; k != nil {
		spec.Kubelet = &kops.KubeletConfigSpec{MaxPods: k.MaxPods, SystemReserved: maps.Clone(k.SystemReserved), KubeReserved: maps.Clone(k.KubeReserved)}
		if k.EvictionHard != "" {
			spec.Kubelet.EvictionHard = new(k.EvictionHard)
		}
	}
}

// podCapacity sets the kubelet's maxPods, unless the definition does, to
// what the group's smallest instance type holds: netd gives every pod a
// VPC address from its node's ENIs (kops does the same at boot for its
// amazonvpc networking; Trellis renders it, so the spec says it).
func podCapacity(spec *kops.InstanceGroupSpec, machineType, arch string, mi *definition.MixedInstances) error {
	if spec.Kubelet != nil && spec.Kubelet.MaxPods != nil {
		return nil
	}
	if arch == "" {
		arch = definition.ArchAMD64
	}
	c, err := definition.GroupPodCapacity(machineType, arch, mi)
	if err != nil {
		return err
	}
	if spec.Kubelet == nil {
		spec.Kubelet = &kops.KubeletConfigSpec{}
	}
	spec.Kubelet.MaxPods = new(c.MaxPods)
	return nil
}
