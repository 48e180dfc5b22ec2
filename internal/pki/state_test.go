package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"errors"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
)

func csr(t *testing.T, key any) *x509.CertificateRequest {
	t.Helper()
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificateRequest(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newState(t *testing.T, now time.Time) (*State, *KeyPair) {
	t.Helper()
	root, err := NewRoot("trellis.test", 24*time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := NewIntermediate(root, "trellis.test", 12*time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	return NewState(root, signer), root
}

func verify(st *State, chain []*x509.Certificate, at time.Time) error {
	roots, inter := x509.NewCertPool(), x509.NewCertPool()
	for _, r := range st.Roots {
		roots.AddCert(r)
	}
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	_, err := chain[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: at, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	return err
}

func TestSignAndRoundTrip(t *testing.T) {
	now := time.Now()
	st, _ := newState(t, now)
	data, err := st.Data()
	if err != nil {
		t.Fatal(err)
	}
	st2, err := Load(data)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Equal(st2) {
		t.Fatal("Load(Data()) differs")
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	id := spiffeid.RequireFromString("spiffe://trellis.test/ns/shop/sa/web")
	chain, err := st2.Sign(LeafRequest{CSR: csr(t, key), ID: id, DNSNames: []string{"web.shop.svc.cluster.local"}, TTL: time.Hour, Backdate: 5 * time.Minute}, now)
	if err != nil {
		t.Fatal(err)
	}
	leaf := chain[0]
	if leaf.URIs[0].String() != id.String() || leaf.IsCA {
		t.Errorf("leaf URIs %v IsCA %v", leaf.URIs, leaf.IsCA)
	}
	if err := verify(st, chain, now); err != nil {
		t.Fatal(err)
	}
	// Clock skew: a verifier 3 minutes slow accepts it thanks to the
	// backdate; without the backdate it would not.
	if err := verify(st, chain, now.Add(-3*time.Minute)); err != nil {
		t.Errorf("verifier 3 minutes slow: %v", err)
	}
	noBackdate, _ := st.Sign(LeafRequest{CSR: csr(t, key), ID: id, TTL: time.Hour}, now)
	if err := verify(st, noBackdate, now.Add(-3*time.Minute)); err == nil {
		t.Error("a leaf without backdate verified on a slow clock: the skew check proves nothing")
	}
	if err := verify(st, chain, now.Add(61*time.Minute)); err == nil {
		t.Error("an expired leaf verified")
	}
}

func TestSignRefusesBadCSRs(t *testing.T) {
	st, _ := newState(t, time.Now())
	weak, _ := rsa.GenerateKey(rand.Reader, 1024)
	bad := csr(t, weak)
	id := spiffeid.RequireFromString("spiffe://trellis.test/ns/a/sa/b")
	if _, err := st.Sign(LeafRequest{CSR: bad, ID: id, TTL: time.Hour}, time.Now()); !errors.Is(err, ErrBadCSR) {
		t.Errorf("RSA-1024: err = %v, want ErrBadCSR", err)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tampered := csr(t, key)
	tampered.Signature[10] ^= 0xff
	if _, err := st.Sign(LeafRequest{CSR: tampered, ID: id, TTL: time.Hour}, time.Now()); !errors.Is(err, ErrBadCSR) {
		t.Errorf("bad signature: err = %v, want ErrBadCSR", err)
	}
}

func TestRotation(t *testing.T) {
	now := time.Now()
	st, oldRoot := newState(t, now)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	id := spiffeid.RequireFromString("spiffe://trellis.test/ns/shop/sa/web")
	oldLeaf, _ := st.Sign(LeafRequest{CSR: csr(t, key), ID: id, TTL: time.Hour}, now)

	newRoot, _ := NewRoot("trellis.test", 24*time.Hour, now)
	newSigner, _ := NewIntermediate(newRoot, "trellis.test", 12*time.Hour, now)
	if _, err := st.Use(newSigner); err == nil {
		t.Fatal("Use accepted a signer whose root is not trusted yet")
	}
	st = st.Trust(newRoot.Cert)
	if len(st.Roots) != 2 {
		t.Fatalf("roots %d, want 2", len(st.Roots))
	}
	st, err := st.Use(newSigner)
	if err != nil {
		t.Fatal(err)
	}
	newLeaf, _ := st.Sign(LeafRequest{CSR: csr(t, key), ID: id, TTL: time.Hour}, now)
	for name, c := range map[string][]*x509.Certificate{"old": oldLeaf, "new": newLeaf} {
		if err := verify(st, c, now); err != nil {
			t.Errorf("%s leaf during the overlap: %v", name, err)
		}
	}
	if _, err := st.Distrust(newRoot.Cert); err == nil {
		t.Error("Distrust removed the root the active signer chains to")
	}
	st, err = st.Distrust(oldRoot.Cert)
	if err != nil {
		t.Fatal(err)
	}
	if err := verify(st, oldLeaf, now); err == nil {
		t.Error("an old leaf verified after its root was distrusted")
	}
	if err := verify(st, newLeaf, now); err != nil {
		t.Error(err)
	}
}
