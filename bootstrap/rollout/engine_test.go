package rollout_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/trellis-dev/trellis/bootstrap/rollout"
)

// The engine's waits (lock, gate timeout, bake time, drain timeout) on a
// fake clock, with an in-memory cloud, cluster and store: no real time
// passes.

// memCloud launches instances of a group's current version up to its
// desired capacity at once.
type memCloud struct {
	mu      sync.Mutex
	n       int
	version map[string]int
	desired map[string]int
	insts   map[string][]rollout.Instance
	images  map[string][]string // group -> image of each version (index 1 on)
}

func newMemCloud(groups map[string]int) *memCloud {
	c := &memCloud{version: map[string]int{}, desired: map[string]int{}, insts: map[string][]rollout.Instance{}, images: map[string][]string{}}
	for g, n := range groups {
		c.version[g], c.desired[g], c.images[g] = 1, n, []string{"", "ami-old"}
		c.launch(g)
	}
	return c
}

func (c *memCloud) launch(g string) {
	for len(c.insts[g]) < c.desired[g] {
		c.n++
		c.insts[g] = append(c.insts[g], rollout.Instance{ID: fmt.Sprintf("i-%d", c.n), Version: fmt.Sprint(c.version[g]), InService: true})
	}
}

func (c *memCloud) ResolveImage(_ context.Context, image string) (string, error) { return image, nil }

func (c *memCloud) Instances(_ context.Context, g string) ([]rollout.Instance, int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.insts[g]), c.desired[g], nil
}

// SetImage makes a version for an image; for "" (relaunch) it reports the
// newest version, which bump made as an apply would.
func (c *memCloud) SetImage(_ context.Context, g, image string) (rollout.ImageChange, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if image == "" {
		return rollout.ImageChange{PrevVersion: fmt.Sprint(c.version[g] - 1), PrevImage: "ami-old", NewVersion: fmt.Sprint(c.version[g])}, nil
	}
	prev := c.version[g]
	c.version[g]++
	c.images[g] = append(c.images[g], image)
	return rollout.ImageChange{PrevVersion: fmt.Sprint(prev), PrevImage: c.images[g][prev], NewVersion: fmt.Sprint(c.version[g])}, nil
}

func (c *memCloud) InstanceImages(_ context.Context, ids []string) (map[string]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]string{}
	for g, insts := range c.insts {
		for _, in := range insts {
			if slices.Contains(ids, in.ID) {
				var v int
				_, _ = fmt.Sscan(in.Version, &v)
				out[in.ID] = c.images[g][v]
			}
		}
	}
	return out, nil
}

// bump makes a new launch-template version of the group, as a cluster
// upgrade's apply does, without touching its instances.
func (c *memCloud) bump(g string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.version[g]++
	c.images[g] = append(c.images[g], c.images[g][len(c.images[g])-1])
}

func (c *memCloud) SetDesired(_ context.Context, g string, n int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.desired[g] = n
	c.launch(g)
	return nil
}

func (c *memCloud) Terminate(_ context.Context, g, id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i := slices.IndexFunc(c.insts[g], func(in rollout.Instance) bool { return in.ID == id }); i >= 0 {
		c.insts[g] = slices.Delete(c.insts[g], i, i+1)
		c.desired[g]--
	}
	return nil
}

func (c *memCloud) Replace(_ context.Context, g, id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i := slices.IndexFunc(c.insts[g], func(in rollout.Instance) bool { return in.ID == id }); i >= 0 {
		c.insts[g] = slices.Delete(c.insts[g], i, i+1)
		c.launch(g)
	}
	return nil
}

// memCluster: every instance has a node at once; ready says which pass.
type memCluster struct{ ready func(*corev1.Node) bool }

func (m memCluster) Node(_ context.Context, id string) (*corev1.Node, error) {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-" + id}}, nil
}

func (m memCluster) Ready(_ context.Context, n *corev1.Node) (bool, string, error) {
	if m.ready(n) {
		return true, "", nil
	}
	return false, "not Ready", nil
}

func (m memCluster) Taint(context.Context, *corev1.Node, string) error { return nil }

func (m memCluster) Drain(context.Context, *corev1.Node, rollout.DrainOptions, func(string)) error {
	return nil
}

type memStore struct {
	mu sync.Mutex
	b  []byte
}

func (s *memStore) Load(context.Context) (*rollout.State, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.b == nil {
		return nil, nil
	}
	var st rollout.State
	return &st, json.Unmarshal(s.b, &st)
}

