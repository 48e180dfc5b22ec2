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
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net/url"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
)

// caWithKey is a self-signed CA whose key is key, valid until notAfter.
func caWithKey(t *testing.T, key crypto.Signer, notAfter time.Time) *KeyPair {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: fmt.Sprintf("ca %T", key)},
		NotBefore: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), NotAfter: notAfter,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	cert, err := SelfSign(tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return &KeyPair{Cert: cert, Key: key}
}

// TestLeafEncoderMatchesX509: for every signer key the encoder takes and
// every leaf key the issuer accepts, the encoder's TBSCertificate is the
// one crypto/x509.CreateCertificate writes for the same template, byte for
// byte, and the certificate parses, carries what was asked for and
// verifies under its signer.
func TestLeafEncoderMatchesX509(t *testing.T) {
	p256, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	far := time.Date(2060, 1, 1, 0, 0, 0, 0, time.UTC)
	signers := map[string]*KeyPair{
		"P-256 signer":      caWithKey(t, p256, far),
		"P-384 signer":      caWithKey(t, p384, far),
		"Trellis's signer":  nil, // NewIntermediate: a subject key ID, so an authority key ID in the leaf
		"signer without ID": nil,
	}
	root, err := NewRoot("trellis.test", 48*time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if signers["Trellis's signer"], err = NewIntermediate(root, "trellis.test", 24*time.Hour, time.Now()); err != nil {
		t.Fatal(err)
	}
	noID := caWithKey(t, p256, far)
	noID.Cert.SubjectKeyId = nil
	signers["signer without ID"] = noID

	leafP384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	leafRSA, _ := rsa.GenerateKey(rand.Reader, 2048)
	_, leafEd, _ := ed25519.GenerateKey(rand.Reader)
	leafKeys := map[string]crypto.Signer{"P-256": p256, "P-384": leafP384, "RSA": leafRSA, "Ed25519": leafEd}

	high := new(big.Int).Lsh(big.NewInt(1), 126) // top bit of a byte set: a leading zero in DER
	validities := map[string]Validity{
		"UTCTime, fractional seconds": {NotBefore: time.Date(2026, 11, 29, 19, 0, 0, 123456789, time.UTC), NotAfter: time.Date(2026, 11, 29, 20, 5, 0, 999, time.FixedZone("CET", 3600))},
		"GeneralizedTime from 2050":   {NotBefore: time.Date(2049, 12, 31, 23, 59, 59, 0, time.UTC), NotAfter: time.Date(2050, 1, 1, 0, 0, 0, 0, time.UTC)},
	}
	id := "spiffe://trellis.test/ns/apps/sa/web"
	dnsSets := [][]string{nil, {"web.apps.svc.cluster.local"}, {"a.example", "b.example", "c.example"}}

	n := 0
	for sname, signer := range signers {
		enc, err := newLeafEncoder(signer)
		if err != nil {
			t.Fatalf("%s: %v", sname, err)
		}
		for kname, leafKey := range leafKeys {
			for vname, v := range validities {
				for _, dns := range dnsSets {
					for _, serial := range []*big.Int{big.NewInt(1), high, serial()} {
						name := fmt.Sprintf("%s, %s leaf, %s, %d DNS names, serial %x", sname, kname, vname, len(dns), serial)
						csr, err := NewCSR(leafKey)
						if err != nil {
							t.Fatal(err)
						}
						key, err := spki(csr.PublicKey, csr.RawSubjectPublicKeyInfo)
						if err != nil {
							t.Fatal(err)
						}
						got, err := enc.sign(serial, v, key, dns, id)
						if err != nil {
							t.Fatalf("%s: encoder: %v", name, err)
						}
						tmpl := leafTemplate(serial, v)
						tmpl.URIs, tmpl.DNSNames = []*url.URL{spiffeid.RequireFromString(id).URL()}, dns
						want, err := x509.CreateCertificate(rand.Reader, tmpl, signer.Cert, leafKey.Public(), signer.Key)
						if err != nil {
							t.Fatalf("%s: crypto/x509: %v", name, err)
						}
						gc, err := x509.ParseCertificate(got)
						if err != nil {
							t.Fatalf("%s: the encoder's certificate does not parse: %v", name, err)
						}
						wc, _ := x509.ParseCertificate(want)
						if !bytes.Equal(gc.RawTBSCertificate, wc.RawTBSCertificate) {
							t.Fatalf("%s: TBSCertificate differs from crypto/x509's:\n got %x\nwant %x", name, gc.RawTBSCertificate, wc.RawTBSCertificate)
						}
						if gc.SignatureAlgorithm != wc.SignatureAlgorithm {
							t.Fatalf("%s: signature algorithm %v, crypto/x509 %v", name, gc.SignatureAlgorithm, wc.SignatureAlgorithm)
						}
						if err := gc.CheckSignatureFrom(signer.Cert); err != nil {
							t.Fatalf("%s: signature: %v", name, err)
						}
						n++
					}
				}
			}
		}
	}
	if want := len(signers) * len(leafKeys) * len(validities) * len(dnsSets) * 3; n != want {
		t.Fatalf("compared %d leaves, want %d", n, want)
	}
	t.Logf("%d leaves byte-identical to crypto/x509's", n)
}

// TestSignDERWithoutFastPath: a signer key the encoder does not take (RSA)
// is signed by crypto/x509, with the same certificate contents.
func TestSignDERWithoutFastPath(t *testing.T) {
	key, _ := rsa.GenerateKey(rand.Reader, 2048)
	ca := caWithKey(t, key, time.Now().Add(time.Hour))
	if _, err := newLeafEncoder(ca); err == nil {
		t.Fatal("an RSA signer got the ECDSA encoder")
	}
	st := NewState(ca, ca)
	leafKey, _ := NewKey()
	csr, err := NewCSR(leafKey)
	if err != nil {
		t.Fatal(err)
	}
	der, _, err := st.SignDER(LeafRequest{CSR: csr, ID: spiffeid.RequireFromString("spiffe://trellis.test/ns/a/sa/b"), TTL: time.Minute}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	if c.SignatureAlgorithm != x509.SHA256WithRSA || len(c.URIs) != 1 || c.URIs[0].String() != "spiffe://trellis.test/ns/a/sa/b" {
		t.Fatalf("leaf: %v %v", c.SignatureAlgorithm, c.URIs)
	}
}

// TestLeafEncoderRefusesNonASCII: names an IA5String cannot hold are
// refused, as crypto/x509 refuses them.
func TestLeafEncoderRefusesNonASCII(t *testing.T) {
	key, _ := NewKey()
	enc, err := newLeafEncoder(caWithKey(t, key, time.Now().Add(time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	der, _ := x509.MarshalPKIXPublicKey(key.Public())
	if _, err := enc.sign(big.NewInt(1), Validity{NotBefore: now, NotAfter: now}, der, []string{"wéb.example"}, "spiffe://t/x"); err == nil {
		t.Fatal("a non-ASCII DNS name was encoded")
	}
}

// BenchmarkSignDER: a leaf through the encoder against crypto/x509's
// CreateCertificate, same signer, CSR and names.
func BenchmarkSignDER(b *testing.B) {
	now := time.Now()
	root, _ := NewRoot("trellis.test", 48*time.Hour, now)
	signer, _ := NewIntermediate(root, "trellis.test", 24*time.Hour, now)
	st := NewState(root, signer)
	key, _ := NewKey()
	csr, _ := NewCSR(key)
	req := LeafRequest{CSR: csr, ID: spiffeid.RequireFromString("spiffe://trellis.test/ns/a/sa/b"), DNSNames: []string{"web.a.svc.cluster.local"}, TTL: time.Hour}
	b.Run("encoder", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := st.SignDER(req, now); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("crypto-x509", func(b *testing.B) {
		x := NewState(root, signer)
		x.leafOnce.Do(func() {}) // no encoder: crypto/x509 signs
		for b.Loop() {
			if _, _, err := x.SignDER(req, now); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestSPKI: an ECDSA key's own DER is used only when it is crypto/x509's
// encoding; the prefixes are crypto/x509's.
func TestSPKI(t *testing.T) {
	for _, curve := range []elliptic.Curve{elliptic.P256(), elliptic.P384()} {
		key, _ := ecdsa.GenerateKey(curve, rand.Reader)
		want, err := x509.MarshalPKIXPublicKey(key.Public())
		if err != nil {
			t.Fatal(err)
		}
		got, err := spki(key.Public(), want)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: got %x, %v", curve.Params().Name, got, err)
		}
		if &got[0] != &want[0] {
			t.Errorf("%s: the canonical DER was encoded again", curve.Params().Name)
		}
		// The same key with a non-zero count of unused bits in its BIT
		// STRING, which crypto/x509's parser accepts: written anew.
		odd := bytes.Clone(want)
		size := (curve.Params().BitSize + 7) / 8
		odd[len(want)-(2*size+1)-1] = 0x01 // the unused-bits octet before the point
		if got, err := spki(key.Public(), odd); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: a non-canonical encoding was kept: %x, %v", curve.Params().Name, got, err)
		}
	}
	_, ed, _ := ed25519.GenerateKey(rand.Reader)
	want, _ := x509.MarshalPKIXPublicKey(ed.Public())
	if got, err := spki(ed.Public(), nil); err != nil || !bytes.Equal(got, want) {
		t.Errorf("Ed25519: %x, %v", got, err)
	}
}
