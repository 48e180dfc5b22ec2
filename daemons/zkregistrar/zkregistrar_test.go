package zkregistrar

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/internal/serverset"
	"github.com/trellis-dev/trellis/internal/testutil/cluster"
	zktest "github.com/trellis-dev/trellis/internal/testutil/zookeeper"
)

func pod(name, node, ip string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: map[string]string{
			wellknown.AnnotationDiscoveryService: "web", wellknown.AnnotationDiscoveryEnv: "prod", wellknown.AnnotationDiscoveryPorts: "http:8080,admin:9090",
		}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "app"}}},
	}
}

// setReady plays the kubelet: the pod runs with an IP, Ready or not.
func setReady(t *testing.T, c kubernetes.Interface, name, ip string, ready bool) {
	t.Helper()
	ctx := context.Background()
	p, err := c.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.PodIP = ip
	p.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
	if _, err := c.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func members(t *testing.T, servers []string) []string {
	t.Helper()
	c, _, err := zk.Connect(servers, 5*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	names, _, err := c.Children("/discovery/web/prod")
	if err != nil {
		return nil
	}
	var out []string
	for _, n := range names {
		data, _, err := c.Get("/discovery/web/prod/" + n)
		if err != nil {
			continue
		}
		m, err := serverset.ParseMember(data)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s:%d", m.ServiceEndpoint.Host, m.ServiceEndpoint.Port))
	}
	sort.Strings(out)
	return out
}

func startDaemon(t *testing.T, c kubernetes.Interface, servers []string) context.CancelFunc {
	t.Helper()
	reg := serverset.New(serverset.Config{Servers: servers, SessionTimeout: 4 * time.Second, VerifyInterval: 500 * time.Millisecond})
	d, err := New(Config{NodeName: "node-a", Client: c, Registrar: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	regDone, dDone := make(chan struct{}), make(chan struct{})
	go func() { _ = reg.Run(ctx); close(regDone) }()
	go func() { _ = d.Run(ctx); close(dDone) }()
	stop := func() { cancel(); <-dDone; <-regDone }
	t.Cleanup(stop)
	return stop
}

func expect(t *testing.T, what string, servers []string, want ...string) {
	t.Helper()
	sort.Strings(want)
	deadline := time.Now().Add(15 * time.Second)
	var got []string
	for time.Now().Before(deadline) {
		got = members(t, servers)
		if fmt.Sprint(got) == fmt.Sprint(want) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: serverset %v, want %v", what, got, want)
}

func TestIntegrationNodeRegistrar(t *testing.T) {
	cp := cluster.Start(t, cluster.Options{})
	zks := zktest.Start(t, 1)
	c := cp.Client
	ctx := context.Background()
	for _, p := range []*corev1.Pod{pod("a1", "node-a", ""), pod("a2", "node-a", ""), pod("b1", "node-b", "")} {
		if _, err := c.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	stop := startDaemon(t, c, zks.Addrs())

	setReady(t, c, "a1", "10.0.1.1", true)
	setReady(t, c, "b1", "10.0.2.1", true) // another node's pod: not ours
	expect(t, "a1 ready", zks.Addrs(), "10.0.1.1:8080")
	setReady(t, c, "a2", "10.0.1.2", true)
	expect(t, "a2 ready", zks.Addrs(), "10.0.1.1:8080", "10.0.1.2:8080")
	setReady(t, c, "a1", "10.0.1.1", false)
	expect(t, "a1 not ready", zks.Addrs(), "10.0.1.2:8080")

	// The daemon restarts while pods change; the new one reconciles.
	stop()
	setReady(t, c, "a1", "10.0.1.1", true)
	if err := c.CoreV1().Pods("default").Delete(ctx, "a2", metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}); err != nil {
		t.Fatal(err)
	}
	startDaemon(t, c, zks.Addrs())
	expect(t, "after restart", zks.Addrs(), "10.0.1.1:8080")

	// Terminating pods leave at once.
	if err := c.CoreV1().Pods("default").Delete(ctx, "a1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(t, "a1 deleted", zks.Addrs())
}

func TestRegistrations(t *testing.T) {
	p := pod("x", "n", "")
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.9.9.9", Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	p.Annotations[wellknown.AnnotationDiscoveryShard] = "3"
	regs, err := Registrations(p)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := regs["default/x"]
	if len(regs) != 1 || !ok {
		t.Fatalf("want one registration keyed default/x, got %v", regs)
	}
	m := r.Member
	if m.ServiceEndpoint.Port != 8080 || m.AdditionalEndpoints["admin"].Port != 9090 || m.Shard == nil || *m.Shard != 3 {
		t.Errorf("member %+v", m)
	}

	// A bad first port does not make the second the service endpoint.
	bad := p.DeepCopy()
	bad.Annotations[wellknown.AnnotationDiscoveryPorts] = "http:80x,admin:9090"
	if regs, err := Registrations(bad); regs != nil || err == nil {
		t.Errorf("bad ports annotation: registrations %v, error %v; want none and an error", regs, err)
	}

	now := metav1.Now()
	p.DeletionTimestamp = &now
	if regs, err := Registrations(p); regs != nil || err != nil {
		t.Errorf("a terminating pod: registrations %v, error %v; want none", regs, err)
	}
}

// gatedPod is pod with the trellis.dev/registered readiness gate.
func gatedPod(name, node string) *corev1.Pod {
	p := pod(name, node, "")
	p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: wellknown.ConditionRegistered}}
	return p
}

// setContainersReady plays the kubelet for a gated pod: running with an IP,
// containers Ready or not (Ready is the gate's business).
func setContainersReady(t *testing.T, c kubernetes.Interface, name, ip string, ready bool) {
	t.Helper()
	ctx := context.Background()
	p, err := c.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	p.Status.Phase, p.Status.PodIP, p.Status.PodIPs = corev1.PodRunning, ip, []corev1.PodIP{{IP: ip}}
	var conds []corev1.PodCondition
	for _, cd := range p.Status.Conditions {
		if cd.Type != corev1.ContainersReady {
			conds = append(conds, cd)
		}
	}
	p.Status.Conditions = append(conds, corev1.PodCondition{Type: corev1.ContainersReady, Status: st})
	if _, err := c.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// gateLog records every change of the gate condition of the default
// namespace's pods, from a watch.
type gateLog struct {
	mu      sync.Mutex
	changes []string
	last    map[string]string
}

func watchGates(t *testing.T, c kubernetes.Interface) *gateLog {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := c.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	g := &gateLog{last: map[string]string{}}
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			cond := gateCondition(p)
			if cond == nil {
				continue
			}
			s := string(cond.Status) + "/" + cond.Reason
			g.mu.Lock()
			if g.last[p.Name] != s {
				g.last[p.Name] = s
				g.changes = append(g.changes, p.Name+"="+s)
			}
			g.mu.Unlock()
		}
	}()
	return g
}

func (g *gateLog) of(name string) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for _, c := range g.changes {
		if strings.HasPrefix(c, name+"=") {
			out = append(out, strings.TrimPrefix(c, name+"="))
		}
	}
	return out
}

// waitGate waits until pod name's gate condition has status and reason,
// and returns its message.
func waitGate(t *testing.T, c kubernetes.Interface, name string, status corev1.ConditionStatus, reason string, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var got string
	for time.Now().Before(deadline) {
		p, err := c.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if cond := gateCondition(p); cond != nil {
			if cond.Status == status && cond.Reason == reason {
				return cond.Message
			}
			got = fmt.Sprintf("%s/%s %q", cond.Status, cond.Reason, cond.Message)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("pod %s: gate %s after %s, want %s/%s", name, got, timeout, status, reason)
	return ""
}

// TestIntegrationGateFailures: the readiness gate opens after the znode
// exists and closes after it is deleted; a registrar restart does not
// flap it, yet closes it for a pod that stopped serving meanwhile; with
// ZooKeeper down, a new pod stays unready and says why, and a registered
// pod keeps its gate until the session has been lost for longer than its
// timeout (the member is gone then), and both open again once ZooKeeper
// is back.
func TestIntegrationGateFailures(t *testing.T) {
	cp := cluster.Start(t, cluster.Options{})
	zks := zktest.Start(t, 1)
	c := cp.Client
	ctx := context.Background()
	gates := watchGates(t, c)
	for _, p := range []*corev1.Pod{gatedPod("g1", "node-a"), gatedPod("g2", "node-a"), gatedPod("g3", "node-a")} {
		if _, err := c.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	stop := startDaemon(t, c, zks.Addrs())
	setContainersReady(t, c, "g1", "10.0.1.1", true)
	setContainersReady(t, c, "g2", "10.0.1.2", true)
	expect(t, "g1, g2 containers ready", zks.Addrs(), "10.0.1.1:8080", "10.0.1.2:8080")
	waitGate(t, c, "g1", corev1.ConditionTrue, ReasonRegistered, 10*time.Second)
	waitGate(t, c, "g2", corev1.ConditionTrue, ReasonRegistered, 10*time.Second)

	// Restart; meanwhile g2's containers stop being ready.
	stop()
	setContainersReady(t, c, "g2", "10.0.1.2", false)
	stop = startDaemon(t, c, zks.Addrs())
	expect(t, "after restart", zks.Addrs(), "10.0.1.1:8080")
	waitGate(t, c, "g2", corev1.ConditionFalse, ReasonDeregistered, 10*time.Second)
	time.Sleep(time.Second) // time for a flap to show
	if got := gates.of("g1"); fmt.Sprint(got) != "[True/Registered]" {
		t.Errorf("g1's gate across a restart: %v, want it True throughout", got)
	}

	// ZooKeeper goes away: a new pod says why it is not Ready; g1 keeps
	// its gate within the session timeout (4 s), not after.
	zks.Kill(0)
	lost := time.Now()
	setContainersReady(t, c, "g3", "10.0.1.3", true)
	msg := waitGate(t, c, "g3", corev1.ConditionFalse, ReasonZooKeeperUnavailable, 10*time.Second)
	if !strings.Contains(msg, "no ZooKeeper session") {
		t.Errorf("g3's message %q does not say ZooKeeper is unreachable", msg)
	}
	waitGate(t, c, "g1", corev1.ConditionFalse, ReasonZooKeeperUnavailable, 20*time.Second)
	if d := time.Since(lost); d < 4*time.Second {
		t.Errorf("g1 lost its gate %s after ZooKeeper went, within the 4s session timeout", d.Round(100*time.Millisecond))
	}
	zks.StartServer(0)
	waitGate(t, c, "g1", corev1.ConditionTrue, ReasonRegistered, 30*time.Second)
	waitGate(t, c, "g3", corev1.ConditionTrue, ReasonRegistered, 30*time.Second)
	expect(t, "ZooKeeper back", zks.Addrs(), "10.0.1.1:8080", "10.0.1.3:8080")
	stop()
	t.Logf("gate changes: g1 %v, g2 %v, g3 %v", gates.of("g1"), gates.of("g2"), gates.of("g3"))
}
