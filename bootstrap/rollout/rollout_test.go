package rollout_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kops/upup/pkg/fi/cloudup/awsup"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/trellis-dev/trellis/bootstrap"
	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/bootstrap/rollout"
	"github.com/trellis-dev/trellis/bootstrap/statestore"
	"github.com/trellis-dev/trellis/internal/awsemu"
	"github.com/trellis-dev/trellis/internal/testutil/cluster"
)

const boot = 400 * time.Millisecond // simulated boot time of a new node

// The images registered in the emulator for each env.
var oldImage, newImage string

// env: a kops cluster created with `trellis cluster create --yes` on the AWS
// API emulator (moto, through the AWS SDK over HTTP: its ASGs launch and
// terminate instances), the real apiserver, controller-manager (its
// disruption controller keeps PDB status, so evictions are really refused)
// and scheduler, and a simulated kubelet in the test that turns instances
// into nodes.
type env struct {
	t       testing.TB
	cloud   awsup.AWSCloud
	calls   *awsemu.FaultProxy
	aws     *recordingCloud
	cp      *cluster.ControlPlane
	c       kubernetes.Interface
	store   rollout.Store
	cluster string
	groups  map[string]int // group -> size

	mu         sync.Mutex
	firstSeen  map[string]time.Time
	broken     string // nodes of instances on this launch-template version never become Ready
	violations []string
	lastWhy    string
	// The simulated kubelets' passes: when the last began, and how long
	// the longest took (a failed test prints them).
	kubeletPass, kubeletLongest time.Duration
	kubeletAt                   time.Time
	// clock of the rollers (nil: the real one).
	clock clock.Clock
	// What a rollout in a child process needs (crash_test.go): the
	// emulator behind the fault proxy, kops's cache, the state store; emu
	// reaches the emulator directly.
	emulatorURL, cacheDir, state string
	emu                          *awsemu.Clients
	// progress of the rollers (nil: none).
	progress io.Writer
}

// emulator is the package's one AWS API emulator, reset for each env.
var emulator struct {
	once  sync.Once
	srv   *awsemu.Server
	proxy *awsemu.FaultProxy
	err   error
}

func startEmulator(t testing.TB) (*awsemu.Server, *awsemu.FaultProxy) {
	t.Helper()
	emulator.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		if emulator.srv, emulator.err = awsemu.Start(ctx, awsemu.Options{}); emulator.err != nil {
			return
		}
		emulator.proxy, emulator.err = awsemu.NewFaultProxy(emulator.srv.URL)
	})
	if emulator.err != nil {
		t.Fatalf("AWS API emulator: %v (hack/test-deps.sh checks for it)", emulator.err)
	}
	if err := emulator.srv.Reset(context.Background()); err != nil {
		t.Fatal(err)
	}
	emulator.proxy.Clear()
	emulator.proxy.ResetCalls()
	return emulator.srv, emulator.proxy
}

