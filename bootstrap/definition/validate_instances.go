package definition

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var (
	volumeTypes    = []string{"gp3", "gp2", "io1", "io2", "st1", "sc1", "standard"}
	spotStrategies = []string{"price-capacity-optimized", "capacity-optimized", "capacity-optimized-prioritized", "lowest-price"}
	// machineFamilyRE splits m7g.4xlarge into family letters (m), generation
	// (7) and attributes (g: Graviton; gd, gn ...).
	machineFamilyRE = regexp.MustCompile(`^([a-z]+)(\d+)([a-z-]*)\.[a-z0-9-]+$`)
)

// MachineArchitecture is the architecture of an EC2 machine type by its
// name: the Graviton families carry a g among the attributes after the
// generation (m7g, c7gn, r6gd, t4g, g5g); "" when the name is not a machine
// type.
func MachineArchitecture(machineType string) string {
	m := machineFamilyRE.FindStringSubmatch(machineType)
	switch {
	case m == nil:
		return ""
	case strings.Contains(m[3], "g"):
		return ArchARM64
	}
	return ArchAMD64
}

// validateInstanceSettings checks what p sets itself; volumeType is the
// root volume's type with instanceDefaults' filled in (iops and throughput
// depend on it).
func validateInstanceSettings(p *field.Path, m *InstanceMetadata, v *RootVolume, volumeType string) field.ErrorList {
	var errs field.ErrorList
	if m != nil {
		if m.HTTPTokens != "" && m.HTTPTokens != "required" && m.HTTPTokens != "optional" {
			errs = append(errs, field.NotSupported(p.Child("instanceMetadata", "httpTokens"), m.HTTPTokens, []string{"required", "optional"}))
		}
		if m.HopLimit != nil && (*m.HopLimit < 1 || *m.HopLimit > 64) {
			errs = append(errs, field.Invalid(p.Child("instanceMetadata", "hopLimit"), *m.HopLimit, "must be 1 to 64 (1 keeps the metadata token from pods)"))
		}
	}
	if v != nil {
		vp := p.Child("rootVolume")
		if v.Type != "" && !slices.Contains(volumeTypes, v.Type) {
			errs = append(errs, field.NotSupported(vp.Child("type"), v.Type, volumeTypes))
		}
		if v.Size != nil && (*v.Size < 8 || *v.Size > 16384) {
			errs = append(errs, field.Invalid(vp.Child("size"), *v.Size, "must be 8 to 16384 GiB"))
		}
		if v.IOPS != nil && volumeType != "gp3" && volumeType != "io1" && volumeType != "io2" {
			errs = append(errs, field.Invalid(vp.Child("iops"), *v.IOPS, "only gp3, io1 and io2 volumes take iops"))
		} else if v.IOPS != nil && (*v.IOPS < 3000 && volumeType == "gp3" || *v.IOPS < 100) {
			errs = append(errs, field.Invalid(vp.Child("iops"), *v.IOPS, "below the volume type's minimum (gp3: 3000, io1/io2: 100)"))
		}
		if v.Throughput != nil && volumeType != "gp3" {
			errs = append(errs, field.Invalid(vp.Child("throughput"), *v.Throughput, "only gp3 volumes take a throughput"))
		} else if v.Throughput != nil && (*v.Throughput < 125 || *v.Throughput > 1000) {
			errs = append(errs, field.Invalid(vp.Child("throughput"), *v.Throughput, "must be 125 to 1000 MiB/s"))
		}
	}
	return errs
}

func validateMinMax(p *field.Path, mm *MinMax) field.ErrorList {
	if mm == nil {
		return nil
	}
	var errs field.ErrorList
	var lo, hi *resource.Quantity
	for _, end := range []struct {
		name, v string
		q       **resource.Quantity
	}{{"min", mm.Min, &lo}, {"max", mm.Max, &hi}} {
		if end.v == "" {
			continue
		}
		q, err := resource.ParseQuantity(end.v)
		if err != nil {
			errs = append(errs, field.Invalid(p.Child(end.name), end.v, "not a quantity such as 4 or 16Gi"))
			continue
		}
		*end.q = &q
	}
	if lo != nil && hi != nil && lo.Cmp(*hi) > 0 {
		errs = append(errs, field.Invalid(p.Child("max"), mm.Max, fmt.Sprintf("below min (%s)", mm.Min)))
	}
	return errs
}

