//go:build e2e

// Package e2e runs end-to-end tests on the local kind cluster that `trellis
// local up -f clusters/local.yaml` builds (two nodes, every addon): a real
// workload gets networking, a certificate, a ZooKeeper registration and
// shipped logs. Run with `make e2e` (needs root, Docker, `make tools`).
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/internal/serverset"
)

const (
	definition = "clusters/local.yaml"
	cluster    = "trellis-local"
	trust      = "trellis.example" // clusters/base/platform.yaml
)

var (
	root       string
	kubeconfig string
	cfg        *rest.Config
	cs         *kubernetes.Clientset
	cl         client.Client
)

// TestMain brings the local cluster up with the real CLI (it reuses a
// running one) and connects to it.
func TestMain(m *testing.M) {
	wd, _ := os.Getwd()
	root = filepath.Join(wd, "..", "..")
	kubeconfig = os.Getenv("E2E_KUBECONFIG")
	if kubeconfig == "" {
		kubeconfig = filepath.Join(os.TempDir(), "trellis-e2e.kubeconfig")
	}
	start := time.Now()
	if err := localUp(os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: trellis local up: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("e2e: trellis local up took %s\n", time.Since(start).Round(time.Second))
	if err := connect(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// localUp runs the real CLI's trellis local up on the suite's definition
// and kubeconfig.
func localUp(stdout, stderr io.Writer) error {
	up := exec.Command(filepath.Join(root, "bin", "trellis"), "local", "up", "-f", definition, "--kubeconfig", kubeconfig, "--gateway-context", gatewayContext())
	up.Dir, up.Stdout, up.Stderr = root, stdout, stderr
	return up.Run()
}

// connect (re)builds the clients from the kubeconfig that trellis local up
// wrote.
func connect() error {
	c, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cl, err = client.New(c, client.Options{})
	if err != nil {
		return err
	}
	if err := v1alpha1.AddToScheme(cl.Scheme()); err != nil {
		return err
	}
	cfg, cs = c, kubernetes.NewForConfigOrDie(c)
	return nil
}

func eventually(t *testing.T, what string, timeout time.Duration, f func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		ok, why := f()
		if ok {
			return
		}
		last = why
		time.Sleep(time.Second)
	}
	t.Fatalf("%s: not within %s: %s", what, timeout, last)
}

func TestAddonsReady(t *testing.T) {
	ctx := context.Background()
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 2 {
		t.Fatalf("nodes = %d, want 2 (one per instance group of %s)", len(nodes.Items), definition)
	}
	for _, n := range nodes.Items {
		if !nodeReady(&n) {
			t.Errorf("node %s is not Ready", n.Name)
		}
	}
	eventually(t, "every addon ready", 3*time.Minute, func() (bool, string) { return addonsReady(ctx) })
}

// addonsReady says whether every addon's workload in trellis-system is
// ready, and if not, which are not.
func addonsReady(ctx context.Context) (bool, string) { return addonsReadyIn(ctx, cs) }

// addonsReadyIn is addonsReady on the cluster of cs.
func addonsReadyIn(ctx context.Context, cs kubernetes.Interface) (bool, string) {
	var notReady []string
	ds, err := cs.AppsV1().DaemonSets("trellis-system").List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err.Error()
	}
	for _, d := range ds.Items {
		if d.Status.DesiredNumberScheduled == 0 || d.Status.NumberReady != d.Status.DesiredNumberScheduled || d.Status.UpdatedNumberScheduled != d.Status.DesiredNumberScheduled {
			notReady = append(notReady, fmt.Sprintf("daemonset %s %d/%d", d.Name, d.Status.NumberReady, d.Status.DesiredNumberScheduled))
		}
	}
	deps, err := cs.AppsV1().Deployments("trellis-system").List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err.Error()
	}
	for _, d := range deps.Items {
		if d.Status.AvailableReplicas != *d.Spec.Replicas {
			notReady = append(notReady, fmt.Sprintf("deployment %s %d/%d", d.Name, d.Status.AvailableReplicas, *d.Spec.Replicas))
		}
	}
	sts, err := cs.AppsV1().StatefulSets("trellis-system").List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err.Error()
	}
	for _, s := range sts.Items {
		if s.Status.ReadyReplicas != *s.Spec.Replicas {
			notReady = append(notReady, fmt.Sprintf("statefulset %s %d/%d", s.Name, s.Status.ReadyReplicas, *s.Spec.Replicas))
		}
	}
	// netd, cert-agent, zk-registrar, log-shipper; issuer, controller,
	// gateway, and local up's OIDC provider for the console; zookeeper.
	want := map[string]int{"daemonset": 4, "deployment": 4, "statefulset": 1}
	got := map[string]int{"daemonset": len(ds.Items), "deployment": len(deps.Items), "statefulset": len(sts.Items)}
	for k, n := range want {
		if got[k] != n {
			notReady = append(notReady, fmt.Sprintf("%d %ss, want %d", got[k], k, n))
		}
	}
	return len(notReady) == 0, strings.Join(notReady, ", ")
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// trellisService is a hello service pinned to one instance group's node.
func trellisService(ns, name, pool string, tolerate bool) *v1alpha1.TrellisService {
	ts := &v1alpha1.TrellisService{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.TrellisServiceSpec{
			Replicas: new(int32(1)),
			Ports:    []v1alpha1.Port{{Name: "http", Port: 8080}},
			Template: v1alpha1.PodTemplate{
				NodeSelector: map[string]string{"trellis.dev/pool": pool},
				Containers:   []corev1.Container{{Name: "hello", Image: "trellis/hello:0.1.0", Args: []string{"--port=8080"}}},
			},
		},
	}
	if tolerate {
		ts.Spec.Template.Tolerations = []corev1.Toleration{{Key: "trellis.dev/pool", Operator: corev1.TolerationOpEqual, Value: pool, Effect: corev1.TaintEffectNoSchedule}}
	}
	return ts
}

