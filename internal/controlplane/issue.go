package controlplane

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/trellis-dev/trellis/internal/pki"
)

// serials numbers the certificates issued after the first two (the CA's
// and the apiserver's): 101, 102 ...
var serials = func() *atomic.Int64 {
	var n atomic.Int64
	n.Store(100)
	return &n
}()

// CAPEM is the control plane's CA certificate (PEM): it signs the
// apiserver's serving certificate and those IssueServing makes.
func (cp *ControlPlane) CAPEM() []byte { return cp.files.caPEM }

// CAFile is the path of the CA certificate.
func (cp *ControlPlane) CAFile() string { return cp.files.caCert }

// IssueServing writes a serving certificate and key signed by the control
// plane's CA, for 127.0.0.1, localhost and dnsNames, to Dir/<name>.crt and
// Dir/<name>.key: for servers that run beside the apiserver (an aggregated
// apiserver, a webhook) and that it must trust.
func (cp *ControlPlane) IssueServing(name string, dnsNames ...string) (cert, key string, err error) {
	return issue(cp.files.ca, cp.Dir, name, &x509.Certificate{
		Subject:     pkix.Name{CommonName: name},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:    append([]string{"localhost"}, dnsNames...),
	})
}

// issue signs tmpl (validity and key usage filled in) with ca and writes
// dir/<name>.crt and dir/<name>.key.
func issue(ca *pki.KeyPair, dir, name string, tmpl *x509.Certificate) (cert, key string, err error) {
	k, err := pki.NewKey()
	if err != nil {
		return "", "", err
	}
	now := time.Now()
	tmpl.SerialNumber = big.NewInt(serials.Add(1))
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(24*time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	c, err := ca.Issue(tmpl, k.Public())
	if err != nil {
		return "", "", fmt.Errorf("failed to issue %s: %w", name, err)
	}
	cert, key = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := pki.WritePEM(cert, "CERTIFICATE", c.Raw); err != nil {
		return "", "", err
	}
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return "", "", fmt.Errorf("marshal the key of %s: %w", name, err)
	}
	if err := pki.WritePEM(key, "EC PRIVATE KEY", der); err != nil {
		return "", "", err
	}
	return cert, key, nil
}

// frontProxy makes the aggregation layer's front-proxy CA and the client
// certificate kube-apiserver presents to aggregated apiservers, and returns
// the kube-apiserver flags that use them (as kubeadm sets them).
func frontProxy(dir string) ([]string, error) {
	ca, err := selfSignedCA("trellis-test-front-proxy-ca", serials.Add(1))
	if err != nil {
		return nil, err
	}
	caFile := filepath.Join(dir, "front-proxy-ca.crt")
	if err := pki.WritePEM(caFile, "CERTIFICATE", ca.Cert.Raw); err != nil {
		return nil, err
	}
	cert, key, err := issue(ca, dir, "front-proxy-client", &x509.Certificate{
		Subject:     pkix.Name{CommonName: "front-proxy-client"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return nil, err
	}
	return []string{
		"--proxy-client-cert-file=" + cert, "--proxy-client-key-file=" + key,
		"--requestheader-client-ca-file=" + caFile, "--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User", "--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
	}, nil
}
