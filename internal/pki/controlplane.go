package pki

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"net"
	"sort"
	"time"
)

// ControlPlaneOptions name the certificates of a kube-apiserver run as a
// workload (a fleet's apiserver in a management cluster).
type ControlPlaneOptions struct {
	// Name prefixes the CAs' common names.
	Name string
	// APIServerNames are the apiserver's DNS names and IP addresses.
	APIServerNames []string
	// Serving are servers beside the apiserver that it calls and must
	// trust (an aggregated apiserver, a webhook): file prefix -> names.
	Serving map[string][]string
	// EtcdPeerNames, when set, are the DNS names (wildcards allowed) of
	// the peer endpoints of the control plane's etcd members: an etcd CA of
	// its own (so that no other certificate of the control plane is a
	// peer) signs one peer certificate for them, for server and client
	// authentication, which every member presents.
	EtcdPeerNames []string
	// AdminUser is the common name of the client certificate in the
	// system:masters group the control plane's own components use.
	AdminUser string
	// TTL is the certificates' lifetime; the CAs live ten times longer.
	TTL time.Duration
	Now time.Time
}

// Files of a control plane's PKI, by name: ca.crt, ca.key, apiserver.crt,
// apiserver.key, front-proxy-ca.crt, front-proxy-client.crt,
// front-proxy-client.key, sa.key, sa.pub, admin.crt, admin.key, and
// <prefix>.crt and <prefix>.key per Serving entry, and with EtcdPeerNames
// etcd-ca.crt, etcd-ca.key, etcd-peer.crt and etcd-peer.key. kubeadm's
// layout.
const (
	CACert, CAKey                 = "ca.crt", "ca.key"
	APIServerCert, APIServerKey   = "apiserver.crt", "apiserver.key"
	FrontProxyCACert              = "front-proxy-ca.crt"
	FrontProxyCert, FrontProxyKey = "front-proxy-client.crt", "front-proxy-client.key"
	SAKey, SAPub                  = "sa.key", "sa.pub"
	AdminCert, AdminKey           = "admin.crt", "admin.key"
	EtcdCACert, EtcdCAKey         = "etcd-ca.crt", "etcd-ca.key"
	EtcdPeerCert, EtcdPeerKey     = "etcd-peer.crt", "etcd-peer.key"
	// FrontProxyUser is the front-proxy client certificate's common name
	// (the apiserver's --requestheader-allowed-names).
	FrontProxyUser = "front-proxy-client"
)

// NewControlPlane makes the CA, the apiserver's serving certificate, the
// front-proxy CA and client of the aggregation layer, the service-account
// key pair (RSA, as kubeadm makes it), an admin client certificate and the
// serving certificates of Serving, all PEM.
func NewControlPlane(o ControlPlaneOptions) (map[string][]byte, error) {
	if o.TTL <= 0 {
		return nil, fmt.Errorf("control plane PKI %s: no certificate lifetime", o.Name)
	}
	ca, err := newCA(o.Name+" ca", o.Now, 10*o.TTL)
	if err != nil {
		return nil, err
	}
	sa, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("generate the service-account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("failed to marshal the service-account key: %w", err)
	}
	out := map[string][]byte{
		SAKey: pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(sa)}),
		SAPub: pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}),
	}
	if err := putPair(out, "ca", ca); err != nil {
		return nil, err
	}
	if err := issueControlPlane(out, ca, o); err != nil {
		return nil, err
	}
	if _, err := EnsureEtcdPeer(out, o); err != nil {
		return nil, err
	}
	return out, nil
}

// RenewControlPlane re-issues every certificate of a control plane's PKI
// made by NewControlPlane but its CA (kept with the service-account keys,
// so clients that trust the CA and tokens the keys signed stay valid):
// the apiserver's, the admin's, the Serving ones, and the front-proxy CA
// and client (whose CA key is not kept: only the apiserver and its
// aggregated apiservers, restarted with the new files, use them).
func RenewControlPlane(old map[string][]byte, o ControlPlaneOptions) (map[string][]byte, error) {
	if o.TTL <= 0 {
		return nil, fmt.Errorf("control plane PKI %s: no certificate lifetime", o.Name)
	}
	ca, err := keptCA(old, CACert, CAKey, o)
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, name := range []string{CACert, CAKey, SAKey, SAPub} {
		if len(old[name]) == 0 {
			return nil, fmt.Errorf("control plane PKI %s: no %s", o.Name, name)
		}
		out[name] = old[name]
	}
	if err := issueControlPlane(out, ca, o); err != nil {
		return nil, err
	}
	if len(o.EtcdPeerNames) == 0 {
		return out, nil
	}
	if len(old[EtcdCACert]) > 0 {
		out[EtcdCACert], out[EtcdCAKey] = old[EtcdCACert], old[EtcdCAKey]
	}
	if err := issueEtcdPeer(out, o); err != nil {
		return nil, err
	}
	return out, nil
}

