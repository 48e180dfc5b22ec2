package certs_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/daemons/certs/agent"
	"github.com/trellis-dev/trellis/daemons/certs/issuer"
	"github.com/trellis-dev/trellis/internal/certsapi"
	"github.com/trellis-dev/trellis/internal/pki"
	"github.com/trellis-dev/trellis/internal/testutil/cluster"
	"github.com/trellis-dev/trellis/sidecars/certs"
)

// TestMain lets the test binary play the workloads: the certificate
// sidecar, or a one-shot caller, run as separate processes inside the pod
// cgroups the tests create.
func TestMain(m *testing.M) {
	switch os.Getenv("TRELLIS_CERTS_TEST_ROLE") {
	case "sidecar":
		os.Exit(certs.Main(os.Args[1:], os.Stderr))
	case "call":
		os.Exit(call(os.Args[1], os.Args[2:]))
	case "load":
		os.Exit(load(os.Args[1], os.Args[2], os.Args[3]))
	}
	os.Exit(m.Run())
}

// call makes requests to the agent at socket and prints one status code
// per line: "sign" with a fresh CSR, n times.
func call(socket string, args []string) int {
	n := 1
	if len(args) > 0 {
		var err error
		if n, err = strconv.Atoi(args[0]); err != nil {
			fmt.Println("error", err)
			return 1
		}
	}
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", socket)
	}}}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	csr := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
	for range n {
		start := time.Now()
		resp, err := c.Post("http://agent"+certsapi.SignPath, "application/x-pem-file", bytes.NewReader(csr))
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%d %d %s\n", resp.StatusCode, time.Since(start).Milliseconds(), strings.ReplaceAll(string(bytes.TrimSpace(body)), "\n", " "))
	}
	return 0
}

const ns = "shop"

var td = spiffeid.RequireTrustDomainFromString("trellis.test")

// env is a cluster with an issuer and a node agent for node-a.
type env struct {
	t      testing.TB
	cp     *cluster.ControlPlane
	c      kubernetes.Interface
	dir    string
	cgroup string // test-owned cgroup root under the pids hierarchy

	root   *pki.KeyPair
	is     *issuer.Issuer
	issuer *restartable
	url    string

	agentToken string
	bundle     string // the agent's bundle file, kept from the ConfigMap
	socket     string
	agentStop  context.CancelFunc
	agentDone  chan struct{}
	agentCfg   agent.Config

	pods   map[string]*corev1.Pod
	lister corelisters.PodLister
}