// allArch reports whether every known machine type of types is of arch.
func allArch(types []string, arch string) bool {
	for _, t := range types {
		if a := MachineArchitecture(t); a != "" && a != arch {
			return false
		}
	}
	return true
}

// archLabel is the node label kubelet sets to the node's architecture.
const archLabel = "kubernetes.io/arch"

// validateGroupInstances checks a node group's instance settings.
func validateGroupInstances(d *ClusterDefinition, p *field.Path, ig *InstanceGroup) field.ErrorList {
	errs := validateInstanceSettings(p, ig.InstanceMetadata, ig.RootVolume, d.volumeType(ig.RootVolume))
	if ig.Architecture != "" && ig.Architecture != ArchAMD64 && ig.Architecture != ArchARM64 {
		errs = append(errs, field.NotSupported(p.Child("architecture"), ig.Architecture, []string{ArchAMD64, ArchARM64}))
	}
	arch := ig.Architecture
	if arch == "" {
		arch = ArchAMD64
	}
	types := []string{ig.MachineType}
	if ig.MixedInstances != nil {
		types = append(types, ig.MixedInstances.Instances...)
	}
	for i, t := range types {
		if a := MachineArchitecture(t); a != "" && (arch == ArchAMD64 || arch == ArchARM64) && a != arch {
			fp := p.Child("machineType")
			if i > 0 {
				fp = p.Child("mixedInstances", "instances").Index(i - 1)
			}
			fix := fmt.Sprintf("add `architecture: %s` to the group", a)
			if !allArch(types, a) {
				fix = fmt.Sprintf("use %s machine types only", arch)
			}
			errs = append(errs, field.Invalid(fp, t, fmt.Sprintf("an %s machine type in a group whose architecture is %s: %s", a, arch, fix)))
		}
	}
	if l, ok := ig.Labels[archLabel]; ok && l != arch && (l == ArchAMD64 || l == ArchARM64) {
		errs = append(errs, field.Invalid(p.Child("labels").Key(archLabel), l, fmt.Sprintf("the group's architecture is %s: add `architecture: %s` to the group", arch, l)))
	}
	if mi := ig.MixedInstances; mi != nil {
		mp := p.Child("mixedInstances")
		if len(mi.Instances) == 0 && mi.InstanceRequirements == nil {
			errs = append(errs, field.Required(mp.Child("instances"), "the machine types to mix, or instanceRequirements"))
		}
		if r := mi.InstanceRequirements; r != nil {
			rp := mp.Child("instanceRequirements")
			if r.CPU == nil && r.Memory == nil {
				errs = append(errs, field.Required(rp, "cpu or memory bounds"))
			}
			for name, mm := range map[string]*MinMax{"cpu": r.CPU, "memory": r.Memory} {
				errs = append(errs, validateMinMax(rp.Child(name), mm)...)
			}
		}
		if mi.OnDemandBase != nil && *mi.OnDemandBase < 0 {
			errs = append(errs, field.Invalid(mp.Child("onDemandBase"), *mi.OnDemandBase, "must not be negative"))
		}
		if mi.OnDemandAboveBase != nil && (*mi.OnDemandAboveBase < 0 || *mi.OnDemandAboveBase > 100) {
			errs = append(errs, field.Invalid(mp.Child("onDemandAboveBase"), *mi.OnDemandAboveBase, "a percentage: 0 to 100"))
		}
		if mi.SpotAllocationStrategy != "" && !slices.Contains(spotStrategies, mi.SpotAllocationStrategy) {
			errs = append(errs, field.NotSupported(mp.Child("spotAllocationStrategy"), mi.SpotAllocationStrategy, spotStrategies))
		}
	}
	if wp := ig.WarmPool; wp != nil {
		wpp := p.Child("warmPool")
		if wp.MinSize < 0 {
			errs = append(errs, field.Invalid(wpp.Child("minSize"), wp.MinSize, "must not be negative"))
		}
		if wp.MaxSize != nil && *wp.MaxSize < wp.MinSize {
			errs = append(errs, field.Invalid(wpp.Child("maxSize"), *wp.MaxSize, fmt.Sprintf("must be at least the warm pool's minSize (%d)", wp.MinSize)))
		}
		if ig.MaxSize != nil && (wp.MinSize > int64(*ig.MaxSize) || wp.MaxSize != nil && *wp.MaxSize > int64(*ig.MaxSize)) {
			errs = append(errs, field.Invalid(wpp, fmt.Sprintf("minSize %d", wp.MinSize), fmt.Sprintf("a warm pool larger than the group's maxSize (%d)", *ig.MaxSize)))
		}
		if ig.MixedInstances != nil {
			errs = append(errs, field.Forbidden(wpp, "AWS warm pools do not take groups with mixedInstances"))
		}
	}
	if ig.MaxInstanceLifetime != "" {
		d, err := time.ParseDuration(ig.MaxInstanceLifetime)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(p.Child("maxInstanceLifetime"), ig.MaxInstanceLifetime, "a duration such as 168h"))
		case d != 0 && (d < 24*time.Hour || d > 365*24*time.Hour):
			errs = append(errs, field.Invalid(p.Child("maxInstanceLifetime"), ig.MaxInstanceLifetime, "must be 0 or 24h to 8760h (AWS's bounds)"))
		}
	}
	for k := range ig.CloudLabels {
		if k == "" || strings.HasPrefix(k, "aws:") || len(k) > 128 {
			errs = append(errs, field.Invalid(p.Child("cloudLabels").Key(k), k, "a tag key of 1 to 128 characters, not starting with aws:"))
		}
	}
	errs = append(errs, validatePodCapacity(d, p, ig, arch)...)
	if k := ig.Kubelet; k != nil {
		kp := p.Child("kubelet")
		if k.MaxPods != nil && (*k.MaxPods < 1 || *k.MaxPods > 1000) {
			errs = append(errs, field.Invalid(kp.Child("maxPods"), *k.MaxPods, "must be 1 to 1000"))
		}
		for name, m := range map[string]map[string]string{"systemReserved": k.SystemReserved, "kubeReserved": k.KubeReserved} {
			for r, q := range m {
				if r != "cpu" && r != "memory" && r != "ephemeral-storage" && r != "pid" {
					errs = append(errs, field.NotSupported(kp.Child(name).Key(r), r, []string{"cpu", "memory", "ephemeral-storage", "pid"}))
				} else if _, err := resource.ParseQuantity(q); err != nil {
					errs = append(errs, field.Invalid(kp.Child(name).Key(r), q, "not a quantity such as 500m or 1Gi"))
				}
			}
		}
		for _, sig := range strings.Split(k.EvictionHard, ",") {
			if sig != "" && !strings.Contains(sig, "<") {
				errs = append(errs, field.Invalid(kp.Child("evictionHard"), sig, "a signal<threshold list such as memory.available<500Mi,nodefs.available<10%"))
			}
		}
	}
	return errs
}

