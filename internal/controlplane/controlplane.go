package controlplane

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
	"slices"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/trellis-dev/trellis/internal/versions"
)

// KubernetesVersion is the version `make tools` builds (versions.Kubernetes);
// the binaries live in $TRELLIS_CACHE/k8s/<version> (default
// ~/.cache/trellis) unless TRELLIS_K8S_BIN names another folder.
var KubernetesVersion = versions.Kubernetes

const adminToken = "trellis-test-admin-token"

// BinDir is where the Kubernetes and etcd binaries are.
func BinDir() string {
	if d := os.Getenv("TRELLIS_K8S_BIN"); d != "" {
		return d
	}
	return filepath.Join(CacheDir(), "k8s", KubernetesVersion)
}

// CacheDir is where `make tools` builds into: $TRELLIS_CACHE, by default
// ~/.cache/trellis.
func CacheDir() string {
	if d := os.Getenv("TRELLIS_CACHE"); d != "" {
		return d
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "trellis-cache")
	}
	return filepath.Join(d, "trellis")
}

// Options choose which components run beside etcd and the apiserver.
type Options struct {
	ControllerManager bool
	Scheduler         bool
	// APIServerFlags are extra kube-apiserver flags (--name=value).
	APIServerFlags []string
	// ControllerManagerFlags are extra kube-controller-manager flags, e.g.
	// --controllers=*,-node-lifecycle-controller when tests simulate
	// kubelets that do not heartbeat.
	ControllerManagerFlags []string
	// SchedulerFlags are extra kube-scheduler flags.
	SchedulerFlags []string
	// AuditLog records every request's metadata (verb, resource, user
	// agent) in Dir/audit.log, so API cost can be counted per client.
	AuditLog bool
	// Aggregator gives kube-apiserver a front-proxy CA and client
	// certificate, so it can serve APIServices of aggregated apiservers.
	Aggregator bool
	// Env is extra environment (NAME=value) for every process of the
	// plane, e.g. the Go runtime's GOGC.
	Env []string
	// ProcessEnv is extra environment for the process of that name
	// (kube-apiserver, etcd, or one StartProcess ran), after Env: e.g. a
	// memory limit of its own.
	ProcessEnv map[string][]string
}

// ControlPlane is a running control plane.
type ControlPlane struct {
	Dir        string
	EtcdURL    string
	APIURL     string
	Kubeconfig string
	Config     *rest.Config
	Client     kubernetes.Interface

	files     *files
	opts      Options
	apiPort   int
	etcd      *proc
	apiserver *proc
	cm, sched *proc
	// extra are the processes StartProcess ran, in start order.
	extra      []*proc
	proxyFlags []string
}

