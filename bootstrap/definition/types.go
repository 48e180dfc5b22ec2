package definition

// APIVersion and Kind identify a cluster definition document.
const (
	APIVersion = "trellis.dev/v1alpha1"
	Kind       = "ClusterDefinition"
)

// Cloud names where a cluster runs.
type Cloud string

const (
	// CloudAWS is a kops-managed cluster on AWS.
	CloudAWS Cloud = "aws"
	// CloudKind is a local kind cluster with the production wiring.
	CloudKind Cloud = "kind"
)

// Role is the role of an instance group.
type Role string

const (
	RoleNode         Role = "Node"
	RoleControlPlane Role = "ControlPlane"
)

// ClusterDefinition is one cluster, after its base has been merged in.
type ClusterDefinition struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Base names a shared base under the clusters directory (for example
	// "base/aws.yaml"); the definition overrides only what differs.
	Base string `json:"base,omitempty"`
	// Abstract marks a base: it is merged into definitions, never rendered alone.
	Abstract bool `json:"abstract,omitempty"`

	// Name is the short cluster name; with DNSZone it forms the kops cluster name.
	Name string `json:"name"`
	// DNSZone is the Route53 zone the cluster's records live in (aws only).
	DNSZone string   `json:"dnsZone,omitempty"`
	Cloud   Cloud    `json:"cloud"`
	Region  string   `json:"region,omitempty"`
	Zones   []string `json:"zones,omitempty"`
	// KubernetesVersion is a full semantic version, e.g. 1.36.1.
	KubernetesVersion string `json:"kubernetesVersion"`

	Network        Network         `json:"network"`
	ControlPlane   ControlPlane    `json:"controlPlane"`
	InstanceGroups []InstanceGroup `json:"instanceGroups,omitempty"`
	Addons         []Addon         `json:"addons,omitempty"`
	Runtime        Runtime         `json:"runtime"`
	// Quota configures the trellis-quota addon's watch.
	Quota       Quota             `json:"quota,omitempty"`
	CloudLabels map[string]string `json:"cloudLabels,omitempty"`
	// InstanceDefaults apply to every group, the control plane's too.
	InstanceDefaults InstanceSettings `json:"instanceDefaults"`
}

// Network is the cluster's address plan.
type Network struct {
	VPCCIDR     string   `json:"vpcCIDR"`
	PodCIDR     string   `json:"podCIDR"`
	ServiceCIDR string   `json:"serviceCIDR"`
	Subnets     []Subnet `json:"subnets,omitempty"`
}

// Subnet is the pair of subnets in one zone.
type Subnet struct {
	Zone    string `json:"zone"`
	Public  string `json:"public,omitempty"`
	Private string `json:"private,omitempty"`
}

// ControlPlane describes the control-plane instance groups (one per zone)
// and the tuning of its components.
type ControlPlane struct {
	MachineType       string       `json:"machineType,omitempty"`
	Image             string       `json:"image,omitempty"`
	Zones             []string     `json:"zones,omitempty"`
	APIServer         APIServer    `json:"apiServer"`
	ControllerManager ClientTuning `json:"controllerManager"`
	Scheduler         ClientTuning `json:"scheduler"`
	Etcd              Etcd         `json:"etcd"`
	// InstanceMetadata and RootVolume of the control-plane instances
	// (default: instanceDefaults).
	InstanceMetadata *InstanceMetadata `json:"instanceMetadata,omitempty"`
	RootVolume       *RootVolume       `json:"rootVolume,omitempty"`
}

// APIServer tunes kube-apiserver.
type APIServer struct {
	MaxRequestsInflight         int32 `json:"maxRequestsInflight,omitempty"`
	MaxMutatingRequestsInflight int32 `json:"maxMutatingRequestsInflight,omitempty"`
	// WatchCacheSizes are resource#size pairs, e.g. pods#5000.
	WatchCacheSizes []string `json:"watchCacheSizes,omitempty"`
}

// ClientTuning is a component's client-side rate limit against the apiserver.
type ClientTuning struct {
	QPS   int32 `json:"qps,omitempty"`
	Burst int32 `json:"burst,omitempty"`
}

