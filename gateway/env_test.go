package gateway_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/trellis-dev/trellis/daemons/certs/issuer"
	"github.com/trellis-dev/trellis/gateway"
	gwclient "github.com/trellis-dev/trellis/gateway/client"
	"github.com/trellis-dev/trellis/internal/pki"
	"github.com/trellis-dev/trellis/internal/testutil/cluster"
)

const (
	trustDomain = "trellis.local"
	audience    = "trellis-gateway"
	registry    = "registry.example.com"
)

// env is a real control plane (audit log on, CRDs, RBAC) with a gateway
// in front of it, the issuer's PKI, and callers.
type env struct {
	t      *testing.T
	cp     *cluster.ControlPlane
	dyn    dynamic.Interface
	url    string
	state  *pki.State
	audit  *syncBuffer
	gw     *gateway.Gateway
	cancel context.CancelFunc
}

func startEnv(t *testing.T, cfg gateway.Config) *env {
	t.Helper()
	cp := cluster.Start(t, cluster.Options{AuditLog: true})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if out, err := cp.Kubectl(ctx, "apply", "--server-side", "-f", "../config/crd/"); err != nil {
		t.Fatalf("install CRDs: %v\n%s", err, out)
	}
	if out, err := cp.Kubectl(ctx, "wait", "--for=condition=Established", "--timeout=60s", "crd", "--all"); err != nil {
		t.Fatalf("CRDs not established: %v\n%s", err, out)
	}
	e := &env{t: t, cp: cp, cancel: cancel, audit: &syncBuffer{}}
	var err error
	if e.dyn, err = dynamic.NewForConfig(cp.Config); err != nil {
		t.Fatal(err)
	}
	root, err := pki.NewRoot(trustDomain, time.Hour*24, time.Now().Add(-4*time.Hour))
	must(t, err)
	signer, err := pki.NewIntermediate(root, trustDomain, time.Hour*20, time.Now().Add(-4*time.Hour))
	must(t, err)
	e.state = pki.NewState(root, signer)

	for _, ns := range []string{"trellis-system", "team-a", "team-b", "other"} {
		_, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		must(t, err)
	}
	e.configMap("trellis-system", issuer.BundleConfigMap, map[string]string{issuer.BundleKey: string(e.state.Bundle())})
	e.configMap("trellis-system", gateway.PolicyConfigMap, map[string]string{gateway.PolicyKeyRegistries: registry + "\n# comment\nghcr.io/acme\n"})
	// Real RBAC: team-a's CI submits in team-a; team-b's viewer reads in
	// team-b; nobody has nothing.
	e.role("team-a", "submitter", []string{"create", "update", "patch", "get", "list", "watch"}, "ci", "burst", "probe")
	e.role("team-b", "viewer", []string{"get", "list", "watch"}, "viewer")
	for _, sa := range []string{"team-a/ci", "team-a/burst", "team-a/probe", "team-b/viewer", "other/nobody"} {
		ns, name, _ := strings.Cut(sa, "/")
		_, err := cp.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		must(t, err)
	}

	e.url = e.startGateway(cfg)
	return e
}

// startGateway starts a gateway replica on the env's control plane with
// cfg and returns its URL; the first one is the env's.
func (e *env) startGateway(cfg gateway.Config) string {
	t := e.t
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	chain, key := e.leaf(spiffeid.RequireFromSegments(spiffeid.RequireTrustDomainFromString(trustDomain), "ns", "trellis-system", "sa", "trellis-gateway"), time.Hour, time.Now(), "localhost")
	must(t, os.WriteFile(certFile, pki.EncodeCerts(chain...), 0o600))
	kb, err := pki.EncodeKey(key)
	must(t, err)
	must(t, os.WriteFile(keyFile, kb, 0o600))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	cfg.Rest, cfg.Listener, cfg.TLSCertFile, cfg.TLSKeyFile, cfg.Audit = e.cp.Config, ln, certFile, keyFile, e.audit
	gw, err := gateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if e.gw == nil {
		e.gw = gw
	}
	done := make(chan error, 1)
	go func() { done <- gw.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("gateway: %v", err)
		}
	})
	url := "https://" + ln.Addr().String()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := e.httpClient(nil).Get(url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("gateway not ready: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return url
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (e *env) configMap(ns, name string, data map[string]string) {
	e.t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
	_, err := e.cp.Client.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{})
	if err != nil {
		_, err = e.cp.Client.CoreV1().ConfigMaps(ns).Update(context.Background(), cm, metav1.UpdateOptions{})
	}
	must(e.t, err)
}

func (e *env) role(ns, name string, verbs []string, sas ...string) {
	e.t.Helper()
	ctx := context.Background()
	rules := []rbacv1.PolicyRule{{APIGroups: []string{"workloads.trellis.dev"}, Resources: []string{"trellisservices", "trellisdaemons"}, Verbs: verbs}}
	// Whoever may list workloads may list their pods and events (the
	// status route asks for both).
	if slices.Contains(verbs, "list") {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods", "events"}, Verbs: []string{"list"}})
	}
	_, err := e.cp.Client.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{})
	must(e.t, err)
	var subjects []rbacv1.Subject
	for _, sa := range sas {
		subjects = append(subjects, rbacv1.Subject{Kind: "ServiceAccount", Namespace: ns, Name: sa})
	}
	_, err = e.cp.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: subjects,
		RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name}}, metav1.CreateOptions{})
	must(e.t, err)
}

