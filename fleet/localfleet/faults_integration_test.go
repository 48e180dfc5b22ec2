package localfleet_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/controller/inject"
	"github.com/trellis-dev/trellis/fleet"
	"github.com/trellis-dev/trellis/fleet/karmada"
	"github.com/trellis-dev/trellis/internal/testutil/gen"
)

var (
	bindingGVR = schema.GroupVersionResource{Group: "work.karmada.io", Version: "v1alpha2", Resource: "resourcebindings"}
	workGVR    = schema.GroupVersionResource{Group: "work.karmada.io", Version: "v1alpha1", Resource: "works"}

	clusterBindingGVR = schema.GroupVersionResource{Group: "work.karmada.io", Version: "v1alpha2", Resource: "clusterresourcebindings"}
)

// killController: karmada-controller-manager is SIGKILLed while services
// propagate (half created before, half while it is down); once it is back
// every service is in every member exactly once, with one binding and one
// Work per member each, and Ready in the fleet.
func (e *env) killController(ctx context.Context) {
	t := e.t
	n := e.services
	for i := range n {
		if i == n/2 {
			if err := e.f.Karmada.KillProcess(karmada.ControllerManager); err != nil {
				t.Fatal(err)
			}
			t.Logf("karmada-controller-manager killed after %d of %d services", i, n)
		}
		s := gen.Service(fmt.Sprintf("svc-%04d", i), gen.WithNamespace("burst"))
		s.UID = ""
		if err := e.fleet.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(2 * time.Second)
	if err := e.f.Karmada.StartControllerManager(); err != nil {
		t.Fatal(err)
	}
	took := e.eventually("every service in every member, Ready in the fleet", 5*time.Minute, func(ctx context.Context) (bool, error) {
		for m, c := range e.cs {
			l := &v1alpha1.TrellisServiceList{}
			if err := c.List(ctx, l, client.InNamespace("burst")); err != nil {
				return false, err
			}
			if len(l.Items) != n {
				return false, fmt.Errorf("%s has %d services", m, len(l.Items))
			}
		}
		l := &v1alpha1.TrellisServiceList{}
		if err := e.fleet.List(ctx, l, client.InNamespace("burst")); err != nil {
			return false, err
		}
		for _, s := range l.Items {
			if !ready(s.Status.Conditions) || s.Status.ReadyReplicas != int32(len(e.members)) {
				return false, fmt.Errorf("%s: %+v", s.Name, s.Status)
			}
		}
		return true, nil
	})
	t.Logf("after the restart, all %d services Ready in %d members within %s", n, len(e.members), took.Round(time.Millisecond))
	rbs, err := e.f.Karmada.Dynamic.Resource(bindingGVR).Namespace("burst").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rbs.Items) != n {
		t.Errorf("%d resource bindings in burst, want %d", len(rbs.Items), n)
	}
	for _, m := range e.members {
		works, err := e.f.Karmada.Dynamic.Resource(workGVR).Namespace("karmada-es-"+m).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		count := 0
		for _, w := range works.Items {
			if isBurst(w.GetAnnotations()) {
				count++
			}
		}
		if count != n {
			t.Errorf("%d Works of burst's services for %s, want %d", count, m, n)
		}
	}
}

func isBurst(a map[string]string) bool {
	return a["resourcebinding.karmada.io/namespace"] == "burst" || a["work.karmada.io/namespace"] == "burst"
}

// A failover's bound, less the taint manager's eviction queue
// (karmada.Options.EvictionBound): the member found not Ready (the failure
// threshold, one status update of 2 s), the placement's toleration of 5 s,
// and room for the scheduler, the others' controllers and kwok's pods on 2
// loaded cores (the reduced test measured 9-12 s in all).
const (
	failureThreshold = 4 * time.Second
	failoverBound    = failureThreshold + 2*time.Second + 5*time.Second + 30*time.Second
)

// bindings counts the fleet's ResourceBindings and ClusterResourceBindings:
// at most what the taint manager's queue can hold when a member fails.
func (e *env) bindings(ctx context.Context) (int, error) {
	n := 0
	for _, gvr := range []schema.GroupVersionResource{bindingGVR, clusterBindingGVR} {
		l, err := e.f.Karmada.Dynamic.Resource(gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, fmt.Errorf("list %s: %w", gvr.Resource, err)
		}
		n += len(l.Items)
	}
	return n, nil
}