// Etcd tunes etcd through etcd-manager's environment.
type Etcd struct {
	// QuotaBackendBytes is ETCD_QUOTA_BACKEND_BYTES.
	QuotaBackendBytes int64 `json:"quotaBackendBytes,omitempty"`
	// AutoCompactionMode is ETCD_AUTO_COMPACTION_MODE: periodic or revision.
	AutoCompactionMode string `json:"autoCompactionMode,omitempty"`
	// AutoCompactionRetention is ETCD_AUTO_COMPACTION_RETENTION, e.g. 5m or 1000.
	AutoCompactionRetention string `json:"autoCompactionRetention,omitempty"`
}

// InstanceGroup is a group of worker nodes.
type InstanceGroup struct {
	Name        string `json:"name"`
	Role        Role   `json:"role,omitempty"`
	MachineType string `json:"machineType,omitempty"`
	// Image is an AMI id (ami-...), an ssm: parameter, or owner/name.
	Image          string            `json:"image,omitempty"`
	MinSize        *int32            `json:"minSize,omitempty"`
	MaxSize        *int32            `json:"maxSize,omitempty"`
	Zones          []string          `json:"zones,omitempty"`
	Labels         map[string]string `json:"labels,omitempty"`
	Taints         []string          `json:"taints,omitempty"`
	MaxSurge       string            `json:"maxSurge,omitempty"`
	MaxUnavailable string            `json:"maxUnavailable,omitempty"`
	// Architecture of the machine types and image: amd64 (default) or
	// arm64 (Graviton).
	Architecture     string            `json:"architecture,omitempty"`
	InstanceMetadata *InstanceMetadata `json:"instanceMetadata,omitempty"`
	RootVolume       *RootVolume       `json:"rootVolume,omitempty"`
	MixedInstances   *MixedInstances   `json:"mixedInstances,omitempty"`
	WarmPool         *WarmPool         `json:"warmPool,omitempty"`
	// MaxInstanceLifetime replaces instances older than this (at least
	// 24h), e.g. 168h.
	MaxInstanceLifetime string `json:"maxInstanceLifetime,omitempty"`
	// CloudLabels are tags on the group's instances, beside the cluster's.
	CloudLabels map[string]string `json:"cloudLabels,omitempty"`
	Kubelet     *Kubelet          `json:"kubelet,omitempty"`
}

// Addon selects an addon of the bundle and its values.
type Addon struct {
	Name    string         `json:"name"`
	Version string         `json:"version,omitempty"`
	Values  map[string]any `json:"values,omitempty"`
}

// Quota configures `trellis quota watch`, which the trellis-quota addon
// runs as a CronJob: it applies the quota schedules' due steps and alerts,
// in business hours, when a namespace passes a quota's threshold or (with
// Prometheus) is forecast to reach a quota within Lead.
type Quota struct {
	// Schedule is the CronJob's (default hourly, "0 * * * *").
	Schedule string `json:"schedule,omitempty"`
	// Prometheus, scraping kube-state-metrics, turns on forecast alerts.
	Prometheus string `json:"prometheus,omitempty"`
	// Webhook receives the alerts as JSON.
	Webhook string `json:"webhook,omitempty"`
	// TimeZone of business hours (default UTC).
	TimeZone string `json:"timeZone,omitempty"`
	// Lead is how far ahead forecast alerts look, a Go duration (default
	// 336h, 14 days).
	Lead string `json:"lead,omitempty"`
	// Threshold alerts at this fraction of a quota (default 0.8).
	Threshold float64 `json:"threshold,omitempty"`
}

// Runtime is what every workload gets: discovery, identity and logging.
type Runtime struct {
	ZooKeeper   ZooKeeper `json:"zookeeper"`
	TrustDomain string    `json:"trustDomain,omitempty"`
	LogSink     LogSink   `json:"logSink"`
}

// ZooKeeper is the ensemble pods register in.
type ZooKeeper struct {
	Ensemble []string `json:"ensemble,omitempty"`
	// Root is the znode under which serversets live.
	Root string `json:"root,omitempty"`
}

// LogSink is where node log shippers send container logs.
type LogSink struct {
	// Type is kafka, file or stdout.
	Type    string   `json:"type,omitempty"`
	Brokers []string `json:"brokers,omitempty"`
	// Topic is a template, e.g. logs.{{.Service}}.
	Topic string `json:"topic,omitempty"`
	Path  string `json:"path,omitempty"`
}