func TestMain(m *testing.M) {
	if c := os.Getenv(childEnv); c != "" {
		if err := runChild(c); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	if emulator.srv != nil {
		emulator.srv.Stop()
	}
	os.Exit(code)
}

func newEnv(t testing.TB) *env {
	t.Helper()
	t.Setenv("KOPS_RUN_TOO_NEW_VERSION", "1")
	srv, proxy := startEmulator(t)
	cacheDir := t.TempDir()
	if err := (bootstrap.Env{CacheDir: cacheDir, Emulator: proxy.URL, Region: "us-west-2"}).Setup(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	seed := awsemu.NewClients(srv.URL, "us-west-2")
	if err := seed.Bucket(ctx, "trellis-state"); err != nil {
		t.Fatal(err)
	}
	var err error
	if oldImage, err = seed.Image(ctx, "trellis-node-old", "x86_64"); err != nil {
		t.Fatal(err)
	}
	if newImage, err = seed.Image(ctx, "trellis-node-new", "x86_64"); err != nil {
		t.Fatal(err)
	}
	l, err := definition.Load("../../clusters/staging-us-west-2.yaml")
	if err != nil {
		t.Fatal(err)
	}
	def := l.ClusterDefinition
	def.ControlPlane.Image = oldImage
	general := def.InstanceGroups[0]
	general.Image = oldImage
	general.MinSize, general.MaxSize = new(int32(4)), new(int32(8))
	batch := general
	batch.Name, batch.MinSize, batch.MaxSize = "batch", new(int32(3)), new(int32(6))
	batch.Labels = map[string]string{"trellis.dev/pool": "batch"}
	def.InstanceGroups = []definition.InstanceGroup{general, batch}
	state := "s3://trellis-state/clusters"
	e := &env{t: t, groups: map[string]int{"general": 4, "batch": 3}, firstSeen: map[string]time.Time{}, calls: proxy,
		emulatorURL: proxy.URL, cacheDir: cacheDir, state: state, emu: seed}
	if _, err := bootstrap.Create(ctx, def, bootstrap.ApplyOptions{StateStore: state, Yes: true, Out: io.Discard}); err != nil {
		t.Fatal(err)
	}
	e.cluster = "staging-us-west-2.k8s.trellis.example"
	if e.cloud, err = awsup.NewAWSCloud(def.Region, map[string]string{awsup.TagClusterName: e.cluster}); err != nil {
		t.Fatal(err)
	}
	cs, err := statestore.Open(ctx, state)
	if err != nil {
		t.Fatal(err)
	}
	e.aws = &recordingCloud{AWSCloud: &rollout.AWSCloud{AWS: e.cloud, Cluster: e.cluster, Clientset: cs}, terminated: map[string]int{}}
	e.store, err = rollout.NewVFSStore(state, e.cluster)
	if err != nil {
		t.Fatal(err)
	}

	// The simulated kubelets do not heartbeat: without the node lifecycle
	// controller, nodes stay as the simulation says.
	e.cp = cluster.Start(t, cluster.Options{ControllerManager: true, Scheduler: true,
		ControllerManagerFlags: []string{"--controllers=*,-node-lifecycle-controller"}})
	e.c = e.cp.Client
	kctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	go e.kubelet(kctx)
	t.Cleanup(func() {
		if t.Failed() {
			e.dump()
		}
	})
	e.eventually("7 Ready nodes", 30*time.Second, func() bool { return e.readyNodes("") == 7 })
	e.workloads()
	go e.watchInvariants(kctx)
	return e
}

// recordingCloud counts real terminations (of instances that existed).
type recordingCloud struct {
	*rollout.AWSCloud
	mu         sync.Mutex
	terminated map[string]int
}

func (r *recordingCloud) Terminate(ctx context.Context, group, id string) error {
	return r.record(ctx, group, id, r.AWSCloud.Terminate)
}

func (r *recordingCloud) Replace(ctx context.Context, group, id string) error {
	return r.record(ctx, group, id, r.AWSCloud.Replace)
}

func (r *recordingCloud) record(ctx context.Context, group, id string, terminate func(context.Context, string, string) error) error {
	insts, _, err := r.Instances(ctx, group)
	if err != nil {
		return err
	}
	has := func(insts []rollout.Instance) bool {
		return slices.ContainsFunc(insts, func(i rollout.Instance) bool { return i.ID == id })
	}
	existed := has(insts)
	terr := terminate(ctx, group, id)
	if terr != nil {
		// A run killed while the call was in flight: the cloud may have
		// done it all the same, and the next run will not do it again.
		after, _, err := r.Instances(context.Background(), group)
		if err != nil || has(after) {
			return terr
		}
	}
	if existed {
		r.mu.Lock()
		r.terminated[id]++
		r.mu.Unlock()
	}
	return terr
}

func (e *env) eventually(what string, timeout time.Duration, cond func() bool) {
	e.t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		e.t.Fatalf("timed out after %s waiting for %s (%s)", timeout, what, e.lastWhy)
	}
}

// instances returns every group's instances.
func (e *env) instances() map[string][]rollout.Instance { return e.instancesWithin(0) }

// instancesWithin bounds each group's call to d (0: unbounded). The
// simulated kubelets bound theirs: one emulator call that hangs on a loaded
// machine must not stop them (terminating pods would stay on their nodes).
func (e *env) instancesWithin(d time.Duration) map[string][]rollout.Instance {
	out := map[string][]rollout.Instance{}
	for g := range e.groups {
		ctx, cancel := context.Background(), context.CancelFunc(func() {})
		if d > 0 {
			ctx, cancel = context.WithTimeout(ctx, d)
		}
		insts, _, err := e.aws.Instances(ctx, g)
		cancel()
		if err == nil {
			out[g] = insts
		}
	}
	return out
}

// kubelet plays the kubelets of the emulator's instances (its ASGs launch
// and terminate them): a node registers after the boot time, pods bound to
// nodes run Ready, terminating pods go away, and nodes of terminated
// instances leave.
func (e *env) kubelet(ctx context.Context) {
	for ctx.Err() == nil {
		start := time.Now()
		e.mu.Lock()
		if !e.kubeletAt.IsZero() {
			e.kubeletPass = start.Sub(e.kubeletAt)
			e.kubeletLongest = max(e.kubeletLongest, e.kubeletPass)
		}
		e.kubeletAt = start
		e.mu.Unlock()
		live := map[string]bool{}
		insts := e.instancesWithin(10 * time.Second)
		for g, insts := range insts {
			for _, in := range insts {
				live[in.ID] = true
				e.mu.Lock()
				seen, ok := e.firstSeen[in.ID]
				if !ok {
					e.firstSeen[in.ID] = time.Now()
				}
				broken := e.broken != "" && in.Version == e.broken
				e.mu.Unlock()
				if !ok || time.Since(seen) < boot {
					continue
				}
				name := "node-" + in.ID
				if n, err := e.c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err == nil {
					if len(n.Status.Conditions) == 0 || (!broken && slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeNotReady })) {
						e.setNodeStatus(ctx, n, broken)
					}
					continue
				}
				n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kops.k8s.io/instancegroup": g, "kubernetes.io/hostname": name}},
					Spec: corev1.NodeSpec{ProviderID: "aws:///us-west-2a/" + in.ID}}
				n, err := e.c.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
				if err != nil {
					continue
				}
				e.setNodeStatus(ctx, n, broken)
			}
		}
		nodes, err := e.c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err == nil && len(insts) == len(e.groups) {
			for _, n := range nodes.Items {
				id := n.Spec.ProviderID[strings.LastIndexByte(n.Spec.ProviderID, '/')+1:]
				if !live[id] {
					_ = e.c.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
				}
			}
		}
		pods, err := e.c.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err == nil {
			for i := range pods.Items {
				p := &pods.Items[i]
				switch {
				case p.DeletionTimestamp != nil:
					_ = e.c.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))})
				case p.Spec.NodeName != "" && !ready(p):
					p.Status.Phase = corev1.PodRunning
					p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}, {Type: corev1.ContainersReady, Status: corev1.ConditionTrue}}
					_, _ = e.c.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// dump logs the nodes and the shop's pods as the apiserver has them, and
