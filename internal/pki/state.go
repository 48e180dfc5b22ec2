package pki

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
)

// Keys of the CA Secret (and of the state store folder for AWS clusters).
const (
	KeyRoots     = "roots.pem"      // every trusted root: the trust bundle
	KeySigner    = "signer.pem"     // the active signing CA's chain, leaf first, root excluded
	KeySignerKey = "signer-key.pem" // the active signing CA's key
)

// State is the authority an issuer runs with: the trust bundle and the
// active signing CA.
type State struct {
	Roots  []*x509.Certificate
	Signer *KeyPair
	// Chain is the signing CA's certificate followed by any intermediates up
	// to, not including, its root.
	Chain []*x509.Certificate

	leafOnce sync.Once
	leaf     *leafEncoder
}

// NewState returns a state with one root and a signer under it.
func NewState(root, signer *KeyPair) *State {
	return &State{Roots: []*x509.Certificate{root.Cert}, Signer: signer, Chain: []*x509.Certificate{signer.Cert}}
}

// Load parses a state from its Secret data and checks that the signer
// chains to a trusted root.
func Load(data map[string][]byte) (*State, error) {
	roots, err := ParseCerts(data[KeyRoots])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", KeyRoots, err)
	}
	chain, err := ParseCerts(data[KeySigner])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", KeySigner, err)
	}
	key, err := ParseKey(data[KeySignerKey])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", KeySignerKey, err)
	}
	s := &State{Roots: roots, Signer: &KeyPair{Cert: chain[0], Key: key}, Chain: chain}
	if err := s.check(); err != nil {
		return nil, err
	}
	return s, nil
}

// Data is the Secret data of the state.
func (s *State) Data() (map[string][]byte, error) {
	key, err := EncodeKey(s.Signer.Key)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{KeyRoots: EncodeCerts(s.Roots...), KeySigner: EncodeCerts(s.Chain...), KeySignerKey: key}, nil
}

// Bundle is the trust bundle in PEM.
func (s *State) Bundle() []byte { return EncodeCerts(s.Roots...) }

func (s *State) check() error {
	if !publicKeysEqual(s.Signer.Cert, s.Signer.Key) {
		return errors.New("the signing key does not match the signing certificate")
	}
	pool := x509.NewCertPool()
	for _, r := range s.Roots {
		pool.AddCert(r)
	}
	inter := x509.NewCertPool()
	for _, c := range s.Chain[1:] {
		inter.AddCert(c)
	}
	if _, err := s.Signer.Cert.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return fmt.Errorf("the signing CA does not chain to a trusted root: %w", err)
	}
	return nil
}

func publicKeysEqual(c *x509.Certificate, k crypto.Signer) bool {
	type equaler interface{ Equal(crypto.PublicKey) bool }
	e, ok := c.PublicKey.(equaler)
	return ok && e.Equal(k.Public())
}

// Rotation, in three steps with overlap:
//
//  1. Trust(newRoot): both roots are in the bundle; the old signer signs.
//     Wait until every pod holds the new bundle (one bundle refresh).
//  2. Use(newSigner): leaves are signed under the new root; peers still
//     trust leaves signed under the old one.
//  3. Distrust(oldRoot) once every old leaf has expired (the maximum leaf
//     lifetime after step 2).

// Trust adds a root to the bundle.
func (s *State) Trust(root *x509.Certificate) *State {
	n := s.clone()
	if !slices.ContainsFunc(n.Roots, root.Equal) {
		n.Roots = append(n.Roots, root)
	}
	return n
}

// Use switches the signing CA; it must chain to a trusted root.
func (s *State) Use(signer *KeyPair, chain ...*x509.Certificate) (*State, error) {
	n := s.clone()
	n.Signer = signer
	n.Chain = append([]*x509.Certificate{signer.Cert}, chain...)
	if err := n.check(); err != nil {
		return nil, err
	}
	return n, nil
}

// Distrust removes a root from the bundle; the active signer must not
// chain to it.
func (s *State) Distrust(root *x509.Certificate) (*State, error) {
	n := s.clone()
	n.Roots = slices.DeleteFunc(n.Roots, root.Equal)
	if len(n.Roots) == len(s.Roots) {
		return nil, fmt.Errorf("root %s is not trusted", Fingerprint(root))
	}
	if err := n.check(); err != nil {
		return nil, fmt.Errorf("cannot distrust root %s: %w", Fingerprint(root), err)
	}
	return n, nil
}

