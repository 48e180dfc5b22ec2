package zkregistrar

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/bootstrap/rollout"
	"github.com/trellis-dev/trellis/internal/serverset"
	"github.com/trellis-dev/trellis/internal/testutil/cluster"
	"github.com/trellis-dev/trellis/internal/testutil/liveset"
	zktest "github.com/trellis-dev/trellis/internal/testutil/zookeeper"
)

// zkDelay is the latency the proxy adds to every request of the
// registrars to ZooKeeper: a registration (sweep, create) then takes
// seconds, as on the loaded machine of issue 44.
const zkDelay = 700 * time.Millisecond

// TestIntegrationDrainKeepsServerset drains a node under a PDB while
// ZooKeeper answers the registrars slowly (a delay proxy on loopback), on
// a real apiserver, disruption and ReplicaSet controllers and ZooKeeper,
// with the product's drain (rollout.KubeCluster.Drain) and one real
// registrar daemon per node, running as the registrar's service account
// under the manifest's ClusterRole. A watcher reads the serverset with
// go-zookeeper directly every 50 ms and counts live members (ephemeral,
// session connected, at a Ready pod's address): the count must never go
// under minAvailable, over enough samples.
//
// TRELLIS_TEST_NO_GATE=1 runs the same drain with pods that carry no
// readiness gate (Ready as soon as their containers are): the check then
// fails, as in issue 44.
func TestIntegrationDrainKeepsServerset(t *testing.T) {
	gated := os.Getenv("TRELLIS_TEST_NO_GATE") == ""
	cp := cluster.Start(t, cluster.Options{ControllerManager: true, ControllerManagerFlags: []string{"--controllers=*,-node-lifecycle-controller"}})
	zks := zktest.Start(t, 1)
	proxy := delayProxy(t, zks.Addrs()[0], zkDelay)
	c := cp.Client
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	nodes := []string{"node-a", "node-b", "node-c"}
	for _, n := range nodes {
		if _, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	regClient := registrarClient(t, cp.Config, c)
	var daemons []*Daemon
	for _, n := range nodes {
		reg := serverset.New(serverset.Config{Servers: []string{proxy}, SessionTimeout: 10 * time.Second, VerifyInterval: 2 * time.Second, ReregisterJitter: -1})
		d, err := New(Config{NodeName: n, Client: regClient, Registrar: reg})
		if err != nil {
			t.Fatal(err)
		}
		daemons = append(daemons, d)
		var wg sync.WaitGroup
		wg.Go(func() { _ = reg.Run(ctx) })
		wg.Go(func() { _ = d.Run(ctx) })
		t.Cleanup(func() { cancel(); wg.Wait() })
	}
	kubelet := startKubeletFake(ctx, t, c, "node-a")

	// web: 4 replicas, all on node-a, minAvailable 3.
	labels := map[string]string{"app": "web"}
	tmpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{
			wellknown.AnnotationDiscoveryService: "web", wellknown.AnnotationDiscoveryEnv: "prod", wellknown.AnnotationDiscoveryPorts: "http:8080",
		}},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: new(int64(1)), Containers: []corev1.Container{{Name: "app", Image: "app"}}},
	}
	if gated {
		tmpl.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: wellknown.ConditionRegistered}}
	}
	if _, err := c.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{Replicas: new(int32(4)), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const minAvailable = 3
	min := intstr.FromInt32(minAvailable)
	if _, err := c.PolicyV1().PodDisruptionBudgets("default").Create(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &min, Selector: &metav1.LabelSelector{MatchLabels: labels}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	obs, _, err := zk.Connect(zks.Addrs(), 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(obs.Close)
	var lastSkipped []string
	live := func() (int, error) {
		ready, err := readyAddrs(ctx, c)
		if err != nil {
			return 0, err
		}
		sessions, err := liveset.Sessions(zks.Addrs(), 5*time.Second)
		if err != nil {
			return 0, err
		}
		nodes, err := liveset.Read(obs, "/discovery/web/prod")
		if err != nil {
			return 0, err
		}
		n, skipped := liveset.Count(nodes, sessions, ready)
		lastSkipped = skipped
		return n, nil
	}
	fourLive := func() (bool, string) {
		n, err := live()
		pods, _ := c.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		var st []string
		for _, p := range pods.Items {
			st = append(st, fmt.Sprintf("%s@%s %s ready=%s gate=%s", p.Name, p.Spec.NodeName, p.Status.PodIP, condition(&p, corev1.PodReady), condition(&p, wellknown.ConditionRegistered)))
		}
		return err == nil && n == 4, fmt.Sprintf("%d live, err %v, skipped %v; pods %v", n, err, lastSkipped, st)
	}
	waitFor(t, "4 live members", 60*time.Second, fourLive)
	waitFor(t, "the budget to allow 1 disruption", 30*time.Second, func() (bool, string) {
		b, err := c.PolicyV1().PodDisruptionBudgets("default").Get(ctx, "web", metav1.GetOptions{})
		return err == nil && b.Status.DisruptionsAllowed == 1, fmt.Sprint(err)
	})
	gateWrites := func() (n int64) {
		for _, d := range daemons {
			n += d.GateWrites()
		}
		return n
	}
	writesBefore := gateWrites()

	// The watcher, then the drain (the product's).
	tally := &liveset.Tally{What: "live members", Minimum: minAvailable}
	wctx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	began := time.Now()
	go func() {
		defer close(watched)
		for wctx.Err() == nil {
			n, err := live()
			if wctx.Err() != nil {
				return
			}
			tally.Add(time.Now(), n, err)
			time.Sleep(50 * time.Millisecond)
		}
	}()
	kc, err := rollout.NewKubeCluster(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	node, err := c.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := kc.Drain(ctx, node, rollout.DrainOptions{Timeout: 3 * time.Minute}, nil); err != nil {
		t.Fatalf("drain: %v", err)
	}
	drained := time.Since(start)
	// The last replacement registers after the drain ends: watch it too.
	waitFor(t, "4 live members after the drain", 60*time.Second, fourLive)
	stopWatch()
	<-watched
	over := time.Since(began)
	s := tally.Summary()
	t.Logf("gate %v: drain of 4 pods in %s with ZooKeeper %s away; %d samples over %s, %d errored, live minimum %d (budget %d)",
		gated, drained.Round(100*time.Millisecond), zkDelay, s.Samples, over.Round(100*time.Millisecond), s.Errors, s.Min, minAvailable)
	// 20/s nominal; at least 5/s, so a dip of 200 ms is seen.
	for _, f := range s.Check(over, 5, 0.01) {
		t.Errorf("serverset watcher: %s", f)
	}
	if gated {
		// 4 replacements registered (True), 4 evicted pods deregistered
		// (False, unless the pod was gone before the delete returned): at
		// most 2 writes per pod lifecycle.
		if w := gateWrites() - writesBefore; w < 4 || w > 8 {
			t.Errorf("%d readiness-gate writes for 4 evictions and 4 replacements, want 4 to 8 (at most 2 per pod lifecycle)", w)
		} else {
			t.Logf("readiness-gate writes: %d for 4 evicted and 4 new pods (the kubelet fake wrote %d status updates)", w, kubelet.writes())
		}
	}
}

// registrarClient is a client that acts as the registrar's service
// account under the ClusterRole of its manifest
// (config/manifests/trellis-zk-registrar), so the test fails if the role
// lacks what the registrar does.
func registrarClient(t *testing.T, cfg *rest.Config, admin kubernetes.Interface) kubernetes.Interface {
	t.Helper()
	ctx := context.Background()
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "manifests", "trellis-zk-registrar", "registrar.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role *rbacv1.ClusterRole
	for _, doc := range bytes.Split(data, []byte("\n---\n")) {
		var r rbacv1.ClusterRole
		if err := yaml.Unmarshal(doc, &r); err == nil && r.Kind == "ClusterRole" {
			role = &r
		}
	}
	if role == nil {
		t.Fatal("registrar.yaml: no ClusterRole")
	}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const sa = "system:serviceaccount:trellis-system:trellis-zk-registrar"
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: sa}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: sa}
	k, err := kubernetes.NewForConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func readyAddrs(ctx context.Context, c kubernetes.Interface) (map[string]bool, error) {
	pods, err := c.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		return nil, fmt.Errorf("failed to list web's pods: %w", err)
	}
	out := map[string]bool{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp == nil && condition(p, corev1.PodReady) == corev1.ConditionTrue {
			out[net.JoinHostPort(p.Status.PodIP, "8080")] = true
		}
	}
	return out, nil
}

func condition(p *corev1.Pod, typ corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == typ {
			return c.Status
		}
	}
	return ""
}