// the simulated kubelets' pace: what a failed drain waited on.
func (e *env) dump() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e.mu.Lock()
	e.t.Logf("simulated kubelets: last pass began %s ago, previous took %s, longest %s", time.Since(e.kubeletAt).Round(time.Millisecond), e.kubeletPass.Round(time.Millisecond), e.kubeletLongest.Round(time.Millisecond))
	e.mu.Unlock()
	nodes, err := e.c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Logf("nodes: %v", err)
		return
	}
	have := map[string]bool{}
	for _, n := range nodes.Items {
		have[n.Name] = true
		e.t.Logf("node %s group %s unschedulable %v taints %d created %s", n.Name, n.Labels["kops.k8s.io/instancegroup"], n.Spec.Unschedulable, len(n.Spec.Taints), n.CreationTimestamp.Format("15:04:05"))
	}
	pods, err := e.c.CoreV1().Pods("shop").List(ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Logf("pods: %v", err)
		return
	}
	for _, p := range pods.Items {
		del := ""
		if p.DeletionTimestamp != nil {
			del = " deleting since " + p.DeletionTimestamp.Format("15:04:05") + fmt.Sprintf(" finalizers %v", p.Finalizers)
		}
		e.t.Logf("pod %s on %q (node exists %v) phase %s ready %v created %s%s", p.Name, p.Spec.NodeName, have[p.Spec.NodeName], p.Status.Phase, ready(&p), p.CreationTimestamp.Format("15:04:05"), del)
	}
}

