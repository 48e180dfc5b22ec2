package controlplane

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"path/filepath"
	"time"

	"github.com/trellis-dev/trellis/internal/fsync"
	"github.com/trellis-dev/trellis/internal/pki"
)

// files are the control plane's certificates and keys.
type files struct {
	caCert, caKey        string
	servingCert, servKey string
	saKey, saPub         string
	caPEM                []byte
	ca                   *pki.KeyPair
}

// newFiles makes a CA, a serving certificate for 127.0.0.1/localhost signed
// by it, and a service-account signing key.
func newFiles(dir string) (*files, error) {
	p := &files{
		caCert: filepath.Join(dir, "ca.crt"), caKey: filepath.Join(dir, "ca.key"),
		servingCert: filepath.Join(dir, "apiserver.crt"), servKey: filepath.Join(dir, "apiserver.key"),
		saKey: filepath.Join(dir, "sa.key"), saPub: filepath.Join(dir, "sa.pub"),
	}
	ca, err := selfSignedCA("trellis-test-ca", 1)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caCert, caKey := ca.Cert, ca.Key.(*ecdsa.PrivateKey)
	p.ca = ca
	p.caPEM = pki.EncodeCerts(caCert)
	if err := fsync.WriteFile(p.caCert, p.caPEM, 0o600); err != nil {
		return nil, err
	}
	caKeyDER, _ := x509.MarshalECPrivateKey(caKey)
	if err := pki.WritePEM(p.caKey, "EC PRIVATE KEY", caKeyDER); err != nil {
		return nil, err
	}

	servKey, err := pki.NewKey()
	if err != nil {
		return nil, err
	}
	serving, err := ca.Issue(&x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")},
		DNSNames:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
	}, servKey.Public())
	if err != nil {
		return nil, err
	}
	if err := pki.WritePEM(p.servingCert, "CERTIFICATE", serving.Raw); err != nil {
		return nil, err
	}
	servKeyDER, _ := x509.MarshalECPrivateKey(servKey)
	if err := pki.WritePEM(p.servKey, "EC PRIVATE KEY", servKeyDER); err != nil {
		return nil, err
	}

	// The service-account key stays RSA, as kubeadm makes it.
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("generate the service-account key: %w", err)
	}
	if err := pki.WritePEM(p.saKey, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(saKey)); err != nil {
		return nil, err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("failed to marshal service-account key: %w", err)
	}
	if err := pki.WritePEM(p.saPub, "PUBLIC KEY", pubDER); err != nil {
		return nil, err
	}
	return p, nil
}

// selfSignedCA is a CA valid from an hour ago for a day.
func selfSignedCA(cn string, serial int64) (*pki.KeyPair, error) {
	key, err := pki.NewKey()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	cert, err := pki.SelfSign(&x509.Certificate{
		SerialNumber:          big.NewInt(serial),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}, key)
	if err != nil {
		return nil, err
	}
	return &pki.KeyPair{Cert: cert, Key: key}, nil
}