// leaf issues a certificate for id from the env's issuer state, as the
// issuer does for a pod, valid from now for ttl.
func (e *env) leaf(id spiffeid.ID, ttl time.Duration, now time.Time, dns ...string) ([]*x509.Certificate, *ecdsa.PrivateKey) {
	return issue(e.t, e.state, id, ttl, now, dns...)
}

func issue(t *testing.T, st *pki.State, id spiffeid.ID, ttl time.Duration, now time.Time, dns ...string) ([]*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := pki.NewKey()
	must(t, err)
	csr, err := pki.NewCSR(key)
	must(t, err)
	chain, err := st.Sign(pki.LeafRequest{CSR: csr, ID: id, DNSNames: dns, TTL: ttl}, now)
	must(t, err)
	return chain, key
}

func podID(ns, sa string) spiffeid.ID {
	return spiffeid.RequireFromSegments(spiffeid.RequireTrustDomainFromString(trustDomain), "ns", ns, "sa", sa)
}

// httpClient trusts the env's roots and presents cert, if any.
func (e *env) httpClient(cert *tls.Certificate) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(e.state.Bundle())
	tc := &tls.Config{RootCAs: pool, ServerName: "localhost"}
	if cert != nil {
		tc.Certificates = []tls.Certificate{*cert}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: 30 * time.Second}
}

// mtls is a client presenting chain/key.
func (e *env) mtls(chain []*x509.Certificate, key *ecdsa.PrivateKey) *gwclient.Client {
	c := &tls.Certificate{PrivateKey: key, Leaf: chain[0]}
	for _, x := range chain {
		c.Certificate = append(c.Certificate, x.Raw)
	}
	return &gwclient.Client{Server: e.url, HTTP: e.httpClient(c), Timeout: 30 * time.Second}
}

// pod is a client with the pod identity ns/sa from the issuer.
func (e *env) pod(ns, sa string) *gwclient.Client {
	chain, key := e.leaf(podID(ns, sa), time.Hour, time.Now())
	return e.mtls(chain, key)
}

// token is a client with a ServiceAccount token for aud.
func (e *env) token(ns, sa, aud string) *gwclient.Client {
	e.t.Helper()
	exp := int64(600)
	tr, err := e.cp.Client.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), sa, &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{Audiences: []string{aud}, ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	must(e.t, err)
	return &gwclient.Client{Server: e.url, HTTP: e.httpClient(nil), Token: tr.Status.Token, Timeout: 30 * time.Second}
}

// quota sets team's ResourceQuota with hard CPU requests and what the
// quota controller would report as used.
func (e *env) quota(ns, name, hard, used string) {
	e.t.Helper()
	ctx := context.Background()
	rq, err := e.cp.Client.CoreV1().ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceRequestsCPU: resource.MustParse(hard)}}}, metav1.CreateOptions{})
	must(e.t, err)
	rq.Status = corev1.ResourceQuotaStatus{Hard: rq.Spec.Hard, Used: corev1.ResourceList{corev1.ResourceRequestsCPU: resource.MustParse(used)}}
	_, err = e.cp.Client.CoreV1().ResourceQuotas(ns).UpdateStatus(ctx, rq, metav1.UpdateOptions{})
	must(e.t, err)
}

// service is a TrellisService document.
type svcOpt func(*svcDoc)

type svcDoc struct {
	ns, name, image, cpu string
	replicas             int
	extra                string
}

func image(ref string) svcOpt    { return func(d *svcDoc) { d.image = ref } }
func cpu(q string) svcOpt        { return func(d *svcDoc) { d.cpu = q } }
func replicas(n int) svcOpt      { return func(d *svcDoc) { d.replicas = n } }
func extraSpec(s string) svcOpt  { return func(d *svcDoc) { d.extra = s } }
func namespace(ns string) svcOpt { return func(d *svcDoc) { d.ns = ns } }

const digest = "@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func service(name string, opts ...svcOpt) []byte {
	d := svcDoc{ns: "team-a", name: name, image: registry + "/team-a/web" + digest, cpu: "100m", replicas: 1}
	for _, o := range opts {
		o(&d)
	}
	return []byte(fmt.Sprintf(`apiVersion: workloads.trellis.dev/v1alpha1
kind: TrellisService
metadata:
  name: %s
  namespace: %s
spec:
  replicas: %d
  ports:
  - name: http
    port: 8080
  template:
    containers:
    - name: web
      image: %s
      resources:
        requests: {cpu: %s, memory: 64Mi}
        limits: {cpu: %s, memory: 64Mi}
%s`, d.name, d.ns, d.replicas, d.image, d.cpu, d.cpu, d.extra))
}

// syncBuffer collects the audit stream.
type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