func TestWorkloadRuntime(t *testing.T) {
	ctx := context.Background()
	ns := fmt.Sprintf("e2e-%d", time.Now().Unix())
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })

	// Service a on the general node (the control plane), b on highmem.
	for _, ts := range []*v1alpha1.TrellisService{trellisService(ns, "svc-a", "general", false), trellisService(ns, "svc-b", "highmem", true)} {
		if err := cl.Create(ctx, ts); err != nil {
			t.Fatal(err)
		}
	}
	a := runningPod(t, ns, "svc-a")
	b := runningPod(t, ns, "svc-b")
	if a.Spec.NodeName == b.Spec.NodeName {
		t.Fatalf("both pods on %s: want one per node", a.Spec.NodeName)
	}
	t.Logf("pod a %s on %s (%s), pod b %s on %s (%s)", a.Name, a.Spec.NodeName, a.Status.PodIP, b.Name, b.Spec.NodeName, b.Status.PodIP)

	t.Run("injected runtime and resources", func(t *testing.T) {
		var names []string
		for _, c := range append(slices.Clone(a.Spec.InitContainers), a.Spec.Containers...) {
			names = append(names, c.Name)
			if c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
				t.Errorf("container %s has no requests/limits: %v", c.Name, c.Resources)
			}
		}
		for _, want := range []string{wellknown.ContainerConfigInit, wellknown.ContainerCert, wellknown.ContainerTraffic, "hello"} {
			if !slices.Contains(names, want) {
				t.Errorf("pod containers %v: %s missing", names, want)
			}
		}
	})

	t.Run("pod to pod across nodes", func(t *testing.T) {
		out := execIn(t, a, "hello", "/trellis-hello", "get", fmt.Sprintf("http://%s:8080/", b.Status.PodIP))
		if want := "from " + b.Name; !strings.Contains(out, want) {
			t.Errorf("a -> b over HTTP: %q, want %q", out, want)
		}
	})

	t.Run("mTLS across nodes with pod identities", func(t *testing.T) {
		id := fmt.Sprintf("spiffe://%s/ns/%s/sa/default", trust, ns)
		out := execIn(t, a, "hello", "/trellis-hello", "mtls", net.JoinHostPort(b.Status.PodIP, "8443"))
		// b names a's identity (it required a's client certificate), and a
		// verified b's chain and names b's identity.
		if !strings.Contains(out, b.Name+" greets "+id) || !strings.Contains(out, "peer: "+id) {
			t.Errorf("a -> b over mTLS: %q, want both sides to name %s", out, id)
		}
	})

	t.Run("logs reach the sink with pod metadata", func(t *testing.T) {
		eventually(t, "b's request log line in the sink of "+b.Spec.NodeName, time.Minute, func() (bool, string) {
			out, err := exec.Command("docker", "exec", b.Spec.NodeName, "cat", "/var/log/trellis/shipped.log").Output()
			if err != nil {
				return false, err.Error()
			}
			for _, line := range bytes.Split(out, []byte("\n")) {
				var rec struct {
					Log, Namespace, Pod, Container, Node string
				}
				if json.Unmarshal(line, &rec) != nil || rec.Pod != b.Name {
					continue
				}
				if strings.Contains(rec.Log, "hello: GET / from "+a.Status.PodIP) && rec.Namespace == ns && rec.Container == "hello" && rec.Node == b.Spec.NodeName {
					return true, ""
				}
			}
			return false, "no line of pod " + b.Name
		})
	})

	t.Run("ZooKeeper holds Ready pods and drops deleted ones", func(t *testing.T) {
		conn := zookeeper(t)
		dir := "/discovery/svc-b/dev"
		want := net.JoinHostPort(b.Status.PodIP, "8080")
		eventually(t, "svc-b's pod in "+dir, time.Minute, func() (bool, string) {
			ms, err := serverset.Read(conn, dir)
			if err != nil {
				return false, err.Error()
			}
			got := members(ms)
			return slices.Equal(got, []string{want}), fmt.Sprint(got)
		})
		if err := cl.Delete(ctx, &v1alpha1.TrellisService{ObjectMeta: metav1.ObjectMeta{Name: "svc-b", Namespace: ns}}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "svc-b gone from "+dir, time.Minute, func() (bool, string) {
			ms, err := serverset.Read(conn, dir)
			if err != nil && !errors.Is(err, zk.ErrNoNode) {
				return false, err.Error()
			}
			return len(ms) == 0, fmt.Sprint(members(ms))
		})
	})
}

