package certs

import (
	"crypto"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"

	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/internal/pki"
)

// Identity is what the sidecar wrote: key, chain and bundle.
type Identity struct {
	Key    crypto.Signer
	Chain  []*x509.Certificate
	Roots  []*x509.Certificate
	ID     spiffeid.ID
	Source string // the version read
}

// Load reads the identity files of dir as one set.
func Load(dir string) (*Identity, error) {
	for range 3 { // a write may swap the set between our reads: retry
		v := Version(dir)
		id, err := loadFrom(filepath.Join(dir, dataLink))
		if err == nil && Version(dir) == v {
			id.Source = v
			return id, nil
		}
		if err != nil && Version(dir) == v {
			return nil, err
		}
	}
	return nil, fmt.Errorf("identity in %s keeps changing", dir)
}

func loadFrom(dir string) (*Identity, error) {
	keyPEM, err := os.ReadFile(filepath.Join(dir, wellknown.IdentityKeyFile))
	if err != nil {
		return nil, fmt.Errorf("failed to read the identity key in %s: %w", dir, err)
	}
	key, err := pki.ParseKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", wellknown.IdentityKeyFile, err)
	}
	certPEM, err := os.ReadFile(filepath.Join(dir, wellknown.IdentityCertFile))
	if err != nil {
		return nil, fmt.Errorf("failed to read the identity certificate in %s: %w", dir, err)
	}
	chain, err := pki.ParseCerts(certPEM)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", wellknown.IdentityCertFile, err)
	}
	bundlePEM, err := os.ReadFile(filepath.Join(dir, wellknown.IdentityBundleFile))
	if err != nil {
		return nil, fmt.Errorf("failed to read the trust bundle in %s: %w", dir, err)
	}

	roots, err := pki.ParseCerts(bundlePEM)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", wellknown.IdentityBundleFile, err)
	}
	if len(chain[0].URIs) != 1 {
		return nil, fmt.Errorf("%s: want one URI SAN, got %d", wellknown.IdentityCertFile, len(chain[0].URIs))
	}
	id, err := spiffeid.FromURI(chain[0].URIs[0])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", wellknown.IdentityCertFile, err)
	}
	return &Identity{Key: key, Chain: chain, Roots: roots, ID: id}, nil
}

// Source serves an identity directory to TLS (go-spiffe's tlsconfig): it
// implements x509svid.Source and x509bundle.Source and rereads the files
// whenever the sidecar has written a new set, so every handshake uses the
// current certificate and trust bundle.
type Source struct {
	dir string
	mu  sync.Mutex
	cur *Identity
}

// NewSource reads dir; it fails if there is no identity yet.
func NewSource(dir string) (*Source, error) {
	s := &Source{dir: dir}
	if _, err := s.get(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Source) get() (*Identity, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil && s.cur.Source == Version(s.dir) {
		return s.cur, nil
	}
	id, err := Load(s.dir)
	if err != nil {
		if s.cur != nil {
			return s.cur, nil // keep serving the last good set
		}
		return nil, err
	}
	s.cur = id
	return id, nil
}

// GetX509SVID implements x509svid.Source.
func (s *Source) GetX509SVID() (*x509svid.SVID, error) {
	id, err := s.get()
	if err != nil {
		return nil, err
	}
	return &x509svid.SVID{ID: id.ID, Certificates: id.Chain, PrivateKey: id.Key}, nil
}

// GetX509BundleForTrustDomain implements x509bundle.Source.
func (s *Source) GetX509BundleForTrustDomain(td spiffeid.TrustDomain) (*x509bundle.Bundle, error) {
	id, err := s.get()
	if err != nil {
		return nil, err
	}
	if td != id.ID.TrustDomain() {
		return nil, fmt.Errorf("no bundle for trust domain %q", td)
	}
	return x509bundle.FromX509Authorities(td, id.Roots), nil
}