func (s *memStore) Save(_ context.Context, st *rollout.State) error {
	b, err := json.Marshal(st)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b = b
	return err
}

// started is a rollout running in the background.
type started struct {
	done chan struct{}
	st   *rollout.State
	err  error
}

func start(ctx context.Context, r *rollout.Roller) *started {
	s := &started{done: make(chan struct{})}
	go func() { defer close(s.done); s.st, s.err = r.Start(ctx, "test") }()
	return s
}

func (s *started) finished() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// waitWaiting waits until the rollout blocks on the fake clock (or ends).
func waitWaiting(t *testing.T, fc *clocktesting.FakeClock, s *started) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return fc.HasWaiters() || s.finished(), nil
	})
	if err != nil {
		t.Fatal("the rollout never waited on its clock")
	}
}

// waitFor waits until the rollout has finished, or cond holds while at
// least n timers wait on fc. HasWaiters alone says little: the lock's
// renewal waits on the clock for the whole rollout.
func waitFor(t *testing.T, fc *clocktesting.FakeClock, s *started, n int, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return s.finished() || (cond() && fc.Waiters() >= n), nil
	})
	if err != nil {
		t.Fatalf("the rollout never waited on its clock (%d waiters, want %d)", fc.Waiters(), n)
	}
}

func TestLockExpiresOnTheClock(t *testing.T) {
	t.Parallel()
	fc := clocktesting.NewFakeClock(time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC))
	cloud, store := newMemCloud(map[string]int{"general": 3}), &memStore{}
	cluster := memCluster{ready: func(*corev1.Node) bool { return true }}
	opts := func(owner string, onStep func(rollout.State)) rollout.Options {
		return rollout.Options{Image: "ami-new", Groups: map[string]rollout.Strategy{"general": {MaxSurge: 1}}, Owner: owner,
			LockTTL: time.Minute, Clock: fc, OnStep: onStep}
	}
	// The first run is killed after its first step: its lock stays.
	ctx, cancel := context.WithCancel(context.Background())
	if _, err := rollout.New(cloud, cluster, store, opts("first", func(rollout.State) { cancel() }), nil).Start(ctx, "test"); !errors.Is(err, context.Canceled) {
		t.Fatalf("first run: %v, want context.Canceled", err)
	}
	fc.Step(time.Minute - time.Second)
	if _, err := rollout.New(cloud, cluster, store, opts("second", nil), nil).Start(context.Background(), "test"); !errors.Is(err, rollout.ErrLocked) {
		t.Fatalf("second owner before the lock expires: %v, want ErrLocked", err)
	}
	fc.Step(time.Second + time.Nanosecond)
	st, err := rollout.New(cloud, cluster, store, opts("second", nil), nil).Start(context.Background(), "test")
	if err != nil || st.Status != rollout.StatusDone {
		t.Fatalf("second owner after the lock expired: %v (status %v), want Done", err, st)
	}
	if got := len(st.Groups["general"].Replaced); got != 3 {
		t.Errorf("replaced %d nodes, want 3", got)
	}
}

func TestGateTimeoutOnTheClock(t *testing.T) {
	t.Parallel()
	fc := clocktesting.NewFakeClock(time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC))
	cloud := newMemCloud(map[string]int{"general": 3})
	// Nodes of the new version never pass the gates.
	cluster := memCluster{ready: func(n *corev1.Node) bool { return n.Name <= "node-i-3" }}
	var mu sync.Mutex
	var last rollout.State
	opts := rollout.Options{Image: "ami-new", Groups: map[string]rollout.Strategy{"general": {MaxSurge: 2, Canary: true}}, Owner: "op", Clock: fc,
		OnStep: func(s rollout.State) { mu.Lock(); last = s; mu.Unlock() }}
	r := rollout.New(cloud, cluster, &memStore{}, opts, nil) // defaults: 15m gate timeout, 2s poll
	atGate := func() bool {
		mu.Lock()
		defer mu.Unlock()
		g := last.Groups["general"]
		return g != nil && g.Batch != nil && g.Batch.Step == rollout.StepGate
	}
	s := start(context.Background(), r)
	// Two waiters: the lock's renewal and the gate's poll. With
	// HasWaiters alone the clock could move before the gate took its
	// deadline, and the timeout below never came.
	waitFor(t, fc, s, 2, atGate)
	// Just short of the timeout the gate still waits.
	fc.Step(15*time.Minute - 2*time.Second)
	waitFor(t, fc, s, 2, atGate)
	if s.finished() {
		t.Fatalf("the gate gave up before its timeout: %v", s.err)
	}
	mu.Lock()
	if b := last.Groups["general"].Batch; b == nil || b.Step != rollout.StepGate || len(b.Old) != 1 {
		t.Errorf("batch %+v, want the canary waiting at its gate", b)
	}
	mu.Unlock()
	fc.Step(4 * time.Second)
	<-s.done
	if !errors.Is(s.err, rollout.ErrGate) || s.st.Status != rollout.StatusFailed || !strings.Contains(s.err.Error(), "after 15m0s: node node-i-4: not Ready") {
		t.Fatalf("Start: %v (status %s), want a gate failure after 15m naming the canary's node", s.err, s.st.Status)
	}
}

