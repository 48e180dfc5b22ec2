package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/daemons/certs/issuer"
	"github.com/trellis-dev/trellis/gateway"
	"github.com/trellis-dev/trellis/internal/controlplane"
	"github.com/trellis-dev/trellis/internal/pki"
)

const (
	trustDomain = "trellis.local"
	registry    = "registry.example.com"
	gatewayName = "trellis-gateway"
)

// env is a real control plane (audit log on, the CRDs, RBAC) with
// trellis-gateway running beside it as its own process, the issuer's PKI,
// and the callers: half with issuer certificates, half with
// ServiceAccount tokens.
type env struct {
	cp      *controlplane.ControlPlane
	state   *pki.State
	url     string
	pool    *x509.CertPool
	callers []*caller
}

// caller is one identity, able to reach the gateway (gw) and, with a
// token for the apiserver's own audience, the apiserver (direct).
type caller struct {
	ns, sa string
	gw     *http.Client
	token  string // for the gateway; empty for a certificate caller
	direct string // a token kube-apiserver accepts
}

func startEnv(ctx context.Context, dir, gatewayBin string, identities, namespaces int) (*env, error) {
	cp, err := controlplane.Start(dir, controlplane.Options{AuditLog: true,
		ProcessEnv: map[string][]string{gatewayName: {"KUBECONFIG=" + filepath.Join(dir, "admin.kubeconfig")}}})
	if err != nil {
		return nil, err
	}
	e := &env{cp: cp}
	if out, err := cp.Kubectl(ctx, "apply", "--server-side", "-f", "config/crd/"); err != nil {
		return e, fmt.Errorf("failed to install the CRDs: %w\n%s", err, out)
	}
	if out, err := cp.Kubectl(ctx, "wait", "--for=condition=Established", "--timeout=60s", "crd", "--all"); err != nil {
		return e, fmt.Errorf("CRDs not established: %w\n%s", err, out)
	}
	root, err := pki.NewRoot(trustDomain, 24*time.Hour, time.Now().Add(-time.Hour))
	if err != nil {
		return e, err
	}
	signer, err := pki.NewIntermediate(root, trustDomain, 20*time.Hour, time.Now().Add(-time.Hour))
	if err != nil {
		return e, err
	}
	e.state = pki.NewState(root, signer)
	e.pool = x509.NewCertPool()
	e.pool.AppendCertsFromPEM(e.state.Bundle())

	k := cp.Client
	nss := []string{"trellis-system"}
	for i := range namespaces {
		nss = append(nss, fmt.Sprintf("team-%d", i))
	}
	for _, ns := range nss {
		if _, err := k.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return e, err
		}
	}
	for _, cm := range []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "trellis-system", Name: issuer.BundleConfigMap}, Data: map[string]string{issuer.BundleKey: string(e.state.Bundle())}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "trellis-system", Name: gateway.PolicyConfigMap}, Data: map[string]string{gateway.PolicyKeyRegistries: registry + "\n"}},
	} {
		if _, err := k.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return e, err
		}
	}
	for _, ns := range nss[1:] {
		if err := e.team(ctx, ns); err != nil {
			return e, err
		}
	}
	for i := range identities {
		c := &caller{ns: nss[1+i%namespaces], sa: fmt.Sprintf("bench-%d", i)}
		if _, err := k.CoreV1().ServiceAccounts(c.ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: c.sa}}, metav1.CreateOptions{}); err != nil {
			return e, err
		}
		if c.direct, err = e.saToken(ctx, c.ns, c.sa, nil); err != nil {
			return e, err
		}
		var cert *tls.Certificate
		if i%2 == 0 {
			if cert, err = e.podCert(c.ns, c.sa); err != nil {
				return e, err
			}
		} else if c.token, err = e.saToken(ctx, c.ns, c.sa, []string{"trellis-gateway"}); err != nil {
			return e, err
		}
		c.gw = e.httpClient(cert)
		e.callers = append(e.callers, c)
	}
	return e, e.startGateway(ctx, dir, gatewayBin)
}