func waitFor(t *testing.T, what string, timeout time.Duration, ok func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		done, state := ok()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s: %s", timeout, what, state)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// delayProxy forwards loopback connections to target, delivering every
// chunk the client sends delay after it was sent (latency, not a
// bandwidth limit: order and throughput are kept). It returns its address.
func delayProxy(t *testing.T, target string, delay time.Duration) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				_ = in.Close()
				continue
			}
			type chunk struct {
				at   time.Time
				data []byte
			}
			q := make(chan chunk, 1024)
			go func() {
				defer close(q)
				buf := make([]byte, 64<<10)
				for {
					n, err := in.Read(buf)
					if n > 0 {
						q <- chunk{at: time.Now().Add(delay), data: bytes.Clone(buf[:n])}
					}
					if err != nil {
						return
					}
				}
			}()
			go func() {
				defer out.Close()
				for c := range q {
					time.Sleep(time.Until(c.at))
					if _, err := out.Write(c.data); err != nil {
						return
					}
				}
			}()
			go func() {
				defer in.Close()
				buf := make([]byte, 64<<10)
				for {
					n, err := out.Read(buf)
					if n > 0 {
						if _, werr := in.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return l.Addr().String()
}

// kubeletFake plays the kubelets of every node (there are none): it binds
// pending pods to a schedulable node (not `avoid` once it is cordoned),
// runs them with an address, sets ContainersReady and, as the kubelet's
// status manager does, Ready = ContainersReady and every readiness gate's
// condition True; a terminating pod exits after its grace period.
type kubeletFake struct {
	mu     sync.Mutex
	n      int64
	nextIP int
}

func (k *kubeletFake) writes() int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.n
}

func startKubeletFake(ctx context.Context, t *testing.T, c kubernetes.Interface, first string) *kubeletFake {
	k := &kubeletFake{}
	go func() {
		next := 0
		for ctx.Err() == nil {
			k.pass(ctx, c, first, &next)
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return k
}

func (k *kubeletFake) pass(ctx context.Context, c kubernetes.Interface, first string, next *int) {
	pods, err := c.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	var schedulable []string
	for _, n := range nodes.Items {
		if !n.Spec.Unschedulable && n.Name != first {
			schedulable = append(schedulable, n.Name)
		}
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		switch {
		case p.DeletionTimestamp != nil:
			grace := time.Duration(*p.DeletionGracePeriodSeconds) * time.Second
			if time.Now().After(p.DeletionTimestamp.Add(-grace).Add(time.Second)) {
				_ = c.CoreV1().Pods("default").Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))})
			}
		case p.Spec.NodeName == "":
			node := first // the first replicas all land on the node to drain
			if n, err := c.CoreV1().Nodes().Get(ctx, first, metav1.GetOptions{}); err != nil || n.Spec.Unschedulable {
				node = schedulable[*next%len(schedulable)]
				*next++
			}
			_ = c.CoreV1().Pods("default").Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace},
				Target: corev1.ObjectReference{Kind: "Node", Name: node}}, metav1.CreateOptions{})
		default:
			k.status(ctx, c, p)
		}
	}
}

