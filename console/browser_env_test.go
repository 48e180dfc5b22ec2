package console_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/bootstrap/rollout"
	"github.com/trellis-dev/trellis/controller/inject"

	"github.com/trellis-dev/trellis/console"
	"github.com/trellis-dev/trellis/gateway"
	"github.com/trellis-dev/trellis/governance/quota"
	"github.com/trellis-dev/trellis/internal/oidcdev"
	"github.com/trellis-dev/trellis/internal/testutil/cluster"
)

const (
	registry = "registry.example.com"
	digest   = "@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	password = "correct horse battery staple"
)

var servicesGVR = schema.GroupVersionResource{Group: "workloads.trellis.dev", Version: "v1alpha1", Resource: "trellisservices"}

// browserEnv is a real apiserver with RBAC, the real gateway with the
// console mounted on HTTPS 127.0.0.1, and the oidcdev provider on
// 127.0.0.1 with two users: alice may work in team-a and control AMI
// rollouts, bob may do neither.
type browserEnv struct {
	cp       *cluster.ControlPlane
	rollouts *rollout.VFSStore // the AMI rollout's state store (file://)
	dyn      dynamic.Interface
	console  string // https://127.0.0.1:P/console
	provider string
}

func startBrowserEnv(t *testing.T) *browserEnv {
	t.Helper()
	cp := cluster.Start(t, cluster.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if out, err := cp.Kubectl(ctx, "apply", "--server-side", "-f", "../config/crd/"); err != nil {
		t.Fatalf("install CRDs: %v\n%s", err, out)
	}
	if out, err := cp.Kubectl(ctx, "wait", "--for=condition=Established", "--timeout=60s", "crd", "--all"); err != nil {
		t.Fatalf("CRDs not established: %v\n%s", err, out)
	}
	e := &browserEnv{cp: cp}
	var err error
	if e.dyn, err = dynamic.NewForConfig(cp.Config); err != nil {
		t.Fatal(err)
	}
	kc := cp.Client
	for _, ns := range []string{"trellis-system", "team-a"} {
		_, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		must(t, err)
	}
	_, err = kc.CoreV1().ConfigMaps("trellis-system").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: gateway.PolicyConfigMap},
		Data:       map[string]string{gateway.PolicyKeyRegistries: registry},
	}, metav1.CreateOptions{})
	must(t, err)
	// Real RBAC: alice works in team-a and sees its quota; bob has nothing.
	_, err = kc.RbacV1().Roles("team-a").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "developer"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"workloads.trellis.dev"}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"resourcequotas", "pods", "events"}, Verbs: []string{"list"}},
	}}, metav1.CreateOptions{})
	must(t, err)
	_, err = kc.RbacV1().RoleBindings("team-a").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "developer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "developer"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "oidc:alice@example.com"}},
	}, metav1.CreateOptions{})
	must(t, err)
	// alice may also see the AMI rollouts and pause, resume or abort them.
	_, err = kc.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "rollout-operator"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{console.RolloutGroup}, Resources: []string{console.RolloutResource}, Verbs: []string{"get"}},
		{APIGroups: []string{console.RolloutGroup}, Resources: []string{console.RolloutControl}, Verbs: []string{"update"}},
	}}, metav1.CreateOptions{})
	must(t, err)
	_, err = kc.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "rollout-operator"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "rollout-operator"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "oidc:alice@example.com"}},
	}, metav1.CreateOptions{})
	must(t, err)
	rq, err := kc.CoreV1().ResourceQuotas("team-a").Create(ctx, &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "compute"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceRequestsCPU: resource.MustParse("6"), corev1.ResourcePods: resource.MustParse("40")}},
	}, metav1.CreateOptions{})
	must(t, err)
	rq.Status = corev1.ResourceQuotaStatus{Hard: rq.Spec.Hard, Used: corev1.ResourceList{corev1.ResourceRequestsCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("12")}}
	_, err = kc.CoreV1().ResourceQuotas("team-a").UpdateStatus(ctx, rq, metav1.UpdateOptions{})
	must(t, err)

	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	e.console = "https://" + ln.Addr().String() + console.MountPath
	certFile, keyFile := selfSigned(t, dir)
	p := httptest.NewServer(nil)
	t.Cleanup(p.Close)
	e.provider = p.URL
	h, err := oidcdev.New(oidcdev.Config{
		Issuer: p.URL, ClientID: "trellis-console", ClientSecret: "test-client-secret",
		RedirectURIs: []string{e.console + "/callback"},
		Users:        []oidcdev.User{{ID: "alice", Password: password, Email: "alice@example.com"}, {ID: "bob", Password: password, Email: "bob@example.com"}},
	})
	must(t, err)
	p.Config.Handler = h

	gw, err := gateway.New(gateway.Config{Rest: cp.Config, Listener: ln, TLSCertFile: certFile, TLSKeyFile: keyFile, ClientCAFile: certFile, Audit: io.Discard})
	must(t, err)
	store := filepath.Join(dir, "samples.jsonl")
	writeSamples(t, store, time.Now())
	e.rollouts, err = rollout.NewVFSStore("file://"+filepath.Join(dir, "state"), "dev.example.com")
	must(t, err)
	c, err := console.New(console.Config{
		API: gw.Handler(), SessionKey: []byte(strings.Repeat("s", 32)), BasePath: console.MountPath,
		OIDC:     &console.OIDC{Issuer: p.URL, ClientID: "trellis-console", ClientSecret: "test-client-secret", RedirectURL: e.console + "/callback"},
		Capacity: console.StoreHistory{Path: store},
		Access:   gw.Authorizer(), Rollouts: e.rollouts, RolloutPoll: 200 * time.Millisecond,
	})
	must(t, err)
	gw.Mount(console.MountPath+"/", http.StripPrefix(console.MountPath, c))
	done := make(chan error, 1)
	go func() { done <- gw.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("gateway: %v", err)
		}
	})
	pool := x509.NewCertPool()
	b, err := os.ReadFile(certFile)
	must(t, err)
	pool.AppendCertsFromPEM(b)
	probe := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		resp, err := probe.Get(strings.TrimSuffix(e.console, console.MountPath) + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("gateway not ready: %v", err)
		}
	}
	return e
}