// volumeType is a root volume's type, instanceDefaults' when it sets none.
func (d *ClusterDefinition) volumeType(v *RootVolume) string {
	_, eff := d.Instances(nil, v)
	if eff == nil {
		return ""
	}
	return eff.Type
}

// validatePodCapacity checks, on AWS, that every instance type the group
// may launch is known, and that kubelet.maxPods fits the pod addresses its
// smallest type holds (netd gives each pod a VPC address).
func validatePodCapacity(d *ClusterDefinition, p *field.Path, ig *InstanceGroup, arch string) field.ErrorList {
	if d.Cloud != CloudAWS || ig.MachineType == "" {
		return nil
	}
	c, err := GroupPodCapacity(ig.MachineType, arch, ig.MixedInstances)
	if err != nil {
		return field.ErrorList{field.Invalid(p.Child("machineType"), ig.MachineType, err.Error())}
	}
	if k := ig.Kubelet; k != nil && k.MaxPods != nil && *k.MaxPods > c.MaxPods {
		return field.ErrorList{field.Invalid(p.Child("kubelet", "maxPods"), *k.MaxPods,
			fmt.Sprintf("at most %d: every pod takes a VPC address, and %s holds %d (%s)", c.MaxPods, c.Bound, c.Limits.PodAddresses(), c.Limits))}
	}
	return nil
}
