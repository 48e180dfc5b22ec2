package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// KubernetesVersion is the version `make tools` builds; the binaries live in
// $TRELLIS_CACHE/k8s/<version> (default ~/.cache/trellis) unless
// TRELLIS_K8S_BIN names another folder.
const KubernetesVersion = "v1.36.3"

const adminToken = "trellis-test-admin-token"

// BinDir is where the Kubernetes and etcd binaries are.
func BinDir() string {
	if d := os.Getenv("TRELLIS_K8S_BIN"); d != "" {
		return d
	}
	cache := os.Getenv("TRELLIS_CACHE")
	if cache == "" {
		if d, err := os.UserCacheDir(); err == nil {
			cache = filepath.Join(d, "trellis")
		}
	}
	return filepath.Join(cache, "k8s", KubernetesVersion)
}

// Options choose which components run beside etcd and the apiserver.
type Options struct {
	ControllerManager bool
	Scheduler         bool
	// APIServerFlags are extra kube-apiserver flags (--name=value).
	APIServerFlags []string
}

// ControlPlane is a running control plane.
type ControlPlane struct {
	t          testing.TB
	Dir        string
	EtcdURL    string
	APIURL     string
	Kubeconfig string
	Config     *rest.Config
	Client     kubernetes.Interface

	pki       *pki
	opts      Options
	apiPort   int
	etcd      *proc
	apiserver *proc
	cm, sched *proc
}

type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// Start runs a control plane for the test and stops it when the test ends.
// It fails the test (it never skips) when the binaries are missing: run
// `make tools`.
func Start(t testing.TB, opts Options) *ControlPlane {
	t.Helper()
	bin := BinDir()
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			t.Fatalf("Kubernetes binary %s missing in %s: run `make tools` (%v)", b, bin, err)
		}
	}
	dir := t.TempDir()
	p, err := newPKI(dir)
	if err != nil {
		t.Fatalf("failed to create test PKI: %v", err)
	}
	cp := &ControlPlane{t: t, Dir: dir, pki: p, opts: opts}
	t.Cleanup(cp.Stop)

	etcdPort, peerPort := freePort(t), freePort(t)
	cp.EtcdURL = fmt.Sprintf("http://127.0.0.1:%d", etcdPort)
	peer := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	cp.etcd = cp.start("etcd", filepath.Join(bin, "etcd"),
		"--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+cp.EtcdURL, "--advertise-client-urls="+cp.EtcdURL,
		"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer,
		"--initial-cluster=default="+peer, "--unsafe-no-fsync=true",
		"--log-level=warn")

	if err := os.WriteFile(filepath.Join(dir, "tokens.csv"), []byte(adminToken+",admin,admin,system:masters\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cp.apiPort = freePort(t)
	cp.APIURL = fmt.Sprintf("https://127.0.0.1:%d", cp.apiPort)
	cp.Kubeconfig = filepath.Join(dir, "admin.kubeconfig")
	if err := os.WriteFile(cp.Kubeconfig, cp.kubeconfig(), 0o600); err != nil {
		t.Fatal(err)
	}
	cp.Config = &rest.Config{
		Host:            cp.APIURL,
		BearerToken:     adminToken,
		TLSClientConfig: rest.TLSClientConfig{CAData: p.caPEM},
		QPS:             200,
		Burst:           400,
	}
	cp.Client = kubernetes.NewForConfigOrDie(cp.Config)
	cp.StartAPIServer()

	if opts.ControllerManager {
		cp.cm = cp.start("kube-controller-manager", filepath.Join(bin, "kube-controller-manager"),
			"--kubeconfig="+cp.Kubeconfig, "--authentication-kubeconfig="+cp.Kubeconfig, "--authorization-kubeconfig="+cp.Kubeconfig,
			"--leader-elect=false", "--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", freePort(t)),
			"--service-account-private-key-file="+p.saKey, "--root-ca-file="+p.caCert,
			"--cluster-signing-cert-file="+p.caCert, "--cluster-signing-key-file="+p.caKey,
			"--use-service-account-credentials=true", "--concurrent-deployment-syncs=20", "--concurrent-replicaset-syncs=20",
			"--kube-api-qps=200", "--kube-api-burst=400")
	}
	if opts.Scheduler {
		cp.sched = cp.start("kube-scheduler", filepath.Join(bin, "kube-scheduler"),
			"--kubeconfig="+cp.Kubeconfig, "--authentication-kubeconfig="+cp.Kubeconfig, "--authorization-kubeconfig="+cp.Kubeconfig,
			"--leader-elect=false", "--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", freePort(t)))
	}
	return cp
}

// StartAPIServer (re)starts kube-apiserver on its port and waits for /readyz.
func (cp *ControlPlane) StartAPIServer() {
	p := cp.pki
	args := []string{
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", cp.apiPort),
		"--etcd-servers=" + cp.EtcdURL,
		"--tls-cert-file=" + p.servingCert, "--tls-private-key-file=" + p.servKey,
		"--client-ca-file=" + p.caCert, "--token-auth-file=" + filepath.Join(cp.Dir, "tokens.csv"),
		"--authorization-mode=Node,RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + p.saPub, "--service-account-signing-key-file=" + p.saKey,
		"--service-cluster-ip-range=10.0.0.0/24", "--advertise-address=127.0.0.1",
		"--disable-admission-plugins=ServiceAccount",
	}
	args = append(args, cp.opts.APIServerFlags...)
	cp.apiserver = cp.start("kube-apiserver", filepath.Join(BinDir(), "kube-apiserver"), args...)
	cp.waitReady(60 * time.Second)
}

// StopAPIServer stops kube-apiserver (for fault tests).
func (cp *ControlPlane) StopAPIServer() {
	cp.apiserver.stop()
}

func (cp *ControlPlane) waitReady(timeout time.Duration) {
	cp.t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(cp.pki.caPEM)
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		select {
		case <-cp.apiserver.done:
			cp.t.Fatalf("kube-apiserver exited during start:\n%s", tail(cp.apiserver.log, 30))
		default:
		}
		req, _ := http.NewRequest(http.MethodGet, cp.APIURL+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		time.Sleep(100 * time.Millisecond)
	}
	cp.t.Fatalf("kube-apiserver not ready after %s (%s):\n%s", timeout, last, tail(cp.apiserver.log, 30))
}

func (cp *ControlPlane) start(name, bin string, args ...string) *proc {
	cp.t.Helper()
	log := filepath.Join(cp.Dir, name+".log")
	f, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		cp.t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		cp.t.Fatalf("failed to start %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p
}

func (p *proc) stop() {
	if p == nil {
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// Stop stops the components in order: scheduler, controller-manager,
// apiserver, then etcd (stopping apiserver and etcd at once can hang).
func (cp *ControlPlane) Stop() {
	if cp.t.Failed() {
		for _, p := range []*proc{cp.sched, cp.cm, cp.apiserver, cp.etcd} {
			if p != nil {
				cp.t.Logf("--- %s log (tail) ---\n%s", p.name, tail(p.log, 15))
			}
		}
	}
	for _, p := range []*proc{cp.sched, cp.cm, cp.apiserver, cp.etcd} {
		p.stop()
	}
}

// Kubectl runs the real kubectl against the control plane.
func (cp *ControlPlane) Kubectl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(BinDir(), "kubectl"), append([]string{"--kubeconfig=" + cp.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (cp *ControlPlane) kubeconfig() []byte {
	return fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: admin
  user:
    token: %s
contexts:
- name: test
  context: {cluster: test, user: admin}
current-context: test
`, cp.APIURL, cp.pki.caCert, adminToken)
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