// failover: the victim's apiserver is SIGKILLed. Karmada marks it not
// Ready, the fleet's taint policy taints it NoExecute, and after the
// placement's 5s toleration web's replicas are rescheduled to the others.
// Throughout, web's serverset (its pods in every member) never holds fewer
// than its PodDisruptionBudget's minimum. When the victim comes back
// nothing moves again: the others keep their replicas, and the victim's
// stale copy is removed.
func (e *env) failover(ctx context.Context, victim string) {
	t := e.t
	key := client.ObjectKey{Namespace: "shop", Name: "web"}
	total := e.webReplicas()
	var others []string
	for _, m := range e.members {
		if m != victim {
			others = append(others, m)
		}
	}
	othersReady := func(ctx context.Context) (int32, int32, error) {
		var spec, ready int32
		for _, m := range others {
			ts := &v1alpha1.TrellisService{}
			if err := e.cs[m].Get(ctx, key, ts); err != nil {
				if client.IgnoreNotFound(err) == nil {
					continue
				}
				return 0, 0, err
			}
			spec += *ts.Spec.Replicas
			ready += ts.Status.ReadyReplicas
		}
		return spec, ready, nil
	}
	before := map[string]int32{}
	for _, m := range e.members {
		n, err := e.memberReplicas(ctx, m, key)
		if err != nil {
			t.Fatal(err)
		}
		before[m] = n
	}
	t.Logf("before: %v", before)

	// The serverset clients can use (liveWeb: registered, Ready, in a
	// member that answers), every 100 ms until the end. Its floor is what
	// the survivors ran before the loss: the lost member's replicas are
	// gone until they run elsewhere, and the failover must add to the
	// survivors' without ever taking theirs.
	floor := total - before[victim]
	sampler := e.sampleLiveWeb(ctx)
	defer func() {
		s := sampler.result()
		t.Logf("web's live serverset: %d samples (%d errored) over %s, lowest %d at %s (floor: the survivors' %d of %d)",
			s.samples, s.errored, s.took.Round(time.Second), s.lowest, s.lowestAt, floor, total)
		if want := int(2 * s.took.Seconds()); s.samples < want {
			t.Errorf("web's live serverset: %d samples over %s, want at least %d (2/s)", s.samples, s.took.Round(time.Second), want)
		}
		if s.errored*100 > s.samples+s.errored {
			t.Errorf("web's live serverset: %d of %d samples errored (over 1%%)", s.errored, s.samples+s.errored)
		}
		if s.lowest < int(floor) {
			t.Errorf("web's live serverset fell to %d at %s, under the survivors' %d: the failover took replicas from a member that answered", s.lowest, s.lowestAt, floor)
		}
	}()

	queued, err := e.bindings(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bound := failoverBound + e.f.Karmada.EvictionBound(queued)
	m := e.f.Member(victim)
	down := time.Now()
	m.KillAPIServer()
	e.eventually(fmt.Sprintf("web's %d replicas Ready outside %s", total, victim), 3*time.Minute, func(ctx context.Context) (bool, error) {
		spec, ready, err := othersReady(ctx)
		return spec == total && ready == total, fmt.Errorf("others: %d replicas, %d ready (%v)", spec, ready, err)
	})
	took := time.Since(down)
	e.eventually(fmt.Sprintf("web's live serverset back to %d", total), 30*time.Second, func(ctx context.Context) (bool, error) {
		live, answered, err := e.liveWeb(ctx)
		return err == nil && live == int(total), fmt.Errorf("%d live in %d members answering (%v)", live, answered, err)
	})
	t.Logf("failover: %s's apiserver killed -> web's %d replicas Ready in %v in %s (bound %s: %d bindings in the fleet)", victim, total, others, took.Round(time.Millisecond), bound.Round(time.Millisecond), queued)
	if took > bound {
		t.Errorf("failover took %s, over its bound %s (%s + the eviction of %d bindings)", took.Round(time.Millisecond), bound.Round(time.Millisecond), failoverBound, queued)
	}
	st, err := fleet.Status(ctx, e.f.Karmada.Config)
	if err != nil {
		t.Fatal(err)
	}
	tainted := false
	for _, s := range st {
		for _, tn := range s.Taints {
			if s.Name == victim && tn == fleet.NotReadyTaint+":NoExecute" {
				tainted = true
			}
		}
	}
	if !tainted {
		t.Errorf("%s not tainted %s: %+v", victim, fleet.NotReadyTaint, st)
	}

	after := map[string]int32{}
	for _, o := range others {
		n, err := e.memberReplicas(ctx, o, key)
		if err != nil {
			t.Fatal(err)
		}
		after[o] = n
	}
	if err := m.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	if err := fleet.WaitReady(ctx, e.f.Karmada.Config, victim, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s Ready in the fleet %s after its apiserver's restart (down %s)", victim, time.Since(back).Round(time.Millisecond), back.Sub(down).Round(time.Second))
	// For 20s after, the others' shares never change and the victim's stale
	// copy goes.
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for _, o := range others {
			if n, err := e.memberReplicas(ctx, o, key); err != nil || n != after[o] {
				t.Fatalf("%s's web replicas %d (was %d, %v) after %s came back: replicas moved again", o, n, after[o], err, victim)
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	e.eventually(victim+"'s stale web removed, all Ready in the fleet", time.Minute, func(ctx context.Context) (bool, error) {
		n, err := e.memberReplicas(ctx, victim, key)
		if err != nil || n != -1 {
			return false, fmt.Errorf("%s still has web (%d replicas, %v)", victim, n, err)
		}
		ts := &v1alpha1.TrellisService{}
		if err := e.fleet.Get(ctx, key, ts); err != nil {
			return false, err
		}
		return ts.Status.ReadyReplicas == total && ready(ts.Status.Conditions), fmt.Errorf("fleet web %+v", ts.Status)
	})
	// The victim's pods go once its garbage collector has removed what the
	// stale copy owned (on a loaded machine that took a minute to start):
	// the serverset is the others' pods alone.
	e.eventually("web's serverset back to the running replicas", 3*time.Minute, func(ctx context.Context) (bool, error) {
		members, err := e.serverset("web")
		if err == nil && len(members) == int(total) {
			return true, nil
		}
		pods := &corev1.PodList{}
		perr := e.cs[victim].List(ctx, pods, client.InNamespace("shop"), client.MatchingLabels(inject.SelectorLabels("TrellisService", "web")))
		return false, fmt.Errorf("%d members (%v), want %d; %d of web's pods left in %s (%v)", len(members), err, total, len(pods.Items), victim, perr)
	}, func() { e.explainLeftovers(ctx, victim, "shop") })
}

// explainLeftovers logs what a member still has in a namespace (owners and
// deletion marks) and its garbage collector's log lines, so a failure says
// which link of owner -> Deployment -> ReplicaSet -> Pod held.
func (e *env) explainLeftovers(ctx context.Context, member, ns string) {
	t := e.t
	lists := []client.ObjectList{&appsv1.DeploymentList{}, &appsv1.ReplicaSetList{}, &corev1.PodList{}}
	for _, l := range lists {
		if err := e.cs[member].List(ctx, l, client.InNamespace(ns)); err != nil {
			t.Logf("%s: list %T: %v", member, l, err)
			continue
		}
		_ = meta.EachListItem(l, func(o runtime.Object) error {
			m := o.(client.Object)
			var owners []string
			for _, r := range m.GetOwnerReferences() {
				owners = append(owners, r.Kind+"/"+r.Name+"/"+string(r.UID))
			}
			t.Logf("%s: %T %s owners=%v deleting=%v finalizers=%v", member, o, m.GetName(), owners, m.GetDeletionTimestamp() != nil, m.GetFinalizers())
			return nil
		})
	}
	m := e.f.Member(member)
	b, err := os.ReadFile(filepath.Join(m.Dir, "kube-controller-manager.log"))
	if err != nil {
		t.Log(err)
		return
	}
	var gc []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(strings.ToLower(l), "garbage") || strings.Contains(l, "graph_builder") {
			gc = append(gc, l)
		}
	}
	if len(gc) > 40 {
		gc = gc[len(gc)-40:]
	}
	t.Logf("%s's garbage collector log:\n%s", member, strings.Join(gc, "\n"))
}