// writeSamples is 21 days of team-a's hourly CPU requests: a daily cycle
// on a trend of 0.1 CPU a day, so the forecast reaches the quota of 6
// within its 30-day horizon.
func writeSamples(t *testing.T, path string, now time.Time) {
	t.Helper()
	var smp []quota.Sample
	start := now.Truncate(time.Hour).Add(-21 * 24 * time.Hour)
	for i := range 21 * 24 {
		ts := start.Add(time.Duration(i) * time.Hour)
		v := 2 + 0.1*float64(i)/24 + 0.4*math.Sin(2*math.Pi*float64(i%24)/24)
		smp = append(smp, quota.Sample{Time: ts, Namespace: "team-a", Usage: map[corev1.ResourceName]resource.Quantity{
			corev1.ResourceRequestsCPU: *resource.NewMilliQuantity(int64(v*1000), resource.DecimalSI),
		}})
	}
	must(t, (quota.Store{Path: path}).Append(smp))
}

// setReady sets a TrellisService's Ready condition, as the controller
// would, with the admin client.
func (e *browserEnv) setReady(t *testing.T, name, status, reason string) {
	t.Helper()
	ctx := context.Background()
	for range 10 {
		u, err := e.dyn.Resource(servicesGVR).Namespace("team-a").Get(ctx, name, metav1.GetOptions{})
		must(t, err)
		cond := map[string]any{"type": "Ready", "status": status, "reason": reason, "message": reason, "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
		must(t, unstructured.SetNestedSlice(u.Object, []any{cond}, "status", "conditions"))
		if _, err = e.dyn.Resource(servicesGVR).Namespace("team-a").UpdateStatus(ctx, u, metav1.UpdateOptions{}); err == nil {
			return
		}
	}
	t.Fatalf("failed to set %s Ready=%s", name, status)
}

// create writes a workload with the admin client (the sample service).
func (e *browserEnv) create(t *testing.T, doc string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	must(t, yaml.Unmarshal([]byte(doc), &u.Object))
	_, err := e.dyn.Resource(servicesGVR).Namespace("team-a").Create(context.Background(), u, metav1.CreateOptions{})
	must(t, err)
}

func service(name, image string) string {
	return fmt.Sprintf(`apiVersion: workloads.trellis.dev/v1alpha1
kind: TrellisService
metadata:
  name: %s
  namespace: team-a
spec:
  replicas: 1
  ports:
  - name: http
    port: 8080
  template:
    containers:
    - name: web
      image: %s
      resources:
        requests: {cpu: 100m, memory: 64Mi}
        limits: {cpu: 100m, memory: 64Mi}
`, name, image)
}

func selfSigned(t *testing.T, dir string) (string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "trellis-gateway"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	must(t, err)
	kb, err := x509.MarshalECPrivateKey(key)
	must(t, err)
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	must(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	must(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600))
	return certFile, keyFile
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// registeredPod creates a pod of TrellisService name, gated on ZooKeeper
// registration, with the registrar's True condition on it.
func (e *browserEnv) registeredPod(t *testing.T, pod, name, znode string) {
	t.Helper()
	ctx := context.Background()
	p, err := e.cp.Client.CoreV1().Pods("team-a").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: pod, Labels: inject.SelectorLabels("TrellisService", name)},
		Spec: corev1.PodSpec{ServiceAccountName: name, NodeName: "node-a", Containers: []corev1.Container{{Name: "app", Image: "x",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}},
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: wellknown.ConditionRegistered}}},
	}, metav1.CreateOptions{})
	must(t, err)
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: wellknown.ConditionRegistered, Status: corev1.ConditionTrue, Reason: "Registered", Message: znode, LastTransitionTime: metav1.Now()}}
	_, err = e.cp.Client.CoreV1().Pods("team-a").UpdateStatus(ctx, p, metav1.UpdateOptions{})
	must(t, err)
}

