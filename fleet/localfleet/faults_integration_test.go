package localfleet_test

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/fleet"
	"github.com/trellis-dev/trellis/fleet/karmada"
	"github.com/trellis-dev/trellis/internal/testutil/gen"
)

var (
	bindingGVR = schema.GroupVersionResource{Group: "work.karmada.io", Version: "v1alpha2", Resource: "resourcebindings"}
	workGVR    = schema.GroupVersionResource{Group: "work.karmada.io", Version: "v1alpha1", Resource: "works"}
)

// killController: karmada-controller-manager is SIGKILLed while ten
// services propagate (five created before, five while it is down); once it
// is back every service is in both members exactly once, with one binding
// and one Work per member each, and Ready in the fleet.
func (e *env) killController(ctx context.Context) {
	t := e.t
	const n = 10
	for i := range n {
		if i == n/2 {
			if err := e.f.Karmada.KillProcess(karmada.ControllerManager); err != nil {
				t.Fatal(err)
			}
			t.Logf("karmada-controller-manager killed after %d of %d services", i, n)
		}
		s := gen.Service(fmt.Sprintf("svc-%02d", i), gen.WithNamespace("burst"))
		s.UID = ""
		if err := e.fleet.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(2 * time.Second)
	if err := e.f.Karmada.StartControllerManager(); err != nil {
		t.Fatal(err)
	}
	took := e.eventually("ten services in both members, Ready in the fleet", 2*time.Minute, func(ctx context.Context) (bool, error) {
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
			if !ready(s.Status.Conditions) || s.Status.ReadyReplicas != 2 {
				return false, fmt.Errorf("%s: %+v", s.Name, s.Status)
			}
		}
		return true, nil
	})
	t.Logf("after the restart, all %d services Ready in both members within %s", n, took.Round(time.Millisecond))
	rbs, err := e.f.Karmada.Dynamic.Resource(bindingGVR).Namespace("burst").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rbs.Items) != n {
		t.Errorf("%d resource bindings in burst, want %d", len(rbs.Items), n)
	}
	for _, m := range []string{"east", "west"} {
		works, err := e.f.Karmada.Dynamic.Resource(workGVR).Namespace("karmada-es-"+m).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		count := 0
		for _, w := range works.Items {
			if w.GetLabels()["resourcebinding.karmada.io/permanent-id"] != "" && isBurst(w.GetAnnotations()) {
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

// failover: east's apiserver is killed. Karmada marks east not Ready, the
// fleet's taint policy taints it NoExecute, and after the placement's 5s
// toleration web's replicas are rescheduled to west. When east comes back
// nothing moves again: west keeps all six, and east's stale copy is
// removed.
func (e *env) failover(ctx context.Context) {
	t := e.t
	key := client.ObjectKey{Namespace: "shop", Name: "web"}
	east := e.f.Member("east")
	e.eventually("web at 4/2 before the failover", 30*time.Second, func(ctx context.Context) (bool, error) {
		ew, err := e.memberReplicas(ctx, "east", key)
		if err != nil {
			return false, err
		}
		ww, err := e.memberReplicas(ctx, "west", key)
		return ew == 4 && ww == 2, fmt.Errorf("east %d, west %d (binding: %s)", ew, ww, e.binding(ctx, &v1alpha1.TrellisService{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}))
	})
	down := time.Now()
	east.KillAPIServer()
	e.eventually("web's 6 replicas Ready in west", 3*time.Minute, func(ctx context.Context) (bool, error) {
		ts := &v1alpha1.TrellisService{}
		if err := e.cs["west"].Get(ctx, key, ts); err != nil {
			return false, err
		}
		return *ts.Spec.Replicas == 6 && ts.Status.ReadyReplicas == 6, fmt.Errorf("west web: %d replicas, %d ready", *ts.Spec.Replicas, ts.Status.ReadyReplicas)
	})
	t.Logf("failover: east's apiserver killed -> web's 6 replicas Ready in west in %s", time.Since(down).Round(time.Millisecond))
	st, err := fleet.Status(ctx, e.f.Karmada.Config)
	if err != nil {
		t.Fatal(err)
	}
	tainted := false
	for _, m := range st {
		for _, tn := range m.Taints {
			if m.Name == "east" && tn == fleet.NotReadyTaint+":NoExecute" {
				tainted = true
			}
		}
	}
	if !tainted {
		t.Errorf("east not tainted %s: %+v", fleet.NotReadyTaint, st)
	}

	if err := east.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	if err := fleet.WaitReady(ctx, e.f.Karmada.Config, "east", 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Logf("east Ready in the fleet %s after its apiserver's restart (down %s)", time.Since(back).Round(time.Millisecond), back.Sub(down).Round(time.Second))
	// For 20s after, west's share never changes and east's stale copy goes.
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if n, err := e.memberReplicas(ctx, "west", key); err != nil || n != 6 {
			t.Fatalf("west's web replicas %d (%v) after east came back: replicas moved again", n, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	e.eventually("east's stale web removed, 6 Ready in the fleet", time.Minute, func(ctx context.Context) (bool, error) {
		n, err := e.memberReplicas(ctx, "east", key)
		if err != nil || n != -1 {
			return false, fmt.Errorf("east still has web (%d replicas, %v)", n, err)
		}
		ts := &v1alpha1.TrellisService{}
		if err := e.fleet.Get(ctx, key, ts); err != nil {
			return false, err
		}
		return ts.Status.ReadyReplicas == 6 && ready(ts.Status.Conditions), fmt.Errorf("fleet web %+v", ts.Status)
	})
}
