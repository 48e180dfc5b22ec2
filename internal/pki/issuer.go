package pki

import "time"

// Lifetimes of a cluster's identity CAs.
const (
	// RootTTL is the lifetime of a new root.
	RootTTL = 10 * 365 * 24 * time.Hour
	// SignerTTL is the lifetime of a signing CA minted for the issuer.
	SignerTTL = 365 * 24 * time.Hour
)

// IssuerState mints a signing CA under root for the in-cluster issuer: the
// content of its CA Secret. The root key stays out of it.
func IssuerState(root *KeyPair, trustDomain string) (*State, error) {
	signer, err := NewIntermediate(root, trustDomain, SignerTTL, time.Now())
	if err != nil {
		return nil, err
	}
	return NewState(root, signer), nil
}