// event records an event about TrellisService name, as its controller would.
func (e *browserEnv) event(t *testing.T, name, reason, msg string) {
	t.Helper()
	now := metav1.Now()
	_, err := e.cp.Client.CoreV1().Events("team-a").Create(context.Background(), &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: name + "."},
		InvolvedObject: corev1.ObjectReference{Kind: "TrellisService", Namespace: "team-a", Name: name, APIVersion: "workloads.trellis.dev/v1alpha1"},
		Reason:         reason, Message: msg, Type: corev1.EventTypeNormal, Count: 1, FirstTimestamp: now, LastTimestamp: now,
		Source: corev1.EventSource{Component: "trellis-controller"},
	}, metav1.CreateOptions{})
	must(t, err)
}

// pausedRollout puts a paused AMI rollout in the state store, as `trellis
// ami pause` leaves it once its run has stopped: the control plane done,
// the nodes group 2 of 5 replaced, no run holding it; and one finished
// rollout in the history.
func (e *browserEnv) pausedRollout(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	must(t, e.rollouts.Save(ctx, &rollout.State{
		ID: "r1764330000", Cluster: "dev.example.com", Image: "ami-0123456789abcdef0", Status: rollout.StatusPaused, Budget: 2,
		Message: "paused after the canary", Updated: now.Add(-time.Minute), Started: now.Add(-20 * time.Minute),
		Groups: map[string]*rollout.GroupProgress{
			"control-plane": {Name: "control-plane", Strategy: rollout.Strategy{MaxSurge: 1}, Old: []string{"i-c1"}, Replaced: []string{"i-c1"}, Done: true},
			"nodes": {Name: "nodes", Strategy: rollout.Strategy{MaxSurge: 2, Canary: true, Phase: 1},
				Old: []string{"i-1", "i-2", "i-3", "i-4", "i-5"}, Replaced: []string{"i-1", "i-2"}},
		},
	}))
	t1 := time.Unix(1763900000, 0)
	must(t, e.rollouts.Record(ctx, rollout.Record{ID: "r1763900000", Cluster: "dev.example.com", From: "ami-0aaaaaaaaaaaaaaa0", To: "ami-0123456789abcdef0",
		Groups: []string{"control-plane", "nodes"}, Replaced: 6, Total: 6, Started: t1, Finished: t1.Add(50 * time.Minute), Outcome: rollout.StatusDone, Run: "ops-1/4242"}))
}

// rolloutStatus is the rollout's status in the state store.
func (e *browserEnv) rolloutStatus(t *testing.T) rollout.Status {
	t.Helper()
	st, err := e.rollouts.Load(context.Background())
	must(t, err)
	return st.Status
}