func (e *env) setNodeStatus(ctx context.Context, n *corev1.Node, broken bool) {
	status := corev1.ConditionTrue
	if broken {
		status = corev1.ConditionFalse
	}
	n.Status = corev1.NodeStatus{
		Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, LastHeartbeatTime: metav1.Now()}},
		Capacity:    corev1.ResourceList{corev1.ResourcePods: resourceQty("110"), corev1.ResourceCPU: resourceQty("8"), corev1.ResourceMemory: resourceQty("32Gi")},
		Allocatable: corev1.ResourceList{corev1.ResourcePods: resourceQty("110"), corev1.ResourceCPU: resourceQty("8"), corev1.ResourceMemory: resourceQty("32Gi")},
	}
	n, err := e.c.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
	if err != nil || broken {
		return
	}
	// The apiserver taints new nodes not-ready; with the node lifecycle
	// controller off, the simulation lifts the taint as it would.
	var taints []corev1.Taint
	for _, t := range n.Spec.Taints {
		if t.Key != corev1.TaintNodeNotReady {
			taints = append(taints, t)
		}
	}
	if len(taints) != len(n.Spec.Taints) {
		n.Spec.Taints = taints
		_, _ = e.c.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
	}
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// readyNodes counts Ready, schedulable nodes (of a group, or all).
func (e *env) readyNodes(group string) int {
	nodes, err := e.c.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return -1
	}
	n := 0
	for _, nd := range nodes.Items {
		if group != "" && nd.Labels["kops.k8s.io/instancegroup"] != group {
			continue
		}
		for _, c := range nd.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue && !nd.Spec.Unschedulable {
				n++
			}
		}
	}
	return n
}

// workloads: two Deployments with PDBs and a runtime DaemonSet.
func (e *env) workloads() {
	ctx := context.Background()
	for _, ns := range []string{"shop", "trellis-system"} {
		if _, err := e.c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			e.t.Fatal(err)
		}
	}
	pod := func(app string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
			Spec: corev1.PodSpec{TerminationGracePeriodSeconds: new(int64(0)), Containers: []corev1.Container{{Name: app, Image: app}}}}
	}
	for _, d := range []struct {
		name     string
		replicas int32
		minAvail int
	}{{"web", 6, 5}, {"api", 4, 3}} {
		dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: d.name, Namespace: "shop"}, Spec: appsv1.DeploymentSpec{
			Replicas: new(d.replicas), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": d.name}}, Template: pod(d.name)}}
		if _, err := e.c.AppsV1().Deployments("shop").Create(ctx, dep, metav1.CreateOptions{}); err != nil {
			e.t.Fatal(err)
		}
		min := intstr.FromInt(d.minAvail)
		pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: d.name, Namespace: "shop"}, Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: &min, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": d.name}}}}
		if _, err := e.c.PolicyV1().PodDisruptionBudgets("shop").Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
			e.t.Fatal(err)
		}
	}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "trellis-netd", Namespace: "trellis-system"}, Spec: appsv1.DaemonSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "trellis-netd"}}, Template: pod("trellis-netd")}}
	if _, err := e.c.AppsV1().DaemonSets("trellis-system").Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.eventually("workloads Ready", 60*time.Second, func() bool {
		pods, err := e.c.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		n := 0
		for i := range pods.Items {
			if ready(&pods.Items[i]) {
				n++
			}
		}
		if n != 6+4+7 {
			e.lastWhy = fmt.Sprintf("%d Ready pods of %d", n, len(pods.Items))
			for i := range pods.Items {
				if !ready(&pods.Items[i]) {
					e.lastWhy += fmt.Sprintf("; %s/%s on %q", pods.Items[i].Namespace, pods.Items[i].Name, pods.Items[i].Spec.NodeName)
				}
			}
		}
		return n == 6+4+7
	})
	e.eventually("PDBs observed", 30*time.Second, func() bool {
		pdbs, err := e.c.PolicyV1().PodDisruptionBudgets("shop").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, p := range pdbs.Items {
			if p.Status.ObservedGeneration < p.Generation || p.Status.CurrentHealthy < p.Status.DesiredHealthy {
				return false
			}
		}
		return len(pdbs.Items) == 2
	})
}

// watchInvariants checks, continuously, that no PDB is violated (fewer
// Ready pods than minAvailable) and that no group has fewer Ready
// schedulable nodes than its size (surge first: nothing unavailable).
func (e *env) watchInvariants(ctx context.Context) {
	for ctx.Err() == nil {
		e.checkInvariants(ctx)
		time.Sleep(50 * time.Millisecond)
	}
}