// keptCA is the CA a renewal keeps: its key must be its certificate's, and
// it must outlive the certificates issued now.
func keptCA(files map[string][]byte, certFile, keyFile string, o ControlPlaneOptions) (*KeyPair, error) {
	certs, err := ParseCerts(files[certFile])
	if err != nil || len(certs) != 1 {
		return nil, fmt.Errorf("control plane PKI %s: %s: one CA certificate expected: %v", o.Name, certFile, err)
	}
	key, err := ParseKey(files[keyFile])
	if err != nil {
		return nil, fmt.Errorf("control plane PKI %s: %s: %w", o.Name, keyFile, err)
	}
	if !publicKeysEqual(certs[0], key) {
		return nil, fmt.Errorf("control plane PKI %s: %s does not match %s", o.Name, keyFile, certFile)
	}
	if !certs[0].NotAfter.After(o.Now.Add(o.TTL)) {
		return nil, fmt.Errorf("control plane PKI %s: %s expires %s, before certificates renewed now would: a new CA is needed", o.Name, certFile, certs[0].NotAfter.UTC().Format(time.RFC3339))
	}
	return &KeyPair{Cert: certs[0], Key: key}, nil
}

// ControlPlaneLeaves are the certificates NewControlPlane issues for o
// (RenewControlPlane renews them all), by file name.
func ControlPlaneLeaves(o ControlPlaneOptions) []string {
	out := []string{APIServerCert, AdminCert, FrontProxyCACert, FrontProxyCert}
	for prefix := range o.Serving {
		out = append(out, prefix+".crt")
	}
	if len(o.EtcdPeerNames) > 0 {
		out = append(out, EtcdPeerCert)
	}
	sort.Strings(out)
	return out
}

// issueControlPlane issues into out, from ca, every certificate but the
// CA: the apiserver's, Serving's, the admin's, and a front-proxy CA and
// its client.
func issueControlPlane(out map[string][]byte, ca *KeyPair, o ControlPlaneOptions) error {
	fp, err := newCA(o.Name+" front-proxy ca", o.Now, 10*o.TTL)
	if err != nil {
		return err
	}
	out[FrontProxyCACert] = EncodeCerts(fp.Cert)
	leaf := func(parent *KeyPair, name string, tmpl *x509.Certificate) error {
		return issueLeaf(out, parent, name, tmpl, o)
	}
	if err := leaf(ca, "apiserver", serving("kube-apiserver", o.APIServerNames)); err != nil {
		return err
	}
	for prefix, names := range o.Serving {
		if err := leaf(ca, prefix, serving(prefix, names)); err != nil {
			return err
		}
	}
	client := func(cn string, groups ...string) *x509.Certificate {
		return &x509.Certificate{Subject: pkix.Name{CommonName: cn, Organization: groups}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	}
	if err := leaf(ca, "admin", client(o.AdminUser, "system:masters")); err != nil {
		return err
	}
	return leaf(fp, "front-proxy-client", client(FrontProxyUser))
}

// issueLeaf issues <name>.crt and <name>.key from parent, valid for o.TTL
// from o.Now.
func issueLeaf(out map[string][]byte, parent *KeyPair, name string, tmpl *x509.Certificate, o ControlPlaneOptions) error {
	key, err := NewKey()
	if err != nil {
		return err
	}
	tmpl.SerialNumber = serial()
	tmpl.NotBefore, tmpl.NotAfter = o.Now.Add(-time.Hour), o.Now.Add(o.TTL)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	c, err := parent.Issue(tmpl, key.Public())
	if err != nil {
		return fmt.Errorf("failed to issue %s: %w", name, err)
	}
	return putPair(out, name, &KeyPair{Cert: c, Key: key})
}

// serving is a server certificate's template for names (DNS names and IP
// addresses).
func serving(cn string, names []string) *x509.Certificate {
	t := &x509.Certificate{Subject: pkix.Name{CommonName: cn}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			t.IPAddresses = append(t.IPAddresses, ip)
		} else {
			t.DNSNames = append(t.DNSNames, n)
		}
	}
	return t
}

// newCA is a self-signed CA (ECDSA P-256) named cn, valid for ttl.
func newCA(cn string, now time.Time, ttl time.Duration) (*KeyPair, error) {
	key, err := NewKey()
	if err != nil {
		return nil, err
	}
	cert, err := SelfSign(&x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{Organization: []string{"Trellis"}, CommonName: cn},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(ttl),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}, key)
	if err != nil {
		return nil, fmt.Errorf("failed to create CA %s: %w", cn, err)
	}
	return &KeyPair{Cert: cert, Key: key}, nil
}

// putPair stores <name>.crt and <name>.key.
func putPair(out map[string][]byte, name string, kp *KeyPair) error {
	key, err := EncodeKey(kp.Key)
	if err != nil {
		return err
	}
	out[name+".crt"], out[name+".key"] = EncodeCerts(kp.Cert), key
	return nil
}
