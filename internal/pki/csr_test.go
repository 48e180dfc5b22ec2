package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	mrand "math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// TestParseCSRMatchesX509 holds ParseCSR to crypto/x509: for agents' CSRs,
// other CSRs, and every one of them cut short, extended, or with a byte
// changed, both parse to the same request or both refuse it, and the
// signature checks the same.
func TestParseCSRMatchesX509(t *testing.T) {
	p256, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	_, edKey, _ := ed25519.GenerateKey(rand.Reader)
	var corpus [][]byte
	add := func(key crypto.Signer, tmpl *x509.CertificateRequest) {
		der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
		if err != nil {
			t.Fatal(err)
		}
		corpus = append(corpus, der)
	}
	for range 50 { // agents' CSRs: new keys, signatures of every length
		k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		add(k, &x509.CertificateRequest{})
	}
	add(p256, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "web"}})
	add(p256, &x509.CertificateRequest{DNSNames: []string{"web.shop.svc"}})
	add(p256, &x509.CertificateRequest{SignatureAlgorithm: x509.ECDSAWithSHA384})
	add(p384, &x509.CertificateRequest{})
	add(rsaKey, &x509.CertificateRequest{})
	add(edKey, &x509.CertificateRequest{})
	fast := 0
	check := func(der []byte, what string) {
		t.Helper()
		want, wantErr := x509.ParseCertificateRequest(der)
		got, gotErr := ParseCSR(der)
		if (wantErr == nil) != (gotErr == nil) {
			t.Fatalf("%s: crypto/x509 error %v, ParseCSR error %v", what, wantErr, gotErr)
		}
		if wantErr != nil {
			return
		}
		if parseAgentCSR(der) != nil {
			fast++
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: ParseCSR\n%+v\ncrypto/x509\n%+v", what, got, want)
		}
		if we, ge := want.CheckSignature(), got.CheckSignature(); (we == nil) != (ge == nil) {
			t.Fatalf("%s: signature check: crypto/x509 %v, ParseCSR %v", what, we, ge)
		}
	}
	r := mrand.New(mrand.NewPCG(1, 2))
	for i, der := range corpus {
		check(der, "csr")
		check(append(der[:len(der):len(der)], 0), "trailing byte")
		for n := range len(der) {
			check(der[:n], "cut")
		}
		for range 200 {
			mut := append([]byte(nil), der...)
			mut[r.IntN(len(mut))] ^= byte(1 + r.IntN(255))
			check(mut, "changed byte")
		}
		if i < 50 { // a point off the curve: a byte of its Y, after the outer header (30 81 xx)
			mut := append([]byte(nil), der...)
			mut[3+len(agentTBSHead)+63] ^= 1
			if _, err := x509.ParseCertificateRequest(mut); err == nil || !strings.Contains(err.Error(), "point not on curve") {
				t.Fatalf("the point-off-the-curve case did not reach the point: %v", err)
			}
			check(mut, "point off the curve")
		}
	}
	if fast < 50 {
		t.Fatalf("the agent layout was read for %d CSRs, want at least the 50 agents' CSRs", fast)
	}
}
