package definition

// What a platform team sets on a node pool beyond its size: the
// architecture, instance metadata, root volume, spot and mixed instances,
// warm pool, lifetime, cloud labels and kubelet settings. Each renders into
// kops's InstanceGroup spec.

// Architectures of a group's machine type and image.
const (
	ArchAMD64 = "amd64"
	ArchARM64 = "arm64"
)

// InstanceSettings are what instanceDefaults gives every group (the
// control plane's too); a group's own fields win, field by field.
type InstanceSettings struct {
	InstanceMetadata *InstanceMetadata `json:"instanceMetadata,omitempty"`
	RootVolume       *RootVolume       `json:"rootVolume,omitempty"`
}

// InstanceMetadata is the instance metadata service's access.
type InstanceMetadata struct {
	// HTTPTokens is required (IMDSv2 only) or optional.
	HTTPTokens string `json:"httpTokens,omitempty"`
	// HopLimit is the PUT response hop limit: 1 keeps the token from
	// pods behind the node's network namespace.
	HopLimit *int64 `json:"hopLimit,omitempty"`
}

// RootVolume is the root EBS volume.
type RootVolume struct {
	// Size in GiB.
	Size *int32 `json:"size,omitempty"`
	// Type is gp3, gp2, io1, io2, st1, sc1 or standard.
	Type       string `json:"type,omitempty"`
	IOPS       *int32 `json:"iops,omitempty"`
	Throughput *int32 `json:"throughput,omitempty"`
	Encrypted  *bool  `json:"encrypted,omitempty"`
}

// MixedInstances spreads a group over instance types and spot capacity.
type MixedInstances struct {
	// Instances are the machine types, the group's machineType first; or
	// InstanceRequirements let AWS pick every type within bounds.
	Instances            []string              `json:"instances,omitempty"`
	InstanceRequirements *InstanceRequirements `json:"instanceRequirements,omitempty"`
	// OnDemandBase instances come first on demand; OnDemandAboveBase is
	// the percentage of the rest on demand (0: all spot).
	OnDemandBase      *int64 `json:"onDemandBase,omitempty"`
	OnDemandAboveBase *int64 `json:"onDemandAboveBase,omitempty"`
	// SpotAllocationStrategy: price-capacity-optimized, capacity-optimized,
	// capacity-optimized-prioritized or lowest-price.
	SpotAllocationStrategy string `json:"spotAllocationStrategy,omitempty"`
	// CapacityRebalance replaces spot instances at risk of interruption.
	CapacityRebalance *bool `json:"capacityRebalance,omitempty"`
}

// InstanceRequirements bound the machine types AWS may choose.
type InstanceRequirements struct {
	// CPU in vCPUs and Memory as quantities (e.g. 16Gi), each min and max.
	CPU    *MinMax `json:"cpu,omitempty"`
	Memory *MinMax `json:"memory,omitempty"`
	// Excluded types, wildcards allowed (e.g. t3*, *.metal).
	Excluded []string `json:"excluded,omitempty"`
}

// MinMax is a range of quantities; either end may be open.
type MinMax struct {
	Min string `json:"min,omitempty"`
	Max string `json:"max,omitempty"`
}

// WarmPool keeps pre-initialized instances stopped beside the group.
type WarmPool struct {
	MinSize int64  `json:"minSize,omitempty"`
	MaxSize *int64 `json:"maxSize,omitempty"`
	// LifecycleHook holds a warm instance until its images are pulled.
	LifecycleHook bool `json:"lifecycleHook,omitempty"`
}

// Kubelet settings of a group.
type Kubelet struct {
	MaxPods *int32 `json:"maxPods,omitempty"`
	// EvictionHard, e.g. memory.available<500Mi,nodefs.available<10%.
	EvictionHard   string            `json:"evictionHard,omitempty"`
	SystemReserved map[string]string `json:"systemReserved,omitempty"`
	KubeReserved   map[string]string `json:"kubeReserved,omitempty"`
}

// Instances are a group's instance metadata and root volume with what
// instanceDefaults gives every group filled in (copies: the definition is
// left as written, so validation names the field that is wrong).
func (d *ClusterDefinition) Instances(m *InstanceMetadata, v *RootVolume) (*InstanceMetadata, *RootVolume) {
	s := InstanceSettings{}
	if m != nil {
		s.InstanceMetadata = new(*m)
	}
	if v != nil {
		s.RootVolume = new(*v)
	}
	s.fill(d.InstanceDefaults)
	return s.InstanceMetadata, s.RootVolume
}

// fill sets what s leaves out from defaults.
func (s *InstanceSettings) fill(defaults InstanceSettings) {
	if d := defaults.InstanceMetadata; d != nil {
		if s.InstanceMetadata == nil {
			s.InstanceMetadata = &InstanceMetadata{}
		}
		m := s.InstanceMetadata
		if m.HTTPTokens == "" {
			m.HTTPTokens = d.HTTPTokens
		}
		if m.HopLimit == nil && d.HopLimit != nil {
			m.HopLimit = new(*d.HopLimit)
		}
	}
	if d := defaults.RootVolume; d != nil {
		if s.RootVolume == nil {
			s.RootVolume = &RootVolume{}
		}
		v := s.RootVolume
		if v.Size == nil && d.Size != nil {
			v.Size = new(*d.Size)
		}
		if v.Type == "" {
			v.Type = d.Type
		}
		if v.IOPS == nil && d.IOPS != nil {
			v.IOPS = new(*d.IOPS)
		}
		if v.Throughput == nil && d.Throughput != nil {
			v.Throughput = new(*d.Throughput)
		}
		if v.Encrypted == nil && d.Encrypted != nil {
			v.Encrypted = new(*d.Encrypted)
		}
	}
}
