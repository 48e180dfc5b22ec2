package api

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"sigs.k8s.io/yaml"
)

// Canonical is the form of a workload a signature covers: the document
// (YAML or JSON) as JSON with object keys sorted and no insignificant
// space. Comments, key order and YAML style do not change it.
func Canonical(body []byte) ([]byte, error) {
	var v any
	if err := yaml.Unmarshal(body, &v); err != nil {
		return nil, fmt.Errorf("failed to parse the workload: %w", err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("failed to encode the canonical workload: %w", err)
	}
	return b, nil
}

// Sign returns the HeaderSignature value for body, signed by key under
// the name the platform lists its public key as.
func Sign(body []byte, keyName string, key ed25519.PrivateKey) (string, error) {
	c, err := Canonical(body)
	if err != nil {
		return "", err
	}
	return keyName + ":" + base64.StdEncoding.EncodeToString(ed25519.Sign(key, c)), nil
}