func (s *State) clone() *State {
	return &State{Roots: slices.Clone(s.Roots), Signer: s.Signer, Chain: slices.Clone(s.Chain)}
}

// LeafRequest is what an issuer decided a caller gets.
type LeafRequest struct {
	CSR      *x509.CertificateRequest
	ID       spiffeid.ID
	DNSNames []string
	TTL      time.Duration
	// Backdate sets NotBefore this far in the past, so that peers whose
	// clocks run a few minutes slow accept a fresh certificate.
	Backdate time.Duration
}

// ErrBadCSR marks a CSR the issuer refuses (bad signature, weak key).
var ErrBadCSR = errors.New("bad certificate signing request")

// Sign issues a leaf certificate for req and returns the chain to present
// (leaf first, root excluded). The CSR contributes only its public key: the
// identity and names are the issuer's decision.
func (s *State) Sign(req LeafRequest, now time.Time) ([]*x509.Certificate, error) {
	der, _, err := s.SignDER(req, now)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("failed to parse the certificate just signed: %w", err)
	}
	return append([]*x509.Certificate{leaf}, s.Chain...), nil
}

// SignDER is Sign for a server that only sends the certificate on: it
// returns the leaf's DER and its validity, and does not parse the
// certificate it just made back into a structure (crypto/x509 has
// already checked its signature).
func (s *State) SignDER(req LeafRequest, now time.Time) ([]byte, Validity, error) {
	if err := req.CSR.CheckSignature(); err != nil {
		return nil, Validity{}, fmt.Errorf("%w: %w", ErrBadCSR, err)
	}
	if err := allowedKey(req.CSR.PublicKey); err != nil {
		return nil, Validity{}, err
	}
	v := Validity{NotBefore: now.Add(-req.Backdate), NotAfter: now.Add(req.TTL)}
	if v.NotAfter.After(s.Signer.Cert.NotAfter) {
		v.NotAfter = s.Signer.Cert.NotAfter
	}
	var der []byte
	var err error
	if enc := s.leafEncoder(); enc != nil {
		var key []byte
		if key, err = spki(req.CSR.PublicKey, req.CSR.RawSubjectPublicKeyInfo); err == nil {
			der, err = enc.sign(serial(), v, key, req.DNSNames, req.ID.String())
		}
	} else {
		tmpl := leafTemplate(serial(), v)
		tmpl.URIs, tmpl.DNSNames = []*url.URL{req.ID.URL()}, req.DNSNames
		der, err = x509.CreateCertificate(rand.Reader, tmpl, s.Signer.Cert, req.CSR.PublicKey, s.Signer.Key)
	}
	if err != nil {
		return nil, Validity{}, fmt.Errorf("failed to sign the certificate of %s: %w", req.ID, err)
	}
	return der, v, nil
}

// leafEncoder is the signer's leaf encoder, made on first use; nil when
// crypto/x509 signs (a signer key that is not ECDSA, or any error, which
// crypto/x509 then reports itself).
func (s *State) leafEncoder() *leafEncoder {
	s.leafOnce.Do(func() { s.leaf, _ = newLeafEncoder(s.Signer) })
	return s.leaf
}

// Validity is a certificate's validity window.
type Validity struct {
	NotBefore, NotAfter time.Time
}

// allowedKey refuses the key types and sizes the issuer does not sign.
func allowedKey(pub crypto.PublicKey) error {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() && k.Curve != elliptic.P384() {
			return fmt.Errorf("%w: ECDSA curve %s not allowed", ErrBadCSR, k.Curve.Params().Name)
		}
	case *rsa.PublicKey:
		if k.N.BitLen() < 2048 {
			return fmt.Errorf("%w: RSA key of %d bits, want >= 2048", ErrBadCSR, k.N.BitLen())
		}
	case ed25519.PublicKey:
	default:
		return fmt.Errorf("%w: key type %T not allowed", ErrBadCSR, k)
	}
	return nil
}

// Equal reports whether two states have the same roots and signer.
func (s *State) Equal(o *State) bool {
	return bytes.Equal(s.Bundle(), o.Bundle()) && bytes.Equal(EncodeCerts(s.Chain...), EncodeCerts(o.Chain...))
}
