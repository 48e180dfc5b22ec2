package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net/url"
	"time"
)

// KeyPair is a CA certificate and its key.
type KeyPair struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// NewKey generates an ECDSA P-256 key, the key type of Trellis's CAs and
// certificates.
func NewKey() (*ecdsa.PrivateKey, error) {
	return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
}

// NewCSR returns a certificate signing request for key with an empty
// subject: the issuer decides the names.
func NewCSR(key crypto.Signer) (*x509.CertificateRequest, error) {
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		return nil, fmt.Errorf("make the CSR: %w", err)
	}
	return x509.ParseCertificateRequest(der)
}

// SelfSign creates the self-signed certificate of tmpl with key.
func SelfSign(tmpl *x509.Certificate, key crypto.Signer) (*x509.Certificate, error) {
	return create(tmpl, tmpl, key.Public(), key)
}

// Issue creates the certificate of tmpl for pub, signed by the key pair.
func (kp *KeyPair) Issue(tmpl *x509.Certificate, pub crypto.PublicKey) (*x509.Certificate, error) {
	return create(tmpl, kp.Cert, pub, kp.Key)
}

func create(tmpl, parent *x509.Certificate, pub crypto.PublicKey, key crypto.Signer) (*x509.Certificate, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, key)
	if err != nil {
		return nil, fmt.Errorf("sign certificate %q: %w", tmpl.Subject.CommonName, err)
	}
	return x509.ParseCertificate(der)
}

// NewRoot creates a self-signed root CA (ECDSA P-256) valid for ttl.
func NewRoot(trustDomain string, ttl time.Duration, now time.Time) (*KeyPair, error) {
	key, err := NewKey()
	if err != nil {
		return nil, fmt.Errorf("failed to generate root key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{Organization: []string{"Trellis"}, CommonName: trustDomain + " root " + now.UTC().Format("20060102T150405Z")},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(ttl),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		URIs:                  []*url.URL{{Scheme: "spiffe", Host: trustDomain}},
	}
	cert, err := SelfSign(tmpl, key)
	if err != nil {
		return nil, fmt.Errorf("failed to create root certificate: %w", err)
	}
	return &KeyPair{Cert: cert, Key: key}, nil
}

// NewIntermediate creates a signing CA under parent, valid for ttl (capped
// at the parent's expiry).
func NewIntermediate(parent *KeyPair, trustDomain string, ttl time.Duration, now time.Time) (*KeyPair, error) {
	key, err := NewKey()
	if err != nil {
		return nil, fmt.Errorf("failed to generate signing key: %w", err)
	}
	notAfter := now.Add(ttl)
	if notAfter.After(parent.Cert.NotAfter) {
		notAfter = parent.Cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{Organization: []string{"Trellis"}, CommonName: trustDomain + " signing " + now.UTC().Format("20060102T150405Z")},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
		URIs:                  []*url.URL{{Scheme: "spiffe", Host: trustDomain}},
	}
	cert, err := parent.Issue(tmpl, key.Public())
	if err != nil {
		return nil, fmt.Errorf("failed to create signing certificate: %w", err)
	}
	return &KeyPair{Cert: cert, Key: key}, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}

// Fingerprint is the SHA-256 of a certificate, hex encoded, for logs.
func Fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return fmt.Sprintf("%x", sum[:8])
}
