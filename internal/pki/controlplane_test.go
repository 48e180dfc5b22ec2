package pki

import (
	"crypto/x509"
	"maps"
	"slices"
	"strings"
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

// Renewal keeps the CA and service-account keys and re-issues every other
// certificate from the renewal's time, still under the kept CA.
func TestRenewControlPlane(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	o := ControlPlaneOptions{
		Name: "fleet", APIServerNames: []string{"api.example.svc"},
		Serving: map[string][]string{"webhook": {"hook.example.svc"}}, AdminUser: "admin", TTL: 24 * time.Hour, Now: now,
	}
	old, err := NewControlPlane(o)
	if err != nil {
		t.Fatal(err)
	}
	o.Now = now.Add(20 * time.Hour)
	renewed, err := RenewControlPlane(old, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{CACert, CAKey, SAKey, SAPub} {
		if !slices.Equal(old[k], renewed[k]) {
			t.Errorf("%s changed", k)
		}
	}
	if got, want := ControlPlaneLeaves(o), []string{AdminCert, APIServerCert, FrontProxyCACert, FrontProxyCert, "webhook.crt"}; !slices.Equal(got, want) {
		t.Errorf("leaves %v, want %v", got, want)
	}
	cas, err := ParseCerts(renewed[CACert])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(cas[0])
	for _, name := range ControlPlaneLeaves(o) {
		if slices.Equal(old[name], renewed[name]) {
			t.Errorf("%s not renewed", name)
			continue
		}
		c, err := ParseCerts(renewed[name])
		if err != nil {
			t.Fatal(err)
		}
		if want := o.Now.Add(o.TTL); !c[0].NotAfter.Equal(want) && name != FrontProxyCACert {
			t.Errorf("%s expires %s, want %s", name, c[0].NotAfter, want)
		}
	}
	for _, name := range []string{APIServerCert, AdminCert, "webhook.crt"} {
		c, _ := ParseCerts(renewed[name])
		if _, err := c[0].Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now.Add(30 * time.Hour), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
			t.Errorf("renewed %s past the old expiry: %v", name, err)
		}
	}
	// A CA that would expire before the renewed certificates: refused.
	o.Now = now.Add(10*24*time.Hour - time.Hour)
	if _, err := RenewControlPlane(old, o); err == nil || !strings.Contains(err.Error(), "a new CA is needed") {
		t.Errorf("renewal past the CA's life: %v", err)
	}
	// A CA key that is not the CA's: refused.
	other, _ := NewControlPlane(ControlPlaneOptions{Name: "other", AdminUser: "a", TTL: time.Hour, Now: now})
	bad := maps.Clone(old)
	bad[CAKey] = other[CAKey]
	if _, err := RenewControlPlane(bad, ControlPlaneOptions{Name: "fleet", AdminUser: "admin", TTL: time.Hour, Now: now}); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("mismatched CA key: %v", err)
	}
}
