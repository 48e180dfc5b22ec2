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

// With EtcdPeerNames, an etcd CA of its own signs one peer certificate
// for server and client authentication; renewal keeps that CA, and a PKI
// made without peers gets them added once.
func TestEtcdPeer(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	o := ControlPlaneOptions{
		Name: "fleet", APIServerNames: []string{"api.example.svc"}, AdminUser: "admin", TTL: 24 * time.Hour, Now: now,
		EtcdPeerNames: []string{"*.peers.example.svc"},
	}
	files, err := NewControlPlane(o)
	if err != nil {
		t.Fatal(err)
	}
	parse := func(files map[string][]byte, name string) *x509.Certificate {
		t.Helper()
		c, err := ParseCerts(files[name])
		if err != nil || len(c) != 1 {
			t.Fatalf("%s: %v", name, err)
		}
		return c[0]
	}
	verify := func(files map[string][]byte, leaf, root, name string, usage x509.ExtKeyUsage) error {
		roots := x509.NewCertPool()
		roots.AddCert(parse(files, root))
		_, err := parse(files, leaf).Verify(x509.VerifyOptions{DNSName: name, Roots: roots, CurrentTime: o.Now.Add(time.Hour), KeyUsages: []x509.ExtKeyUsage{usage}})
		return err
	}
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if err := verify(files, EtcdPeerCert, EtcdCACert, "m-1.peers.example.svc", usage); err != nil {
			t.Errorf("peer certificate, usage %v: %v", usage, err)
		}
	}
	if err := verify(files, EtcdPeerCert, EtcdCACert, "m-1.other.example.svc", x509.ExtKeyUsageServerAuth); err == nil {
		t.Error("the peer certificate verifies for a name outside EtcdPeerNames")
	}
	if err := verify(files, AdminCert, EtcdCACert, "", x509.ExtKeyUsageClientAuth); err == nil {
		t.Error("the admin certificate verifies against the etcd CA: it would be an etcd peer")
	}
	if err := verify(files, EtcdPeerCert, CACert, "m-1.peers.example.svc", x509.ExtKeyUsageServerAuth); err == nil {
		t.Error("the peer certificate verifies against the cluster CA: etcd needs a CA of its own")
	}
	if !slices.Contains(ControlPlaneLeaves(o), EtcdPeerCert) {
		t.Errorf("leaves %v: the peer certificate is not renewed", ControlPlaneLeaves(o))
	}

	o.Now = now.Add(20 * time.Hour)
	renewed, err := RenewControlPlane(files, o)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(files[EtcdCACert], renewed[EtcdCACert]) || !slices.Equal(files[EtcdCAKey], renewed[EtcdCAKey]) {
		t.Error("renewal replaced the etcd CA: members still running the old peer certificate would not trust the new one")
	}
	if got, want := parse(renewed, EtcdPeerCert).NotAfter, o.Now.Add(o.TTL); !got.Equal(want) {
		t.Errorf("renewed peer certificate expires %s, want %s", got, want)
	}
	if err := verify(renewed, EtcdPeerCert, EtcdCACert, "m-2.peers.example.svc", x509.ExtKeyUsageClientAuth); err != nil {
		t.Errorf("renewed peer certificate: %v", err)
	}

	// A PKI made before its etcd had peers: added once, then kept.
	plain := o
	plain.EtcdPeerNames = nil
	old, err := NewControlPlane(plain)
	if err != nil {
		t.Fatal(err)
	}
	if len(old[EtcdCACert]) > 0 {
		t.Fatal("etcd CA made without EtcdPeerNames")
	}
	before := maps.Clone(old)
	if added, err := EnsureEtcdPeer(old, o); err != nil || !added {
		t.Fatalf("EnsureEtcdPeer on a PKI without peers: added %v, %v", added, err)
	}
	if err := verify(old, EtcdPeerCert, EtcdCACert, "m-0.peers.example.svc", x509.ExtKeyUsageServerAuth); err != nil {
		t.Errorf("added peer certificate: %v", err)
	}
	for k, v := range before {
		if !slices.Equal(old[k], v) {
			t.Errorf("EnsureEtcdPeer changed %s", k)
		}
	}
	again := maps.Clone(old)
	if added, err := EnsureEtcdPeer(again, o); err != nil || added || !maps.EqualFunc(again, old, slices.Equal) {
		t.Errorf("EnsureEtcdPeer on a PKI with peers: added %v, %v (want untouched)", added, err)
	}
	// The CA without its peer certificate: issued from that CA.
	half := maps.Clone(old)
	delete(half, EtcdPeerCert)
	delete(half, EtcdPeerKey)
	if added, err := EnsureEtcdPeer(half, o); err != nil || !added || !slices.Equal(half[EtcdCACert], old[EtcdCACert]) {
		t.Fatalf("EnsureEtcdPeer with the CA alone: added %v, %v, or the CA replaced", added, err)
	}
	if err := verify(half, EtcdPeerCert, EtcdCACert, "m-0.peers.example.svc", x509.ExtKeyUsageServerAuth); err != nil {
		t.Errorf("peer certificate issued from the kept CA: %v", err)
	}
}
