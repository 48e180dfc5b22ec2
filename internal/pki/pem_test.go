package pki

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestWritePEMIsOwnerOnly(t *testing.T) {
	key, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "key.pem")
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := WritePEM(path, "PRIVATE KEY", der); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseKey(data)
	if err != nil || !key.Equal(got) {
		t.Fatalf("ParseKey(WritePEM) = %v, %v; want the key back", got, err)
	}
}

func TestIssueUnderSelfSigned(t *testing.T) {
	now := time.Now()
	root, err := NewRoot("trellis.test", time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	key, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	csr, err := NewCSR(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := csr.CheckSignature(); err != nil {
		t.Fatal(err)
	}
	leaf, err := root.Issue(&x509.Certificate{SerialNumber: serial(), NotBefore: now, NotAfter: now.Add(time.Minute), DNSNames: []string{"a.test"}}, csr.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(root.Cert)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "a.test"}); err != nil {
		t.Error(err)
	}
	certs, err := ParseCerts(EncodeCerts(root.Cert, leaf))
	if err != nil || len(certs) != 2 || !certs[1].Equal(leaf) {
		t.Errorf("ParseCerts(EncodeCerts) = %d certs, %v", len(certs), err)
	}
}