type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// Start runs a control plane with its files under dir. Call Stop when done.
func Start(dir string, opts Options) (cp *ControlPlane, err error) {
	bin := BinDir()
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			return nil, fmt.Errorf("kubernetes binary %s missing in %s: run `make tools`: %w", b, bin, err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create the control plane's directory: %w", err)
	}
	p, err := newFiles(dir)
	if err != nil {
		return nil, fmt.Errorf("failed to create PKI: %w", err)
	}
	started := &ControlPlane{Dir: dir, files: p, opts: opts}
	cp = started
	// started, not cp: `return nil, err` sets cp to nil before this runs,
	// and what did start must still be stopped.
	defer func() {
		if err != nil {
			started.Stop()
		}
	}()
	if opts.Aggregator {
		if cp.proxyFlags, err = frontProxy(dir); err != nil {
			return nil, fmt.Errorf("failed to create the front-proxy PKI: %w", err)
		}
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	cp.EtcdURL = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	if cp.etcd, err = cp.start("etcd", filepath.Join(bin, "etcd"),
		"--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+cp.EtcdURL, "--advertise-client-urls="+cp.EtcdURL,
		"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer,
		"--initial-cluster=default="+peer, "--unsafe-no-fsync=true",
		"--log-level=warn"); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "tokens.csv"), []byte(adminToken+",admin,admin,system:masters\n"), 0o600); err != nil {
		return nil, fmt.Errorf("write the apiserver's token file: %w", err)
	}
	cp.apiPort = ports[2]
	cp.APIURL = fmt.Sprintf("https://127.0.0.1:%d", cp.apiPort)
	cp.Kubeconfig = filepath.Join(dir, "admin.kubeconfig")
	if err := os.WriteFile(cp.Kubeconfig, cp.kubeconfig(), 0o600); err != nil {
		return nil, fmt.Errorf("write the admin kubeconfig: %w", err)
	}
	cp.Config = &rest.Config{
		Host:            cp.APIURL,
		BearerToken:     adminToken,
		TLSClientConfig: rest.TLSClientConfig{CAData: p.caPEM},
		QPS:             200,
		Burst:           400,
	}
	if cp.Client, err = kubernetes.NewForConfig(cp.Config); err != nil {
		return nil, fmt.Errorf("create a client for the apiserver %s: %w", cp.APIURL, err)
	}
	if err := cp.StartAPIServer(); err != nil {
		return nil, err
	}
	if opts.ControllerManager {
		if cp.cm, err = cp.startServing("kube-controller-manager", filepath.Join(bin, "kube-controller-manager"), func(port int) []string {
			return append([]string{
				"--kubeconfig=" + cp.Kubeconfig, "--authentication-kubeconfig=" + cp.Kubeconfig, "--authorization-kubeconfig=" + cp.Kubeconfig,
				"--leader-elect=false", "--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port),
				"--service-account-private-key-file=" + p.saKey, "--root-ca-file=" + p.caCert,
				"--cluster-signing-cert-file=" + p.caCert, "--cluster-signing-key-file=" + p.caKey,
				"--use-service-account-credentials=true", "--concurrent-deployment-syncs=20", "--concurrent-replicaset-syncs=20",
				"--kube-api-qps=200", "--kube-api-burst=400"}, opts.ControllerManagerFlags...)
		}); err != nil {
			return nil, err
		}
	}
	if opts.Scheduler {
		if cp.sched, err = cp.startServing("kube-scheduler", filepath.Join(bin, "kube-scheduler"), func(port int) []string {
			return append([]string{
				"--kubeconfig=" + cp.Kubeconfig, "--authentication-kubeconfig=" + cp.Kubeconfig, "--authorization-kubeconfig=" + cp.Kubeconfig,
				"--leader-elect=false", "--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port)}, opts.SchedulerFlags...)
		}); err != nil {
			return nil, err
		}
	}
	return cp, nil
}

// PIDs are the running components' process ids by name (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler and those
// StartProcess ran).
func (cp *ControlPlane) PIDs() map[string]int {
	out := map[string]int{}
	for _, p := range append([]*proc{cp.etcd, cp.apiserver, cp.cm, cp.sched}, cp.extra...) {
		if p != nil && p.cmd.Process != nil {
			out[p.name] = p.cmd.Process.Pid
		}
	}
	return out
}

// StartAPIServer (re)starts kube-apiserver on its port and waits for /readyz.
func (cp *ControlPlane) StartAPIServer() error {
	p := cp.files
	args := []string{
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", cp.apiPort),
		"--etcd-servers=" + cp.EtcdURL,
		"--tls-cert-file=" + p.servingCert, "--tls-private-key-file=" + p.servKey,
		"--client-ca-file=" + p.caCert, "--token-auth-file=" + filepath.Join(cp.Dir, "tokens.csv"),
		"--authorization-mode=Node,RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + p.saPub, "--service-account-signing-key-file=" + p.saKey,
		"--service-cluster-ip-range=10.96.0.0/16", "--advertise-address=127.0.0.1",
		"--disable-admission-plugins=ServiceAccount",
	}
	if cp.opts.AuditLog {
		policy := filepath.Join(cp.Dir, "audit-policy.yaml")
		if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
			return fmt.Errorf("write the audit policy: %w", err)
		}
		args = append(args, "--audit-policy-file="+policy, "--audit-log-path="+cp.AuditLogPath(),
			"--audit-log-format=json", "--audit-log-mode=batch", "--audit-log-maxsize=0")
	}
	args = append(args, cp.proxyFlags...)
	args = append(args, cp.opts.APIServerFlags...)
	var err error
	if cp.apiserver, err = cp.start("kube-apiserver", filepath.Join(BinDir(), "kube-apiserver"), args...); err != nil {
		return err
	}
	return cp.waitReady(60 * time.Second)
}