func (e *env) checkInvariants(ctx context.Context) {
	pdbs, err := e.c.PolicyV1().PodDisruptionBudgets("shop").List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	pods, err := e.c.CoreV1().Pods("shop").List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, pdb := range pdbs.Items {
		sel, _ := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		healthy := 0
		for i := range pods.Items {
			p := &pods.Items[i]
			if sel.Matches(labels.Set(p.Labels)) && p.DeletionTimestamp == nil && ready(p) {
				healthy++
			}
		}
		if healthy < pdb.Spec.MinAvailable.IntValue() {
			e.violate(fmt.Sprintf("PDB %s: %d Ready pods, minAvailable %d", pdb.Name, healthy, pdb.Spec.MinAvailable.IntValue()))
		}
	}
	for g, size := range e.groups {
		if n := e.readyNodes(g); n >= 0 && n < size && e.broken == "" {
			e.violate(fmt.Sprintf("group %s: %d available nodes, size %d (maxUnavailable 0)", g, n, size))
		}
	}
}

func (e *env) violate(msg string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.violations) < 20 {
		e.violations = append(e.violations, time.Now().Format("15:04:05.000")+" "+msg)
	}
}

func (e *env) roller(owner string, onStep func(rollout.State)) (*rollout.Roller, context.Context) {
	e.t.Helper()
	ctx := context.Background()
	kc, err := rollout.NewKubeCluster(ctx, e.c)
	if err != nil {
		e.t.Fatal(err)
	}
	// The canary test's nodes never get Ready: its gate gives up sooner.
	gate := time.Minute
	if e.broken != "" {
		gate = 15 * time.Second
	}
	return rollout.New(e.aws, kc, e.store, rollout.Options{
		Image:  newImage,
		Groups: map[string]rollout.Strategy{"general": {MaxSurge: 2, Canary: true}, "batch": {MaxSurge: 2, Canary: true}},
		Budget: 3, GateTimeout: gate, Owner: owner, LockTTL: lockTTL, Poll: 100 * time.Millisecond,
		// Generous: CI runs other packages' tests beside these on 2 cores.
		Drain: rollout.DrainOptions{Timeout: 2 * time.Minute}, OnStep: onStep, Clock: e.clock, Progress: e.progress,
	}, nil), ctx
}

// lockTTL is long enough that a loaded machine never lets a lock expire
// by accident between one run and the next; the test that needs an expired
// lock moves the clock past it.
const lockTTL = time.Minute

// later is the real clock as seen d later: a run that starts after a lock
// expired, without the test waiting for it to expire.
type later struct {
	clock.RealClock
	d time.Duration
}

func (l later) Now() time.Time                  { return time.Now().Add(l.d) }
func (l later) Since(t time.Time) time.Duration { return l.Now().Sub(t) }

