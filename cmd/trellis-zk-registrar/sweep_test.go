package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/internal/testutil/cluster"
	zktest "github.com/trellis-dev/trellis/internal/testutil/zookeeper"
)

// Timings of TestIntegrationSweeperCoversKilledRegistrar. The Lease is
// shorter than the session, so that the surviving registrar leads the
// sweep before the killed one's members expire.
const (
	sweepSession  = 4 * time.Second
	sweepInterval = time.Second
	sweepGrace    = 2 * time.Second
	sweepLease    = 3 * time.Second
	// zkTick is the test ensemble's tickTime: ZooKeeper expires sessions
	// on tick boundaries, so an expiry comes up to one tick late.
	zkTick = time.Second
)

// TestIntegrationSweeperCoversKilledRegistrar runs two real registrar
// processes for two nodes, as the registrar's service account under the
// manifest's ClusterRole and Role, on a real apiserver and ZooKeeper. It
// SIGKILLs the one that leads the sweep; the other takes the Lease and must
// set the killed node's pods False within session timeout + one tick +
// sweep interval + grace, while its own pods stay True on every sample.
// Restarted, the killed registrar sets them True again: exactly one write
// each way per pod, counted from the apiserver's watch.
//
// TRELLIS_TEST_NO_SWEEP=1 runs the registrars with --sweep-interval=0 (no
// sweeper): the killed node's pods then stay True and the test fails.
func TestIntegrationSweeperCoversKilledRegistrar(t *testing.T) {
	cp := cluster.Start(t, cluster.Options{})
	zks := zktest.Start(t, 1)
	c := cp.Client
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	kubeconfig := registrarKubeconfig(t, cp.Kubeconfig, c)

	pods := map[string][]string{"node-a": {"a1", "a2"}, "node-b": {"b1", "b2"}}
	ip := map[string]string{"a1": "10.0.1.1", "a2": "10.0.1.2", "b1": "10.0.2.1", "b2": "10.0.2.2"}
	for node, names := range pods {
		for _, n := range names {
			createGatedPod(t, c, n, node, ip[n])
		}
	}
	sweep := sweepInterval
	if os.Getenv("TRELLIS_TEST_NO_SWEEP") != "" {
		sweep = 0
	}
	bPort := freePort(t)
	args := func(node string) string {
		port := freePort(t)
		if node == "node-b" {
			port = bPort
		}
		return fmt.Sprintf("--kubeconfig=%s --node-name=%s --zookeeper=%s --session-timeout=%s --verify-interval=500ms --reregister-jitter=-1s --listen=127.0.0.1:%d "+
			"--sweep-interval=%s --sweep-grace=%s --lease-duration=%s --lease-namespace=trellis-system",
			kubeconfig, node, strings.Join(zks.Addrs(), ","), sweepSession, port, sweep, sweepGrace, sweepLease)
	}
	a := startRegistrar(t, args("node-a"))
	if sweep > 0 {
		waitFor(t, "node-a to lead the sweep", 20*time.Second, func() (bool, string) {
			l, err := c.CoordinationV1().Leases("trellis-system").Get(ctx, "trellis-zk-registrar-sweeper", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == "node-a", fmt.Sprint(l.Spec.HolderIdentity)
		})
	}
	b := startRegistrar(t, args("node-b"))
	all := []string{"a1", "a2", "b1", "b2"}
	waitFor(t, "every pod registered", 30*time.Second, func() (bool, string) { return gateIs(ctx, c, all, corev1.ConditionTrue) })

	// From here on, count the condition's writes on every pod from the
	// apiserver (nothing else writes these pods), and sample node-b's.
	list, err := c.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	writes := map[string][]corev1.ConditionStatus{}
	// falseAt: when the watch delivered each pod's first False (not the
	// polling loop's time, which lags by up to a poll).
	falseAt := map[string]time.Time{}
	go func() {
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type == watch.Modified {
				mu.Lock()
				writes[p.Name] = append(writes[p.Name], gateStatus(p))
				if _, seen := falseAt[p.Name]; !seen && gateStatus(p) == corev1.ConditionFalse {
					falseAt[p.Name] = time.Now()
				}
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(w.Stop)
	var samples, badSamples int
	var lastBad string
	sampleCtx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for sampleCtx.Err() == nil {
			if ok, msg := gateIs(sampleCtx, c, pods["node-b"], corev1.ConditionTrue); sampleCtx.Err() == nil {
				samples++
				if !ok {
					badSamples++
					lastBad = msg
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()

	killed := time.Now()
	if err := a.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	bound := sweepSession + zkTick + sweepInterval + sweepGrace
	expired := waitMembers(t, zks.Addrs(), bound, "10.0.2.1,10.0.2.2")
	waitFor(t, "node-a's pods False", bound+10*time.Second, func() (bool, string) { return gateIs(ctx, c, pods["node-a"], corev1.ConditionFalse) })
	var took time.Duration
	mu.Lock()
	for _, n := range pods["node-a"] {
		if at, ok := falseAt[n]; !ok {
			t.Errorf("pod %s: the watch delivered no False", n)
		} else {
			took = max(took, at.Sub(killed))
		}
	}
	mu.Unlock()
	// What the sweeper controls is which pass writes False: the one the
	// grace ends on, so each condition says the member has been gone for
	// exactly the grace (passes are dated on the grid of ticks). A later
	// pass would say a tick more. Only a sweeper whose passes outrun its
	// interval may be later, and it reports its longest pass. How long all
	// of it took after the kill is the machine's (ZooKeeper's expiry, the
	// lease, the watch): logged, and bounded only by the wait above.
	longest := sweepLongest(t, bPort)
	t.Logf("node-a's pods False %s after SIGKILL (session %s + ZooKeeper tick %s + interval %s + grace %s = %s); members expired %s after SIGKILL (polled every 50ms); the sweeper's longest pass %s",
		took.Round(10*time.Millisecond), sweepSession, zkTick, sweepInterval, sweepGrace, bound, expired.Round(10*time.Millisecond), longest.Round(time.Millisecond))
	for _, n := range pods["node-a"] {
		p, err := c.CoreV1().Pods("default").Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		msg := gateMessage(p)
		t.Logf("%s's condition: %s", n, msg)
		if want := fmt.Sprintf("has been gone for %s:", sweepGrace); !strings.Contains(msg, want) && longest < sweepInterval {
			t.Errorf("%s's condition says %q: want %q, written by the pass the grace ends on (the longest pass took %s, under the %s interval)",
				n, msg, want, longest.Round(time.Millisecond), sweepInterval)
		}
	}

	restarted := time.Now()
	startRegistrar(t, args("node-a"))
	waitFor(t, "node-a's pods True again", 20*time.Second, func() (bool, string) { return gateIs(ctx, c, pods["node-a"], corev1.ConditionTrue) })
	t.Logf("node-a's pods True %s after the restart", time.Since(restarted).Round(10*time.Millisecond))
	// Stay past a grace and two sweeps: no further write may come.
	time.Sleep(sweepGrace + 2*sweepInterval)

	// The sweep's Lease is node-b's now. The sweeper's own count: the two
	// False writes.
	if l, err := c.CoordinationV1().Leases("trellis-system").Get(ctx, "trellis-zk-registrar-sweeper", metav1.GetOptions{}); err == nil && l.Spec.HolderIdentity != nil {
		t.Logf("the sweep's Lease is held by %s", *l.Spec.HolderIdentity)
	}
	if _, body := scrape(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", bPort)); !strings.Contains(body, "trellis_zk_registrar_sweep_writes_total 2\n") {
		t.Errorf("node-b's /metrics: want trellis_zk_registrar_sweep_writes_total 2, got:\n%s", grepLines(body, "sweep_writes"))
	}

	// A graceful restart of node-b's registrar (the sweep's leader): its
	// members leave and come back within the grace, so no False.
	if err := b.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	waitMembers(t, zks.Addrs(), 10*time.Second, "10.0.1.1,10.0.1.2")
	startRegistrar(t, args("node-b")) // stopped by its cleanup
	waitMembers(t, zks.Addrs(), 10*time.Second, "10.0.1.1,10.0.1.2,10.0.2.1,10.0.2.2")
	t.Logf("node-b's members back %s after SIGTERM (grace %s)", time.Since(stopped).Round(10*time.Millisecond), sweepGrace)
	time.Sleep(sweepGrace + 2*sweepInterval)
	stopSampling()
	<-sampled

	const minSamples = 50
	t.Logf("node-b sampled %d times, %d not True", samples, badSamples)
	if samples < minSamples {
		t.Errorf("node-b's pods sampled %d times, want at least %d", samples, minSamples)
	}
	if badSamples > 0 {
		t.Errorf("node-b's pods were not all True in %d of %d samples (last: %s)", badSamples, samples, lastBad)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []corev1.ConditionStatus{corev1.ConditionFalse, corev1.ConditionTrue}
	for _, n := range pods["node-a"] {
		if fmt.Sprint(writes[n]) != fmt.Sprint(want) {
			t.Errorf("pod %s: writes after SIGKILL %v, want exactly %v", n, writes[n], want)
		}
	}
	for _, n := range pods["node-b"] {
		if len(writes[n]) != 0 {
			t.Errorf("pod %s (node-b) was written %d times: %v", n, len(writes[n]), writes[n])
		}
	}
}

// registrarKubeconfig grants the registrar's service account the
// manifest's ClusterRole and Role and returns a kubeconfig that
// impersonates it, so that a missing permission fails the test.
func registrarKubeconfig(t *testing.T, admin string, c kubernetes.Interface) string {
	t.Helper()
	ctx := context.Background()
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "manifests", "trellis-zk-registrar", "registrar.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "trellis-system"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, doc := range bytes.Split(data, []byte("\n---\n")) {
		// Only the RBAC documents are parsed: the DaemonSet is a template.
		var meta metav1.TypeMeta
		if m := regexp.MustCompile(`(?m)^kind: (\w+)$`).FindSubmatch(doc); m != nil {
			meta.Kind = string(m[1])
		}
		switch meta.Kind {
		case "ClusterRole":
			var r rbacv1.ClusterRole
			err = yaml.Unmarshal(doc, &r)
			if err == nil {
				_, err = c.RbacV1().ClusterRoles().Create(ctx, &r, metav1.CreateOptions{})
			}
		case "ClusterRoleBinding":
			var r rbacv1.ClusterRoleBinding
			err = yaml.Unmarshal(doc, &r)
			if err == nil {
				_, err = c.RbacV1().ClusterRoleBindings().Create(ctx, &r, metav1.CreateOptions{})
			}
		case "Role":
			var r rbacv1.Role
			err = yaml.Unmarshal(doc, &r)
			if err == nil {
				_, err = c.RbacV1().Roles(r.Namespace).Create(ctx, &r, metav1.CreateOptions{})
			}
		case "RoleBinding":
			var r rbacv1.RoleBinding
			err = yaml.Unmarshal(doc, &r)
			if err == nil {
				_, err = c.RbacV1().RoleBindings(r.Namespace).Create(ctx, &r, metav1.CreateOptions{})
			}
		default:
			continue
		}
		if err != nil {
			t.Fatalf("registrar.yaml %s: %v", meta.Kind, err)
		}
		kinds = append(kinds, meta.Kind)
	}
	if len(kinds) != 4 {
		t.Fatalf("registrar.yaml: RBAC objects %v, want a ClusterRole, a Role and their bindings", kinds)
	}
	cfg, err := clientcmd.LoadFromFile(admin)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range cfg.AuthInfos {
		u.Impersonate = "system:serviceaccount:trellis-system:trellis-zk-registrar"
	}
	out := filepath.Join(t.TempDir(), "registrar.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// createGatedPod makes a pod as the controller and the kubelet would:
// gated, labelled and annotated for discovery, running with its
// containers Ready.
func createGatedPod(t *testing.T, c kubernetes.Interface, name, node, ip string) {
	t.Helper()
	ctx := context.Background()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{wellknown.LabelService: "web"}, Annotations: map[string]string{
			wellknown.AnnotationDiscoveryService: "web", wellknown.AnnotationDiscoveryEnv: "prod", wellknown.AnnotationDiscoveryPorts: "http:8080",
		}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "app"}},
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: wellknown.ConditionRegistered}}},
	}
	p, err := c.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
		Conditions: []corev1.PodCondition{{Type: corev1.ContainersReady, Status: corev1.ConditionTrue}}}
	if _, err := c.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// startRegistrar runs the daemon as a real process (this test binary, see
// TestMain) and kills it when the test ends.
func startRegistrar(t *testing.T, args string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "TRELLIS_ZK_REGISTRAR_MAIN=1", "TRELLIS_ZK_REGISTRAR_ARGS="+args)
	var logs syncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("registrar %s output:\n%s", args, logs.String())
		}
	})
	return cmd
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

