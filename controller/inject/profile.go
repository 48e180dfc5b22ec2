package inject

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/trellis-dev/trellis/api/wellknown"
)

// Where the runtime profile lives: a ConfigMap, key profile.yaml.
const (
	ProfileNamespace = "trellis-system"
	ProfileName      = "trellis-runtime-profile"
	ProfileKey       = "profile.yaml"
)

// ResourcePolicy says what happens to a container without resources.
type ResourcePolicy string

const (
	// PolicyDefault fills missing requests and limits from the profile.
	PolicyDefault ResourcePolicy = "Default"
	// PolicyRequire rejects user containers without requests and limits.
	PolicyRequire ResourcePolicy = "Require"
)

// Profile is the cluster-level runtime profile: what is injected, at which
// versions, and the resource policy.
type Profile struct {
	// Revision identifies this profile; pods carry it so a changed profile
	// can be rolled out gradually.
	Revision string `json:"revision"`
	Cluster  string `json:"cluster"`
	Env      string `json:"env"`
	// TrustDomain of SPIFFE identities.
	TrustDomain string `json:"trustDomain"`
	Images      Images `json:"images"`
	Resources   struct {
		Policy ResourcePolicy `json:"policy"`
		// Default applies to user containers under PolicyDefault.
		Default corev1.ResourceRequirements `json:"default"`
		// Sidecar applies to injected containers.
		Sidecar corev1.ResourceRequirements `json:"sidecar"`
	} `json:"resources"`
	// JobTTLSeconds garbage-collects finished jobs.
	JobTTLSeconds int32 `json:"jobTTLSeconds"`
	// CertAgentSocketDir is the node directory holding the cert agent's socket.
	CertAgentSocketDir string `json:"certAgentSocketDir"`
}

// Images of the injected containers.
type Images struct {
	ConfigInit string `json:"configInit"`
	Traffic    string `json:"traffic"`
	Cert       string `json:"cert"`
}

// DefaultProfile is used when the cluster has no profile ConfigMap.
func DefaultProfile() *Profile {
	p := &Profile{
		Revision:           "default",
		Cluster:            "unknown",
		Env:                "dev",
		TrustDomain:        "trellis.local",
		Images:             Images{ConfigInit: "trellis/config-init:0.1.0", Traffic: "trellis/traffic:0.1.0", Cert: "trellis/cert-sidecar:0.1.0"},
		JobTTLSeconds:      86400,
		CertAgentSocketDir: wellknown.PathCertAgent,
	}
	p.Resources.Policy = PolicyDefault
	p.Resources.Default = requirements("100m", "128Mi", "1", "512Mi")
	p.Resources.Sidecar = requirements("10m", "32Mi", "100m", "64Mi")
	return p
}

func requirements(cpuReq, memReq, cpuLim, memLim string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpuReq), corev1.ResourceMemory: resource.MustParse(memReq)},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpuLim), corev1.ResourceMemory: resource.MustParse(memLim)},
	}
}

// ParseProfile reads a profile from its YAML, on top of the defaults.
func ParseProfile(data []byte) (*Profile, error) {
	p := DefaultProfile()
	if err := yaml.UnmarshalStrict(data, p); err != nil {
		return nil, fmt.Errorf("invalid runtime profile: %w", err)
	}
	switch p.Resources.Policy {
	case PolicyDefault, PolicyRequire:
	default:
		return nil, fmt.Errorf("invalid runtime profile: resources.policy %q: want Default or Require", p.Resources.Policy)
	}
	if p.Revision == "" {
		return nil, fmt.Errorf("invalid runtime profile: revision is required")
	}
	return p, nil
}