// finalChecks: every old instance replaced exactly once, no new instance
// terminated, every instance on the new image, no invariant violated.
func (e *env) finalChecks(st *rollout.State, old map[string]bool) {
	e.t.Helper()
	if st.Status != rollout.StatusDone {
		e.t.Fatalf("status %s (%s), want Done", st.Status, st.Message)
	}
	for _, g := range st.Groups {
		e.t.Logf("group %s: old %v, replaced %v, versions %s -> %s", g.Name, g.Old, g.Replaced, g.PrevVersion, g.NewVersion)
	}
	e.aws.mu.Lock()
	defer e.aws.mu.Unlock()
	for id, n := range e.aws.terminated {
		if !old[id] {
			e.t.Errorf("new instance %s was terminated", id)
		}
		if n != 1 {
			e.t.Errorf("instance %s terminated %d times", id, n)
		}
	}
	for id := range old {
		if e.aws.terminated[id] != 1 {
			e.t.Errorf("old instance %s replaced %d times, want 1", id, e.aws.terminated[id])
		}
	}
	for g, insts := range e.instances() {
		if len(insts) != e.groups[g] {
			e.t.Errorf("group %s has %d instances, want %d", g, len(insts), e.groups[g])
		}
		for _, in := range insts {
			if old[in.ID] {
				e.t.Errorf("group %s still runs old instance %s", g, in.ID)
			}
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.violations) > 0 {
		e.t.Errorf("%d invariant violations, e.g.\n%s", len(e.violations), strings.Join(e.violations, "\n"))
	}
}

func (e *env) oldInstances() map[string]bool {
	old := map[string]bool{}
	for _, insts := range e.instances() {
		for _, in := range insts {
			old[in.ID] = true
		}
	}
	return old
}

func TestIntegrationRollout(t *testing.T) {
	e := newEnv(t)
	old := e.oldInstances()
	// The images of the instances, one of them unknown to EC2 (a group can
	// list an instance before EC2 shows it): the others still answer.
	const unknown = "i-0123456789abcdef0"
	ids := append(slices.Collect(maps.Keys(old)), unknown)
	images, err := e.aws.InstanceImages(context.Background(), ids)
	if err != nil {
		t.Fatalf("images of %d instances and an unknown one: %v", len(old), err)
	}
	for id := range old {
		if images[id] != oldImage {
			t.Errorf("instance %s runs %q, want %s", id, images[id], oldImage)
		}
	}
	if img, ok := images[unknown]; ok {
		t.Errorf("unknown instance %s runs %q, want it absent", unknown, img)
	}
	var steps int
	var maxSurged int
	var out bytes.Buffer
	e.progress = &out
	r, ctx := e.roller("run-1", func(s rollout.State) {
		steps++
		surged := 0
		for _, g := range s.Groups {
			if g.Batch != nil {
				surged += len(g.Batch.Old)
			}
		}
		maxSurged = max(maxSurged, surged)
		e.checkInvariants(context.Background())
	})
	start := time.Now()
	st, err := r.Start(ctx, e.cluster)
	if err != nil {
		t.Fatal(err)
	}
	e.finalChecks(st, old)
	if maxSurged > 3 {
		t.Errorf("%d nodes surged at once, budget 3", maxSurged)
	}
	t.Logf("replaced %d nodes in %s (%d steps, at most %d surged at once)", len(old), time.Since(start).Round(100*time.Millisecond), steps, maxSurged)
	// The progress: a line per step with the time since the run began,
	// each batch's nodes replaced of the group's and of all.
	for _, want := range []string{"] general: batch 1/3 (canary) done: 1/4 replaced", "] general: batch 3/3 done: 4/4 replaced", "] batch: batch 2/2 done: 3/3 replaced",
		"] general: done, 4/4 replaced", " Done: 7/7 nodes replaced"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the progress has no line with %q:\n%s", want, out.String())
		}
	}
	// The image again, as a run restarted after SetImage and before its
	// first save does: the previous image is still the old one, which a
	// rollback goes back to.
	ch, err := e.aws.SetImage(ctx, "general", newImage)
	if err != nil {
		t.Fatal(err)
	}
	if ch.PrevImage != oldImage || ch.PrevVersion == ch.NewVersion {
		t.Errorf("image set again: %+v, want the previous image %s and version", ch, oldImage)
	}
}

// progress is one line of a state: each group's replaced count and batch.
func progress(st *rollout.State) string {
	var parts []string
	for _, g := range st.Groups {
		p := fmt.Sprintf("%s %d/%d replaced", g.Name, len(g.Replaced), len(g.Old))
		if b := g.Batch; b != nil {
			p += fmt.Sprintf(", batch %d %s (old %d, drained %d)", b.N, b.Step, len(b.Old), len(b.Drained))
		}
		if g.Done {
			p += ", done"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "; ")
}

func TestIntegrationCanaryNeverReady(t *testing.T) {
	e := newEnv(t)
	old := e.oldInstances()
	// Nodes launched from the new launch-template version never get Ready.
	insts := e.instances()["general"]
	e.mu.Lock()
	e.broken = fmt.Sprint(atoi(insts[0].Version) + 1)
	e.mu.Unlock()
	// The gates wait on a fake clock: once both canaries are at their
	// gates with nodes that registered and are not Ready, the test steps
	// it past the gate timeout instead of waiting for it.
	fc := clocktesting.NewFakeClock(time.Now())
	e.clock = fc
	var gmu sync.Mutex
	atGate := map[string]bool{}
	r, ctx := e.roller("run", func(s rollout.State) {
		gmu.Lock()
		defer gmu.Unlock()
		for _, g := range s.Groups {
			atGate[g.Name] = g.Batch != nil && g.Batch.Step == rollout.StepGate
		}
	})
	var st *rollout.State
	var err error
	done := make(chan struct{})
	go func() { defer close(done); st, err = r.Start(ctx, e.cluster) }()
	e.eventually("both canaries at their gates, their nodes registered and not Ready", 60*time.Second, func() bool {
		gmu.Lock()
		gates := atGate["general"] && atGate["batch"]
		gmu.Unlock()
		nodes, lerr := e.c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if !gates || lerr != nil {
			return false
		}
		notReady := 0
		for _, n := range nodes.Items {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionFalse {
					notReady++
				}
			}
		}
		return notReady == 2
	})
	e.eventually("the gates to give up", 30*time.Second, func() bool {
		select {
		case <-done:
			return true
		default:
			fc.Step(15 * time.Second)
			return false
		}
	})
	if !errors.Is(err, rollout.ErrGate) || st.Status != rollout.StatusFailed {
		t.Fatalf("Start: %v (status %s), want a gate failure", err, st.Status)
	}
	for _, g := range st.Groups {
		if len(g.Replaced) != 0 || g.Batch == nil || len(g.Batch.Old) != 1 || g.Batch.Step != rollout.StepGate {
			t.Errorf("group %s: replaced %v, batch %+v; want stopped at the canary's gate", g.Name, g.Replaced, g.Batch)
		}
	}
	// Every old node still serves: none cordoned, none terminated.
	e.aws.mu.Lock()
	if len(e.aws.terminated) != 0 {
		t.Errorf("terminated %v", e.aws.terminated)
	}
	e.aws.mu.Unlock()
	for g, size := range e.groups {
		if n := e.readyNodes(g); n != size {
			t.Errorf("group %s: %d schedulable Ready nodes, want its %d old ones", g, n, size)
		}
	}
	ids := make([]string, 0, len(old))
	for id := range old {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	t.Logf("stopped at the canary: %s", st.Message)
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		panic(fmt.Sprintf("not a number: %q", s))
	}
	return n
}