func TestBakeTimeOnTheClock(t *testing.T) {
	t.Parallel()
	fc := clocktesting.NewFakeClock(time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC))
	cloud := newMemCloud(map[string]int{"general": 2})
	var mu sync.Mutex
	replaced := 0
	opts := rollout.Options{Image: "ami-new", Groups: map[string]rollout.Strategy{"general": {MaxSurge: 1, BakeTime: 10 * time.Minute}}, Owner: "op", Clock: fc,
		OnStep: func(s rollout.State) { mu.Lock(); replaced = len(s.Groups["general"].Replaced); mu.Unlock() }}
	r := rollout.New(cloud, memCluster{ready: func(*corev1.Node) bool { return true }}, &memStore{}, opts, nil)
	s := start(context.Background(), r)
	replacedNow := func() int { mu.Lock(); defer mu.Unlock(); return replaced }
	for batch := 1; batch <= 2; batch++ {
		// The lock's renewal always waits on the clock too: the bake is
		// waiting once the batch is recorded and a second waiter is there.
		waitFor(t, fc, s, 2, func() bool { return replacedNow() == batch })
		fc.Step(10*time.Minute - time.Second)
		if s.finished() || replacedNow() != batch {
			t.Fatalf("batch %d: %d replaced (finished %v) before the bake time was up", batch, replacedNow(), s.finished())
		}
		fc.Step(time.Second)
	}
	<-s.done
	if s.err != nil || s.st.Status != rollout.StatusDone {
		t.Fatalf("Start: %v (status %s), want Done", s.err, s.st.Status)
	}
}

