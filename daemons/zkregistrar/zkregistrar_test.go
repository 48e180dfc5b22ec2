package zkregistrar

import (
	"context"
	"fmt"
	"sort"
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
