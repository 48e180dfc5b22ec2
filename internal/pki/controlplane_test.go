package pki

import (
	"crypto/x509"
	"slices"
	"testing"
	"time"
)

func TestNewControlPlane(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	files, err := NewControlPlane(ControlPlaneOptions{
		Name: "fleet", APIServerNames: []string{"api.example.svc", "127.0.0.1"},
		Serving: map[string][]string{"webhook": {"hook.example.svc"}}, AdminUser: "admin", TTL: 24 * time.Hour, Now: now,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{CACert, CAKey, APIServerCert, APIServerKey, FrontProxyCACert, FrontProxyCert, FrontProxyKey, SAKey, SAPub, AdminCert, AdminKey, "webhook.crt", "webhook.key"} {
		if len(files[k]) == 0 {
			t.Errorf("%s missing", k)
		}
	}
	pool := func(name string) *x509.CertPool {
		certs, err := ParseCerts(files[name])
		if err != nil {
			t.Fatal(err)
		}
		p := x509.NewCertPool()
		p.AddCert(certs[0])
		return p
	}
	leaf := func(name string) *x509.Certificate {
		certs, err := ParseCerts(files[name])
		if err != nil {
			t.Fatal(err)
		}
		return certs[0]
	}
	at := now.Add(time.Hour)
	for _, c := range []struct {
		file, name string
		usage      x509.ExtKeyUsage
		roots      string
	}{
		{APIServerCert, "api.example.svc", x509.ExtKeyUsageServerAuth, CACert},
		{APIServerCert, "127.0.0.1", x509.ExtKeyUsageServerAuth, CACert},
		{"webhook.crt", "hook.example.svc", x509.ExtKeyUsageServerAuth, CACert},
		{AdminCert, "", x509.ExtKeyUsageClientAuth, CACert},
		{FrontProxyCert, "", x509.ExtKeyUsageClientAuth, FrontProxyCACert},
	} {
		if _, err := leaf(c.file).Verify(x509.VerifyOptions{DNSName: c.name, Roots: pool(c.roots), CurrentTime: at, KeyUsages: []x509.ExtKeyUsage{c.usage}}); err != nil {
			t.Errorf("%s for %q: %v", c.file, c.name, err)
		}
	}
	if _, err := leaf(FrontProxyCert).Verify(x509.VerifyOptions{Roots: pool(CACert), CurrentTime: at, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Error("the front-proxy client verifies against the cluster CA: it must have its own")
	}
	if a := leaf(AdminCert); a.Subject.CommonName != "admin" || !slices.Equal(a.Subject.Organization, []string{"system:masters"}) {
		t.Errorf("admin subject %v", a.Subject)
	}
	if _, err := leaf(APIServerCert).Verify(x509.VerifyOptions{DNSName: "api.example.svc", Roots: pool(CACert), CurrentTime: now.Add(25 * time.Hour)}); err == nil {
		t.Error("the serving certificate outlives its TTL")
	}
	if _, err := NewControlPlane(ControlPlaneOptions{Name: "x", Now: now}); err == nil {
		t.Error("no TTL accepted")
	}
}