// TestDrainTimeoutOnTheClock: evictions refused by a PDB are retried until
// the drain timeout, on the cluster's clock, and the PDB is named.
func TestDrainTimeoutOnTheClock(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "shop", Labels: map[string]string{"app": "web"}}, Spec: corev1.PodSpec{NodeName: "node-a"}}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"},
		Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	c := fake.NewClientset(node, pod, pdb)
	var evictions int
	var mu sync.Mutex
	c.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		mu.Lock()
		evictions++
		mu.Unlock()
		return true, nil, apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
	})
	kc, err := rollout.NewKubeCluster(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	fc := clocktesting.NewFakeClock(time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC))
	kc.Clock = fc
	errc := make(chan error, 1)
	var blocked []string
	go func() {
		errc <- kc.Drain(ctx, node, rollout.DrainOptions{Timeout: 10 * time.Minute}, func(p string) { mu.Lock(); blocked = append(blocked, p); mu.Unlock() })
	}()
	for range 3 { // retried every 500ms, not sooner
		if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) { return fc.HasWaiters(), nil }); err != nil {
			t.Fatal("the drain never waited on its clock")
		}
		fc.Step(500 * time.Millisecond)
	}
	if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) { return fc.HasWaiters(), nil }); err != nil {
		t.Fatal("the drain never waited on its clock")
	}
	fc.Step(10 * time.Minute)
	err = <-errc
	if err == nil || !strings.Contains(err.Error(), "1 pods still on the node after 10m0s (shop/web-1); evictions refused by PodDisruptionBudget shop/web") {
		t.Fatalf("Drain: %v, want a timeout naming the PDB", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if evictions != 5 || len(blocked) != 5 || blocked[0] != "shop/web" {
		t.Errorf("%d evictions, blocked %v; want 5 attempts (at 0, 0.5s, 1s, 1.5s, 10m1.5s) each reporting shop/web", evictions, blocked)
	}
}

// TestInPlaceNeverSurges: maxSurge 0, maxUnavailable 1 (a GPU pool with no
// spare capacity) replaces every node without ever raising the group's
// capacity, with at most one node missing at any step.
func TestInPlaceNeverSurges(t *testing.T) {
	t.Parallel()
	cloud, store := newMemCloud(map[string]int{"gpu": 3}), &memStore{}
	cluster := memCluster{ready: func(*corev1.Node) bool { return true }}
	var mu sync.Mutex
	var problems []string
	check := func(st rollout.State) {
		insts, desired, _ := cloud.Instances(context.Background(), "gpu")
		mu.Lock()
		defer mu.Unlock()
		if desired != 3 {
			problems = append(problems, fmt.Sprintf("desired capacity %d", desired))
		}
		if len(insts) < 2 {
			problems = append(problems, fmt.Sprintf("%d instances", len(insts)))
		}
		if b := st.Groups["gpu"].Batch; b != nil && b.Step == rollout.StepSurge {
			problems = append(problems, "a surge step")
		}
	}
	st, err := rollout.New(cloud, cluster, store, rollout.Options{Image: "ami-new",
		Groups: map[string]rollout.Strategy{"gpu": {MaxSurge: 0, MaxUnavailable: 1, Canary: true}}, OnStep: check}, nil).Start(context.Background(), "test")
	if err != nil || st.Status != rollout.StatusDone {
		t.Fatalf("in-place rollout: %v (%v)", err, st)
	}
	if got := len(st.Groups["gpu"].Replaced); got != 3 {
		t.Errorf("replaced %d nodes, want 3", got)
	}
	insts, _, _ := cloud.Instances(context.Background(), "gpu")
	for _, in := range insts {
		if in.Version != "2" {
			t.Errorf("instance %s still on version %s", in.ID, in.Version)
		}
	}
	if st.Budget != 1 {
		t.Errorf("budget %d, want 1 (maxUnavailable)", st.Budget)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Errorf("in-place rollout: %v", problems)
	}
}

func TestStrategyWithNoProgressRefused(t *testing.T) {
	t.Parallel()
	cloud, store := newMemCloud(map[string]int{"gpu": 1}), &memStore{}
	_, err := rollout.New(cloud, memCluster{ready: func(*corev1.Node) bool { return true }}, store, rollout.Options{Image: "ami-new",
		Groups: map[string]rollout.Strategy{"gpu": {}}}, nil).Start(context.Background(), "test")
	if err == nil || !strings.Contains(err.Error(), "both 0") {
		t.Fatalf("maxSurge 0 and maxUnavailable 0: %v, want refused", err)
	}
}

func TestPlanChangesNothing(t *testing.T) {
	t.Parallel()
	cloud := newMemCloud(map[string]int{"general": 5, "gpu": 2})
	plan, err := rollout.MakePlan(context.Background(), cloud, nil, rollout.Options{Image: "ami-new",
		Groups: map[string]rollout.Strategy{"general": {MaxSurge: 2, Canary: true}, "gpu": {MaxUnavailable: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][2]int{}
	for _, g := range plan.Groups {
		got[g.Name] = [2]int{len(g.Replace), g.Batches}
	}
	// general: a canary, then 4 in batches of 2; gpu: one at a time.
	if want := map[string][2]int{"general": {5, 3}, "gpu": {2, 2}}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("plan %v, want %v", got, want)
	}
	if plan.Budget != 3 || plan.Estimate != 3*rollout.BatchEstimate {
		t.Errorf("budget %d, estimate %s; want 3 and %s", plan.Budget, plan.Estimate, 3*rollout.BatchEstimate)
	}
	for g, v := range cloud.version {
		if v != 1 {
			t.Errorf("the plan changed group %s's version to %d", g, v)
		}
	}
	var b strings.Builder
	plan.Print(&b)
	if !strings.Contains(b.String(), "in place, 1 unavailable") {
		t.Errorf("printed plan lacks the in-place strategy:\n%s", b.String())
	}
}

// TestPhasesRollInOrder: an upgrade's relaunch rolls each control-plane
// group alone, then the node groups; cloud-only groups need no cluster.
func TestPhasesRollInOrder(t *testing.T) {
	t.Parallel()
	cloud := newMemCloud(map[string]int{"cp-a": 1, "cp-b": 1, "general": 3, "batch": 2})
	for _, g := range []string{"cp-a", "cp-b", "general", "batch"} {
		cloud.bump(g)
	}
	var mu sync.Mutex
	var order []string // a group's name each time it finishes a batch
	opts := rollout.Options{Relaunch: true, Reason: "upgrade to v1.36.1", Groups: map[string]rollout.Strategy{
		"cp-a":    {MaxUnavailable: 1, Phase: 0, CloudOnly: true},
		"cp-b":    {MaxUnavailable: 1, Phase: 1, CloudOnly: true},
		"general": {MaxSurge: 1, Phase: 2, CloudOnly: true},
		"batch":   {MaxUnavailable: 1, Phase: 2, CloudOnly: true},
	}, OnStep: func(st rollout.State) {
		mu.Lock()
		defer mu.Unlock()
		for name, g := range st.Groups {
			if g.Batch != nil && g.Batch.Step == rollout.StepTerminate {
				order = append(order, name)
			}
		}
	}}
	st, err := rollout.New(cloud, nil, &memStore{}, opts, nil).Start(context.Background(), "test")
	if err != nil || st.Status != rollout.StatusDone || st.Reason != "upgrade to v1.36.1" || st.Image != "" {
		t.Fatalf("relaunch: %v (%+v)", err, st)
	}
	for g, n := range map[string]int{"cp-a": 1, "cp-b": 1, "general": 3, "batch": 2} {
		p := st.Groups[g]
		if len(p.Replaced) != n || p.NewVersion != "2" || p.ImageID != "ami-old" {
			t.Errorf("group %s: replaced %v to version %s with image %s; want %d to version 2, image kept", g, p.Replaced, p.NewVersion, p.ImageID, n)
		}
		insts, _, _ := cloud.Instances(context.Background(), g)
		for _, in := range insts {
			if in.Version != "2" {
				t.Errorf("group %s: instance %s still on version %s", g, in.ID, in.Version)
			}
		}
	}
	a, b, gen, bat := st.Groups["cp-a"], st.Groups["cp-b"], st.Groups["general"], st.Groups["batch"]
	if a.Finished.After(b.Started) || b.Finished.After(gen.Started) || b.Finished.After(bat.Started) {
		t.Errorf("phases overlap: cp-a %s-%s, cp-b %s-%s, general from %s, batch from %s", a.Started, a.Finished, b.Started, b.Finished, gen.Started, bat.Started)
	}
	mu.Lock()
	defer mu.Unlock()
	order = slices.Compact(order)
	if len(order) < 3 || order[0] != "cp-a" || order[1] != "cp-b" || slices.Contains(order[2:], "cp-a") || slices.Contains(order[2:], "cp-b") {
		t.Errorf("terminations in order %v, want cp-a, cp-b, then the node groups", order)
	}
}

// TestCloudOnlyGatesOnTheCloud: without a cluster a group must be
// cloud-only, and its gate waits until the cloud reports the new instance
// in service.
func TestCloudOnlyGatesOnTheCloud(t *testing.T) {
	t.Parallel()
	cloud := newMemCloud(map[string]int{"general": 1})
	if _, err := rollout.New(cloud, nil, &memStore{}, rollout.Options{Image: "ami-new", Groups: map[string]rollout.Strategy{"general": {MaxSurge: 1}}}, nil).
		Start(context.Background(), "test"); !errors.Is(err, rollout.ErrNoCluster) {
		t.Fatalf("no cluster, not cloud-only: %v, want ErrNoCluster", err)
	}
	fc := clocktesting.NewFakeClock(time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC))
	pending := func() {
		cloud.mu.Lock()
		defer cloud.mu.Unlock()
		for i := range cloud.insts["general"] {
			if cloud.insts["general"][i].Version == "2" {
				cloud.insts["general"][i].InService = false
			}
		}
	}
	var mu sync.Mutex
	var gated bool
	opts := rollout.Options{Image: "ami-new", Groups: map[string]rollout.Strategy{"general": {MaxSurge: 1, CloudOnly: true}}, Clock: fc,
		OnStep: func(st rollout.State) {
			if b := st.Groups["general"].Batch; b != nil && b.Step == rollout.StepGate {
				pending()
				mu.Lock()
				gated = true
				mu.Unlock()
			}
		}}
	isGated := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return gated
	}
	s := start(context.Background(), rollout.New(cloud, nil, &memStore{}, opts, nil))
	// Two waiters: the lock's renewal, which waits on the clock for the
	// whole rollout, and the gate's poll. With HasWaiters alone the
	// minute below could pass before the rollout reached its gate.
	waitFor(t, fc, s, 2, isGated)
	fc.Step(time.Minute)
	waitFor(t, fc, s, 2, isGated)
	if s.finished() {
		t.Fatalf("the gate passed an instance not in service: %v", s.err)
	}
	cloud.mu.Lock()
	for i := range cloud.insts["general"] {
		cloud.insts["general"][i].InService = true
	}
	cloud.mu.Unlock()
	for !s.finished() {
		fc.Step(2 * time.Second)
		waitWaiting(t, fc, s)
	}
	if s.err != nil || s.st.Status != rollout.StatusDone || len(s.st.Groups["general"].Replaced) != 1 {
		t.Fatalf("cloud-only rollout: %v (%+v)", s.err, s.st)
	}
}

// TestReplaceAllRelaunchesCurrentInstances: a group whose change the launch
// template does not carry is rolled whole; its neighbour, unchanged and on
// its newest version, keeps its instances.
func TestReplaceAllRelaunchesCurrentInstances(t *testing.T) {
	t.Parallel()
	cloud := newMemCloud(map[string]int{"spot": 2, "general": 2})
	before, _, _ := cloud.Instances(context.Background(), "general")
	st, err := rollout.New(cloud, nil, &memStore{}, rollout.Options{Relaunch: true, Reason: "definition change", Groups: map[string]rollout.Strategy{
		"spot": {MaxSurge: 1, CloudOnly: true, ReplaceAll: true}, "general": {MaxSurge: 1, CloudOnly: true},
	}}, nil).Start(context.Background(), "test")
	if err != nil || st.Status != rollout.StatusDone {
		t.Fatalf("relaunch: %v (%+v)", err, st)
	}
	if n := len(st.Groups["spot"].Replaced); n != 2 {
		t.Errorf("spot: %d replaced, want both", n)
	}
	after, _, _ := cloud.Instances(context.Background(), "general")
	if n := len(st.Groups["general"].Replaced); n != 0 || fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("general: %d replaced (%v -> %v), want none", n, before, after)
	}
}