// team gives a namespace its submitters' Role and binding (every
// ServiceAccount of the namespace) and a roomy ResourceQuota, so the
// quota check does its whole work.
func (e *env) team(ctx context.Context, ns string) error {
	k := e.cp.Client
	if _, err := k.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "submitter"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"workloads.trellis.dev"}, Resources: []string{"trellisservices"}, Verbs: []string{"create", "update", "patch", "get", "list", "watch"},
	}}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, err := k.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "submitter"},
		Subjects: []rbacv1.Subject{{Kind: "Group", Name: "system:serviceaccounts:" + ns}},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "submitter"}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	_, err := k.CoreV1().ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "cpu"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceRequestsCPU: resource.MustParse("100000")}}}, metav1.CreateOptions{})
	return err
}

func (e *env) saToken(ctx context.Context, ns, sa string, aud []string) (string, error) {
	exp := int64(3600)
	tr, err := e.cp.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{Audiences: aud, ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("failed to request a token for %s/%s: %w", ns, sa, err)
	}
	return tr.Status.Token, nil
}

// leaf issues a certificate for id as the issuer does for a pod.
func (e *env) leaf(id spiffeid.ID, dns ...string) ([]*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := pki.NewKey()
	if err != nil {
		return nil, nil, err
	}
	csr, err := pki.NewCSR(key)
	if err != nil {
		return nil, nil, err
	}
	chain, err := e.state.Sign(pki.LeafRequest{CSR: csr, ID: id, DNSNames: dns, TTL: 2 * time.Hour}, time.Now())
	return chain, key, err
}

func (e *env) podCert(ns, sa string) (*tls.Certificate, error) {
	chain, key, err := e.leaf(spiffeid.RequireFromSegments(spiffeid.RequireTrustDomainFromString(trustDomain), "ns", ns, "sa", sa))
	if err != nil {
		return nil, err
	}
	c := &tls.Certificate{PrivateKey: key, Leaf: chain[0]}
	for _, x := range chain {
		c.Certificate = append(c.Certificate, x.Raw)
	}
	return c, nil
}

func (e *env) httpClient(cert *tls.Certificate) *http.Client {
	tc := &tls.Config{RootCAs: e.pool, ServerName: "localhost", MinVersion: tls.VersionTLS12}
	if cert != nil {
		tc.Certificates = []tls.Certificate{*cert}
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tc, MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64}}
}

// startGateway runs trellis-gateway (built from ./cmd/trellis-gateway
// unless bin names one) with the admin kubeconfig, serving the issuer's
// certificate for localhost, and waits until it is ready.
func (e *env) startGateway(ctx context.Context, dir, bin string) error {
	if bin == "" {
		bin = filepath.Join(dir, gatewayName)
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/trellis-gateway").CombinedOutput(); err != nil {
			return fmt.Errorf("failed to build trellis-gateway: %w\n%s", err, out)
		}
	}
	chain, key, err := e.leaf(spiffeid.RequireFromSegments(spiffeid.RequireTrustDomainFromString(trustDomain), "ns", "trellis-system", "sa", gatewayName), "localhost")
	if err != nil {
		return err
	}
	kb, err := pki.EncodeKey(key)
	if err != nil {
		return err
	}
	certFile, keyFile, caFile := filepath.Join(dir, "gw.crt"), filepath.Join(dir, "gw.key"), filepath.Join(dir, "gw-ca.crt")
	for f, b := range map[string][]byte{certFile: pki.EncodeCerts(chain...), keyFile: kb, caFile: e.state.Bundle()} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			return err
		}
	}
	ports, err := controlplane.FreePorts(1)
	if err != nil {
		return err
	}
	e.url = fmt.Sprintf("https://127.0.0.1:%d", ports[0])
	if err := e.cp.StartProcess(gatewayName, bin, fmt.Sprintf("--listen=127.0.0.1:%d", ports[0]),
		"--tls-cert="+certFile, "--tls-key="+keyFile, "--client-ca="+caFile); err != nil {
		return err
	}
	hc := e.httpClient(nil)
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := hc.Get(e.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if exited, log := e.cp.Exited(gatewayName); exited {
			return fmt.Errorf("trellis-gateway exited:\n%s", log)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("trellis-gateway not ready after 60s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// gatewayPID is the gateway process's id.
func (e *env) gatewayPID() int { return e.cp.PIDs()[gatewayName] }