// auditPolicy logs request metadata once per request, when the response
// completes (or starts, for watches).
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
`

// AuditLogPath is where the audit log is written when Options.AuditLog is set.
func (cp *ControlPlane) AuditLogPath() string { return filepath.Join(cp.Dir, "audit.log") }

// StopAPIServer stops kube-apiserver (for fault tests).
func (cp *ControlPlane) StopAPIServer() {
	cp.apiserver.stop()
}

// KillAPIServer sends kube-apiserver SIGKILL and waits for it to exit: a
// crash or a lost machine, with no graceful shutdown (for fault tests).
func (cp *ControlPlane) KillAPIServer() {
	if cp.apiserver.exited() {
		return
	}
	_ = syscall.Kill(-cp.apiserver.cmd.Process.Pid, syscall.SIGKILL)
	<-cp.apiserver.done
}

func (cp *ControlPlane) waitReady(timeout time.Duration) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(cp.files.caPEM)
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		select {
		case <-cp.apiserver.done:
			return fmt.Errorf("kube-apiserver exited during start:\n%s", TailFile(cp.apiserver.log, 30))
		default:
		}
		req, _ := http.NewRequest(http.MethodGet, cp.APIURL+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("kube-apiserver not ready after %s (%s):\n%s", timeout, last, TailFile(cp.apiserver.log, 30))
}

func (cp *ControlPlane) start(name, bin string, args ...string) (*proc, error) {
	log := filepath.Join(cp.Dir, name+".log")
	f, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open the log of %s: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	if env := slices.Concat(cp.opts.Env, cp.opts.ProcessEnv[name]); len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("failed to start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// startServing starts a component that serves on a loopback port of its
// own, chosen just before it starts. Tests run in parallel, and another
// process can bind a free port between the choice and the component's
// bind: a component that exits with "address already in use" is started
// again on another port, up to three times. It returns once the component
// serves (its log says so), or after 30 s (the callers' readiness checks
// follow).
func (cp *ControlPlane) startServing(name, bin string, args func(port int) []string) (*proc, error) {
	for attempt := 1; ; attempt++ {
		p, taken, err := cp.tryServing(name, bin, args)
		if taken && attempt < 3 {
			continue
		}
		return p, err
	}
}

// servingPort chooses a component's port (a test takes it first).
var servingPort = func() (int, error) {
	ports, err := freePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// tryServing starts the component once on a fresh port; taken reports
// that it exited because the port was bound by then.
func (cp *ControlPlane) tryServing(name, bin string, args func(port int) []string) (p *proc, taken bool, err error) {
	port, err := servingPort()
	if err != nil {
		return nil, false, err
	}
	if p, err = cp.start(name, bin, args(port)...); err != nil {
		return nil, false, err
	}
	// Its own log says when it serves: a connection to the port could be
	// accepted by whoever took it.
	serving := fmt.Sprintf("Serving securely on 127.0.0.1:%d", port)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		select {
		case <-p.done:
			log := TailFile(p.log, 20)
			return nil, strings.Contains(log, "address already in use"), fmt.Errorf("%s exited:\n%s", name, log)
		default:
		}
		if b, err := os.ReadFile(p.log); err == nil && strings.Contains(string(b), serving) {
			return p, false, nil
		}
	}
	return p, false, nil
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

// Logs returns the tail of every component's log.
func (cp *ControlPlane) Logs(lines int) string {
	var b strings.Builder
	for _, p := range cp.stopOrder() {
		if p != nil {
			fmt.Fprintf(&b, "--- %s log (tail) ---\n%s\n", p.name, TailFile(p.log, lines))
		}
	}
	return b.String()
}

// Stop stops the components in order: scheduler, controller-manager,
// apiserver, then etcd (stopping apiserver and etcd at once can hang).
func (cp *ControlPlane) Stop() {
	for _, p := range cp.stopOrder() {
		p.stop()
	}
}

// stopOrder is the processes StartProcess ran, newest first, then the
// scheduler, controller-manager, apiserver and etcd.
func (cp *ControlPlane) stopOrder() []*proc {
	var out []*proc
	for i := len(cp.extra) - 1; i >= 0; i-- {
		out = append(out, cp.extra[i])
	}
	return append(out, cp.sched, cp.cm, cp.apiserver, cp.etcd)
}

// Kubectl runs the real kubectl against the control plane.
func (cp *ControlPlane) Kubectl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(BinDir(), "kubectl"), append([]string{"--kubeconfig=" + cp.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
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
`, cp.APIURL, cp.files.caCert, adminToken)
}

// FreePorts returns n distinct free loopback ports.
func FreePorts(n int) ([]int, error) { return freePorts(n) }

// freePorts returns n distinct free loopback ports.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("failed to find a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// TailFile is the file's last n lines (or why it could not be read): a
// component's log for a failing test.
func TailFile(path string, n int) string {
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