func gateStatus(p *corev1.Pod) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == wellknown.ConditionRegistered {
			return c.Status
		}
	}
	return ""
}

func gateMessage(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == wellknown.ConditionRegistered {
			return fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
		}
	}
	return "none"
}

// gateIs reports whether every named pod's condition has status want, and
// otherwise what the pods carry.
func gateIs(ctx context.Context, c kubernetes.Interface, names []string, want corev1.ConditionStatus) (bool, string) {
	var got []string
	ok := true
	for _, n := range names {
		p, err := c.CoreV1().Pods("default").Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if gateStatus(p) != want {
			ok = false
		}
		got = append(got, n+"="+gateMessage(p))
	}
	return ok, strings.Join(got, "; ")
}

func waitFor(t *testing.T, what string, timeout time.Duration, ok func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		var done bool
		if done, last = ok(); done {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: not after %s (last: %s)", what, timeout, last)
}

func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// sweepLongest is the longest sweep pass the registrar listening on port
// reports (trellis_zk_registrar_sweep_longest_pass_seconds).
func sweepLongest(t *testing.T, port int) time.Duration {
	t.Helper()
	_, body := scrape(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	for _, l := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(l, "trellis_zk_registrar_sweep_longest_pass_seconds "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("the longest sweep pass %q: %v", v, err)
			}
			return time.Duration(f * float64(time.Second))
		}
	}
	t.Fatalf("no trellis_zk_registrar_sweep_longest_pass_seconds in the registrar's /metrics:\n%s", grepLines(body, "sweep"))
	return 0
}
