package gateway

import (
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// The platform's submission policy: a ConfigMap in the gateway's namespace.
const (
	PolicyConfigMap = "trellis-gateway-policy"
	// PolicyKeyRegistries lists the allowed registries, one a line: a
	// host (registry.example.com) or a host and path prefix
	// (ghcr.io/acme). Lines starting with # are comments.
	PolicyKeyRegistries = "allowedRegistries"
	// PolicyKeyRequireSignature "true" refuses unsigned workloads.
	PolicyKeyRequireSignature = "requireSignature"
	// PolicyKeySignerPrefix names a signer's base64 ed25519 public key:
	// signer.<name>.
	PolicyKeySignerPrefix = "signer."
)

// Policy is the parsed policy ConfigMap.
type Policy struct {
	Registries       []string
	RequireSignature bool
	Signers          map[string]ed25519.PublicKey
}

// ParsePolicy reads the policy ConfigMap; nil (none) allows no registry.
func ParsePolicy(cm *corev1.ConfigMap) (*Policy, error) {
	p := &Policy{Signers: map[string]ed25519.PublicKey{}}
	if cm == nil {
		return p, nil
	}
	for _, l := range strings.Split(cm.Data[PolicyKeyRegistries], "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			p.Registries = append(p.Registries, strings.TrimSuffix(l, "/"))
		}
	}
	switch v := strings.TrimSpace(cm.Data[PolicyKeyRequireSignature]); v {
	case "", "false":
	case "true":
		p.RequireSignature = true
	default:
		return nil, fmt.Errorf("policy %s key %s: %q, want true or false", cm.Name, PolicyKeyRequireSignature, v)
	}
	for k, v := range cm.Data {
		name, ok := strings.CutPrefix(k, PolicyKeySignerPrefix)
		if !ok {
			continue
		}
		b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(v))
		if err != nil || len(b) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("policy %s key %s: want a base64 ed25519 public key (%d bytes)", cm.Name, k, ed25519.PublicKeySize)
		}
		p.Signers[name] = ed25519.PublicKey(b)
	}
	return p, nil
}