func newEnv(t testing.TB, ttl time.Duration) *env {
	t.Helper()
	if _, err := os.Stat("/sys/fs/cgroup/pids/cgroup.procs"); err != nil {
		t.Fatalf("the attestation tests need the cgroup v1 pids hierarchy and root: %v", err)
	}
	e := &env{t: t, dir: t.TempDir(), pods: map[string]*corev1.Pod{}}
	e.cp = cluster.Start(t, cluster.Options{})
	e.c = e.cp.Client
	e.cgroup = filepath.Join("/sys/fs/cgroup/pids", fmt.Sprintf("trellis-test-%d", time.Now().UnixNano()))
	t.Cleanup(func() { removeCgroups(e.cgroup) })
	ctx := context.Background()
	for _, n := range []string{"trellis-system", ns} {
		e.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	for _, sa := range []struct{ ns, name string }{{"trellis-system", "trellis-cert-agent"}, {ns, "web"}, {ns, "db"}} {
		e.create(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: sa.ns, Name: sa.name}})
	}
	for _, n := range []string{"node-a", "node-b"} {
		e.create(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	agentPod := e.pod("trellis-system", "trellis-cert-agent-a", "trellis-cert-agent", "node-a", "")
	e.pod(ns, "web-1", "web", "node-a", "web")
	e.pod(ns, "db-1", "db", "node-a", "db")
	e.pod(ns, "far-1", "web", "node-b", "web")

	// The agent's credential: a token bound to its pod, so the token
	// review names node-a.
	e.agentToken = e.token("trellis-system", "trellis-cert-agent", agentPod)

	// The authority, in its Secret; the issuer loads and watches it.
	var err error
	e.root, err = pki.NewRoot(td.Name(), 24*time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	signer, err := pki.NewIntermediate(e.root, td.Name(), 12*time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	e.putCA(pki.NewState(e.root, signer))
	// The issuer reads pods from an informer, as in production.
	ictx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	pods := informers.NewSharedInformerFactory(e.c, 0)
	lister := pods.Core().V1().Pods().Lister()
	e.lister = lister
	pods.Start(ictx.Done())
	e.is = issuer.New(issuer.Config{
		TrustDomain: td, TTL: ttl, Client: e.c, Pods: lister,
		AgentUsernames: []string{"system:serviceaccount:trellis-system:trellis-cert-agent"},
	}, nil)
	go e.is.RecordValidities(ictx, 4) // as cmd/trellis-cert-issuer runs it
	if err := e.is.WatchSecret(ictx, e.c, "trellis-system", "trellis-ca", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	go e.is.PublishBundles(ictx, e.c, 100*time.Millisecond)
	serving := e.is.NewServing(spiffeid.RequireFromSegments(td, "ns", "trellis-system", "sa", "trellis-cert-issuer"))
	e.issuer = startRestartable(t, &http.Server{Handler: e.is, TLSConfig: tlsconfig.TLSServerConfig(serving)})
	e.url = "https://" + e.issuer.addr

	// The agent's bundle file follows the published ConfigMap, as a
	// kubelet-mounted ConfigMap would.
	e.bundle = filepath.Join(e.dir, "agent-bundle.pem")
	e.eventually("the trust bundle ConfigMap", 20*time.Second, func() bool {
		cm, err := e.c.CoreV1().ConfigMaps("trellis-system").Get(ctx, issuer.BundleConfigMap, metav1.GetOptions{})
		return err == nil && os.WriteFile(e.bundle, []byte(cm.Data[issuer.BundleKey]), 0o644) == nil
	})
	go func() {
		for ictx.Err() == nil {
			if cm, err := e.c.CoreV1().ConfigMaps("trellis-system").Get(ictx, issuer.BundleConfigMap, metav1.GetOptions{}); err == nil {
				_ = certs.WriteAtomic(e.dir, map[string][]byte{"agent-bundle.pem": []byte(cm.Data[issuer.BundleKey])}, nil)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	tokenFile := filepath.Join(e.dir, "agent-token")
	if err := os.WriteFile(tokenFile, []byte(e.agentToken), 0o600); err != nil {
		t.Fatal(err)
	}
	e.socket = filepath.Join(e.dir, "agent.sock")
	e.agentCfg = agent.Config{
		NodeName: "node-a", Client: e.c, IssuerURL: e.url, TokenFile: tokenFile, AttestTimeout: time.Second, PodRate: 50, PodBurst: 50,
		IssuerTLS: agent.IssuerTLS(td, e.bundle, spiffeid.RequireFromSegments(td, "ns", "trellis-system", "sa", "trellis-cert-issuer")),
	}
	e.startAgent()
	return e
}

func (e *env) create(obj any) {
	e.t.Helper()
	ctx := context.Background()
	var err error
	switch o := obj.(type) {
	case *corev1.Namespace:
		_, err = e.c.CoreV1().Namespaces().Create(ctx, o, metav1.CreateOptions{})
	case *corev1.ServiceAccount:
		_, err = e.c.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *corev1.Node:
		_, err = e.c.CoreV1().Nodes().Create(ctx, o, metav1.CreateOptions{})
	}
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) pod(namespace, name, sa, node, service string) *corev1.Pod {
	e.t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{}},
		Spec:       corev1.PodSpec{ServiceAccountName: sa, NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "app"}}},
	}
	if service != "" {
		p.Labels[wellknown.LabelService] = service
	}
	p, err := e.c.CoreV1().Pods(namespace).Create(context.Background(), p, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.pods[name] = p
	return p
}

func (e *env) token(namespace, sa string, bound *corev1.Pod) string {
	e.t.Helper()
	req := &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: new(int64(3600))}}
	if bound != nil {
		req.Spec.BoundObjectRef = &authnv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: bound.Name, UID: bound.UID}
	}
	tr, err := e.c.CoreV1().ServiceAccounts(namespace).CreateToken(context.Background(), sa, req, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return tr.Status.Token
}

func (e *env) putCA(st *pki.State) {
	e.t.Helper()
	data, err := st.Data()
	if err != nil {
		e.t.Fatal(err)
	}
	ctx := context.Background()
	s, err := e.c.CoreV1().Secrets("trellis-system").Get(ctx, "trellis-ca", metav1.GetOptions{})
	if err != nil {
		_, err = e.c.CoreV1().Secrets("trellis-system").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "trellis-system", Name: "trellis-ca"}, Data: data}, metav1.CreateOptions{})
	} else {
		s.Data = data
		_, err = e.c.CoreV1().Secrets("trellis-system").Update(ctx, s, metav1.UpdateOptions{})
	}
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) startAgent() {
	e.t.Helper()
	a, err := agent.New(e.agentCfg)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.agentStop, e.agentDone = cancel, make(chan struct{})
	go a.Run(ctx)
	e.eventually("agent cache", 10*time.Second, a.HasSynced)
	go func() { defer close(e.agentDone); _ = a.Serve(ctx, e.socket) }()
	e.eventually("agent socket", 5*time.Second, func() bool { _, err := os.Stat(e.socket); return err == nil })
	e.t.Cleanup(e.stopAgent)
}