func members(ms []serverset.Member) []string {
	var out []string
	for _, m := range ms {
		out = append(out, net.JoinHostPort(m.ServiceEndpoint.Host, fmt.Sprint(m.ServiceEndpoint.Port)))
	}
	return out
}

func TestClusterValidate(t *testing.T) {
	cmd := exec.Command(filepath.Join(root, "bin", "trellis"), "cluster", "validate", "-f", definition, "--kubeconfig", kubeconfig)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("trellis cluster validate: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// runningPod waits for the one pod of a Trellis service to be Ready.
func runningPod(t *testing.T, ns, svc string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	eventually(t, "a Ready pod of "+svc, 3*time.Minute, func() (bool, string) {
		pods, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: wellknown.LabelWorkload + "=" + svc})
		if err != nil {
			return false, err.Error()
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil {
					pod = p
					return true, ""
				}
			}
		}
		return false, fmt.Sprintf("%d pods, none Ready", len(pods.Items))
	})
	return pod
}

// execIn runs a command in a container (kubectl exec).
func execIn(t *testing.T, p *corev1.Pod, container string, cmd ...string) string {
	t.Helper()
	req := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(p.Namespace).Name(p.Name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: cmd, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ex, err := remotecommand.NewSPDYExecutor(cfg, http.MethodPost, req.URL())
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if err := ex.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr}); err != nil {
		t.Fatalf("exec %v in %s: %v: %s", cmd, p.Name, err, stderr.String())
	}
	return stdout.String()
}

// zookeeper connects to the cluster's ZooKeeper through a port-forward to
// zookeeper-0 (pod IPs are not routed to the host).
func zookeeper(t *testing.T) *zk.Conn {
	t.Helper()
	conn, _ := zookeeperAt(t)
	return conn
}

// zookeeperAt is zookeeper-0 and the address it is reached at: a
// test-owned NodePort Service on the node that runs it. Not a
// port-forward: ZooKeeper closes the connection after a four-letter
// command, and every new connection through a port-forward took 1.0 s
// here (a fresh stream through the apiserver and the kubelet), against
// 0.01-0.03 s through the NodePort, so a serverset watcher sampling
// `cons` could not keep its rate.
func zookeeperAt(t *testing.T) (*zk.Conn, string) {
	t.Helper()
	ctx := context.Background()
	const name = "e2e-zookeeper-0"
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "trellis-system"},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeNodePort,
			Selector: map[string]string{"statefulset.kubernetes.io/pod-name": "zookeeper-0"},
			Ports:    []corev1.ServicePort{{Name: "client", Port: 2181, TargetPort: intstr.FromInt32(2181)}},
		},
	}
	_ = cs.CoreV1().Services(svc.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
	created, err := cs.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("failed to expose zookeeper-0 on a NodePort: %v", err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().Services(svc.Namespace).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	pod, err := cs.CoreV1().Pods("trellis-system").Get(ctx, "zookeeper-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Status.HostIP == "" {
		t.Fatal("zookeeper-0 has no host IP")
	}
	addr := net.JoinHostPort(pod.Status.HostIP, strconv.Itoa(int(created.Spec.Ports[0].NodePort)))
	eventually(t, "zookeeper-0 answers ruok at "+addr, time.Minute, func() (bool, string) {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			return false, err.Error()
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Write([]byte("ruok")); err != nil {
			return false, err.Error()
		}
		b, _ := io.ReadAll(c)
		return string(b) == "imok", fmt.Sprintf("answer %q", b)
	})
	conn, _, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	return conn, addr
}

// portForward forwards a loopback port to a pod's port for the test's
// duration and returns the local port.
func portForward(t *testing.T, namespace, pod string, port int) uint16 {
	t.Helper()
	transport, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	url := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(namespace).Name(pod).SubResource("portforward").URL()
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, url)
	stop, ready := make(chan struct{}), make(chan struct{})
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{fmt.Sprintf("0:%d", port)}, stop, ready, nil, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = fw.ForwardPorts() }()
	t.Cleanup(func() { close(stop) })
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatalf("port-forward to %s/%s not ready", namespace, pod)
	}
	ports, err := fw.GetPorts()
	if err != nil {
		t.Fatal(err)
	}
	return ports[0].Local
}