func (k *kubeletFake) status(ctx context.Context, c kubernetes.Interface, p *corev1.Pod) {
	ready := corev1.ConditionTrue
	for _, g := range p.Spec.ReadinessGates {
		if condition(p, g.ConditionType) != corev1.ConditionTrue {
			ready = corev1.ConditionFalse
		}
	}
	if p.Status.Phase == corev1.PodRunning && condition(p, corev1.ContainersReady) == corev1.ConditionTrue && condition(p, corev1.PodReady) == ready {
		return
	}
	q := p.DeepCopy()
	if q.Status.PodIP == "" {
		k.mu.Lock()
		k.nextIP++
		q.Status.PodIP = fmt.Sprintf("10.0.%d.%d", k.nextIP/250, k.nextIP%250+1)
		k.mu.Unlock()
		q.Status.PodIPs = []corev1.PodIP{{IP: q.Status.PodIP}}
	}
	q.Status.Phase = corev1.PodRunning
	now := metav1.Now()
	if q.Status.StartTime == nil {
		q.Status.StartTime = &now
	}
	var conds []corev1.PodCondition
	for _, cd := range q.Status.Conditions {
		if cd.Type != corev1.PodReady && cd.Type != corev1.ContainersReady {
			conds = append(conds, cd)
		}
	}
	q.Status.Conditions = append(conds,
		corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		corev1.PodCondition{Type: corev1.PodReady, Status: ready, LastTransitionTime: now})
	// UpdateStatus carries the resourceVersion read: a condition the
	// registrar wrote since makes it conflict, and the next pass retries.
	if _, err := c.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, q, metav1.UpdateOptions{}); err == nil {
		k.mu.Lock()
		k.n++
		k.mu.Unlock()
	} else if !strings.Contains(err.Error(), "conflict") && !strings.Contains(err.Error(), "modified") {
		return
	}
}