// TestRollbackAfterCanaryReplacesOnlyTheCanary: a rollout paused after its
// canary, aborted and rolled back replaces the canary alone; the nodes that
// never left the previous image stay, although the rollback made a new
// launch-template version. The plan says the same before it acts.
func TestRollbackAfterCanaryReplacesOnlyTheCanary(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cloud, store := newMemCloud(map[string]int{"general": 3}), &memStore{}
	cluster := memCluster{ready: func(*corev1.Node) bool { return true }}
	st, err := rollout.New(cloud, cluster, store, rollout.Options{Image: "ami-new",
		Groups: map[string]rollout.Strategy{"general": {MaxSurge: 1, Canary: true, PauseAfterCanary: true}}}, nil).Start(ctx, "test")
	if err != nil || st.Status != rollout.StatusPaused {
		t.Fatalf("rollout with a canary pause: %v (%v)", err, st)
	}
	canary := slices.Clone(st.Groups["general"].Replaced)
	if len(canary) != 1 {
		t.Fatalf("paused with %v replaced, want the canary", canary)
	}
	if _, err := rollout.Request(ctx, store, rollout.StatusAborting, time.Now()); err != nil {
		t.Fatal(err)
	}
	insts, _, _ := cloud.Instances(ctx, "general")
	var successor string
	for _, in := range insts {
		if in.Version == "2" {
			successor = in.ID
		}
	}
	back := rollout.Options{Image: "ami-old", Groups: map[string]rollout.Strategy{"general": {MaxSurge: 1}}}
	plan, err := rollout.MakePlan(ctx, cloud, nil, back)
	if err != nil {
		t.Fatal(err)
	}
	if got := plan.Groups[0].Replace; !slices.Equal(got, []string{successor}) {
		t.Errorf("rollback plan replaces %v, want the canary's successor %s only", got, successor)
	}
	st, err = rollout.New(cloud, cluster, store, back, nil).Start(ctx, "test")
	if err != nil || st.Status != rollout.StatusDone {
		t.Fatalf("rollback: %v (%v)", err, st)
	}
	if got := st.Groups["general"].Replaced; !slices.Equal(got, []string{successor}) {
		t.Errorf("rollback replaced %v, want the canary's successor %s only", got, successor)
	}
	running, _ := cloud.InstanceImages(ctx, ids(cloud, "general"))
	for id, img := range running {
		if img != "ami-old" {
			t.Errorf("after the rollback %s runs %s", id, img)
		}
	}
}

func ids(c *memCloud, g string) []string {
	insts, _, _ := c.Instances(context.Background(), g)
	var out []string
	for _, in := range insts {
		out = append(out, in.ID)
	}
	return out
}