func resourceQty(s string) resource.Quantity { return resource.MustParse(s) }

// TestIntegrationPauseResumeRollback: a rollout pauses after each group's
// canary, resumes to the end, and is rolled back onto the old image.
func TestIntegrationPauseResumeRollback(t *testing.T) {
	e := newEnv(t)
	old := e.oldInstances()
	kc, err := rollout.NewKubeCluster(context.Background(), e.c)
	if err != nil {
		t.Fatal(err)
	}
	opts := rollout.Options{
		Image:       newImage,
		Groups:      map[string]rollout.Strategy{"general": {MaxSurge: 2, Canary: true, PauseAfterCanary: true}, "batch": {MaxSurge: 3, Canary: true, PauseAfterCanary: true}},
		GateTimeout: time.Minute, Owner: "op", Poll: 100 * time.Millisecond, Drain: rollout.DrainOptions{Timeout: 2 * time.Minute},
	}
	st, err := rollout.New(e.aws, kc, e.store, opts, nil).Start(context.Background(), e.cluster)
	if err != nil || st.Status != rollout.StatusPaused {
		t.Fatalf("first run: %v, status %s; want Paused after a canary", err, st.Status)
	}
	replaced := 0
	for _, g := range st.Groups {
		replaced += len(g.Replaced)
	}
	if replaced < 1 || replaced > 2 {
		t.Fatalf("paused with %d nodes replaced, want the canaries (1 or 2)", replaced)
	}
	opts.Image = "" // resume what the store holds
	for range 3 {   // each group's canary may pause once
		st, err = rollout.New(e.aws, kc, e.store, opts, nil).Start(context.Background(), e.cluster)
		if err != nil {
			t.Fatal(err)
		}
		if st.Status == rollout.StatusDone {
			break
		}
	}
	e.finalChecks(st, old)

	// Roll back onto the previous image recorded by the rollout.
	prev := st.Groups["general"].PrevImage
	if prev != oldImage {
		t.Fatalf("previous image %q, want %q", prev, oldImage)
	}
	e.aws.mu.Lock()
	e.aws.terminated = map[string]int{}
	e.aws.mu.Unlock()
	replacedOnce := e.oldInstances()
	opts.Image, opts.Groups = prev, map[string]rollout.Strategy{"general": {MaxSurge: 2}, "batch": {MaxSurge: 2}}
	st, err = rollout.New(e.aws, kc, e.store, opts, nil).Start(context.Background(), e.cluster)
	if err != nil {
		t.Fatal(err)
	}
	e.finalChecks(st, replacedOnce)
	for _, g := range st.Groups {
		if g.ImageID != oldImage {
			t.Errorf("group %s rolled to %s, want %s", g.Name, g.ImageID, oldImage)
		}
	}
}
