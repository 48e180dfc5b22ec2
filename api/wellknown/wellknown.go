package wellknown

// Labels on workload pods (and the objects bundled for them).
const (
	// LabelWorkload and LabelKind select a workload's pods; they never change.
	LabelWorkload = "trellis.dev/workload"
	LabelKind     = "trellis.dev/kind"
	// LabelService is the workload's discovery name; the log shipper and the
	// certificate issuer read it.
	LabelService = "trellis.dev/service"
	// LabelManagedBy is ManagedBy on every object the controller owns.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// LabelTeam and LabelCostCenter are copied from the CR to its pods.
	LabelTeam       = "trellis.dev/team"
	LabelCostCenter = "trellis.dev/cost-center"
	// LabelShard is set on each TrellisJobSet shard's Job and pods.
	LabelShard = "trellis.dev/shard"

	// ManagedBy is the value of LabelManagedBy on the controller's objects.
	ManagedBy = "trellis"
)

// Annotations on workload pods.
const (
	// AnnotationProfile is the revision of the runtime profile a pod was
	// built from.
	AnnotationProfile = "trellis.dev/runtime-profile"

	// The discovery annotations: the ZooKeeper registrar registers a pod
	// carrying them in the serverset of its service and env; ports lists
	// name:port, the first being the service endpoint (see ParsePorts).
	AnnotationDiscoveryService = "discovery.trellis.dev/service"
	AnnotationDiscoveryEnv     = "discovery.trellis.dev/env"
	AnnotationDiscoveryPorts   = "discovery.trellis.dev/ports"
	AnnotationDiscoveryShard   = "discovery.trellis.dev/shard"

	// AnnotationMetadataAccess "allow" lets a pod reach the cloud
	// instance-metadata address, which the node network daemon otherwise
	// blocks.
	AnnotationMetadataAccess = "trellis.dev/metadata-access"

	// AnnotationIdentityNotBefore and AnnotationIdentityNotAfter are the
	// validity (RFC 3339, UTC) of the identity certificate the issuer last
	// gave the pod, written by the issuer in one patch after it signs, so
	// the gateway can show when a pod's identity expires. Never the
	// certificate itself.
	AnnotationIdentityNotBefore = "trellis.dev/identity-not-before"
	AnnotationIdentityNotAfter  = "trellis.dev/identity-not-after"
)

// ConditionRegistered is the pod readiness gate of every workload that
// registers in ZooKeeper: the node's registrar sets it True once the pod's
// member znode exists and False when it deregisters, so a pod is Ready
// (and counts for its PodDisruptionBudget) only while clients can find it.
const ConditionRegistered = "trellis.dev/registered"

// Containers and volumes the controller injects into pods.
const (
	ContainerConfigInit = "trellis-config-init"
	ContainerTraffic    = "trellis-traffic"
	ContainerCert       = "trellis-cert"

	VolumeConfig      = "trellis-config"
	VolumeConfigSrc   = "trellis-config-src"
	VolumeIdentity    = "trellis-identity"
	VolumeCertAgent   = "trellis-cert-agent"
	VolumeShardConfig = "trellis-shard-config"
)

// Paths inside workload containers.
const (
	// PathConfig holds the workload's rendered configuration.
	PathConfig = "/etc/trellis/config"
	// PathConfigSrc is where the config init container reads the
	// workload's ConfigMap.
	PathConfigSrc = "/etc/trellis/config-src"
	// PathShard holds a TrellisJobSet shard's rendered shard config.
	PathShard = "/etc/trellis/shard"
	// PathIdentity holds the pod's identity: IdentityKeyFile,
	// IdentityCertFile and IdentityBundleFile, kept fresh by the
	// certificate sidecar.
	PathIdentity = "/var/run/trellis/identity"
	// PathCertAgent is the directory of the node certificate agent's socket,
	// CertAgentSocket, on the node and in the certificate sidecar.
	PathCertAgent = "/run/trellis/cert-agent"
)

// Files in PathIdentity and PathCertAgent.
const (
	IdentityKeyFile    = "key.pem"    // the pod's private key (0600)
	IdentityCertFile   = "cert.pem"   // the certificate chain, leaf first
	IdentityBundleFile = "bundle.pem" // the trusted roots

	CertAgentSocket = "agent.sock"
)

// Environment variables the runtime sets in workload containers. All begin
// with EnvPrefix.
const (
	EnvPrefix = "TRELLIS_"

	EnvService      = "TRELLIS_SERVICE"
	EnvEnvironment  = "TRELLIS_ENV"
	EnvCluster      = "TRELLIS_CLUSTER"
	EnvPodName      = "TRELLIS_POD_NAME"
	EnvPodNamespace = "TRELLIS_POD_NAMESPACE"
	EnvPodIP        = "TRELLIS_POD_IP"
	EnvNodeName     = "TRELLIS_NODE_NAME"
	EnvShardIndex   = "TRELLIS_SHARD_INDEX"
	EnvShardCount   = "TRELLIS_SHARD_COUNT"
)