func (e *env) stopAgent() {
	if e.agentStop != nil {
		e.agentStop()
		<-e.agentDone
		e.agentStop = nil
	}
}

func (e *env) eventually(what string, timeout time.Duration, cond func() bool) {
	e.t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		e.t.Fatalf("timed out after %s waiting for %s", timeout, what)
	}
}

// inPod returns a command that first moves itself into a container cgroup
// of pod uid (as the kubelet's runtime would), then runs the test binary in
// role with args.
func (e *env) inPod(uid types.UID, role string, args ...string) *exec.Cmd {
	e.t.Helper()
	var sh string
	if uid != "" {
		cg := filepath.Join(e.cgroup, "kubepods", "burstable", "pod"+string(uid), fmt.Sprintf("ctr%d", time.Now().UnixNano()))
		if err := os.MkdirAll(cg, 0o755); err != nil {
			e.t.Fatal(err)
		}
		sh = fmt.Sprintf(`echo $$ > %s/cgroup.procs && exec "$@"`, cg)
	} else {
		sh = `exec "$@"` // a host process
	}
	cmd := exec.Command("sh", append([]string{"-c", sh, "sh", os.Args[0]}, args...)...)
	cmd.Env = append(os.Environ(), "TRELLIS_CERTS_TEST_ROLE="+role)
	return cmd
}

// sidecar runs the certificate sidecar of pod name, writing to a new dir.
func (e *env) sidecar(name string) string {
	e.t.Helper()
	dir := filepath.Join(e.dir, "identity-"+name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		e.t.Fatal(err)
	}
	cmd := e.inPod(e.pods[name].UID, "sidecar", "run", "--agent-socket="+e.socket, "--out="+dir, "--bundle-refresh=200ms")
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if e.t.Failed() {
			e.t.Logf("sidecar %s output:\n%s", name, out.String())
		}
	})
	return dir
}

// callAs makes n sign requests from a process in pod uid ("" = a host
// process) to socket and returns the status codes.
func (e *env) callAs(uid types.UID, socket string, n int) []string {
	e.t.Helper()
	out, err := e.inPod(uid, "call", socket, fmt.Sprint(n)).CombinedOutput()
	if err != nil {
		e.t.Fatalf("caller: %v\n%s", err, out)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

func removeCgroups(root string) {
	// Deepest first; processes must be gone (tests kill them).
	var dirs []string
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		for range 50 {
			if err := os.Remove(dirs[i]); err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// restartable is a TLS server on a fixed loopback port that can be stopped
// and started again (the issuer going down and coming back).
type restartable struct {
	t    testing.TB
	srv  *http.Server
	addr string
	mu   sync.Mutex
	cur  *http.Server
}

func startRestartable(t testing.TB, srv *http.Server) *restartable {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &restartable{t: t, srv: srv, addr: l.Addr().String()}
	r.serve(l)
	t.Cleanup(r.Stop)
	return r
}

func (r *restartable) serve(l net.Listener) {
	s := &http.Server{Handler: r.srv.Handler, TLSConfig: r.srv.TLSConfig.Clone()}
	r.mu.Lock()
	r.cur = s
	r.mu.Unlock()
	go func() { _ = s.ServeTLS(l, "", "") }()
}

// Stop closes the listener and every connection.
func (r *restartable) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur != nil {
		_ = r.cur.Close()
		r.cur = nil
	}
}

// Start listens on the same address again.
func (r *restartable) Start() {
	l, err := net.Listen("tcp", r.addr)
	if err != nil {
		r.t.Fatal(err)
	}
	r.serve(l)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func pemCert(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

func typesUID(s string) types.UID { return types.UID(s) }

func bundleIn(e *env, namespace string) string {
	cm, err := e.c.CoreV1().ConfigMaps(namespace).Get(context.Background(), issuer.BundleConfigMap, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return cm.Data[issuer.BundleKey]
}

// newCSR makes a P-256 CSR; t may be nil (in a role process).
func newCSR(t testing.TB) []byte {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		if t == nil {
			panic(err)
		}
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, _ := os.ReadFile(path)
	return string(b)
}
