package localfleet_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/controller/inject"
	"github.com/trellis-dev/trellis/fleet"
	"github.com/trellis-dev/trellis/governance/quota"
	"github.com/trellis-dev/trellis/internal/serverset"
	"github.com/trellis-dev/trellis/internal/testutil/gen"
)

// everyKind: the five other kinds go to both members (a StatefulSet's
// replicas divided by capacity, the rest whole) and the fleet object
// carries the status Karmada aggregates through the interpreter
// customizations.
func (e *env) everyKind(ctx context.Context) {
	t := e.t
	tmpl := v1alpha1.PodTemplate{Containers: []corev1.Container{gen.Container("app")}}
	objs := []client.Object{
		&v1alpha1.TrellisStatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "kv", Namespace: "batch"},
			Spec: v1alpha1.TrellisStatefulSetSpec{Replicas: new(int32(4)), Ports: []v1alpha1.Port{{Name: "client", Port: 2379}}, Template: tmpl}},
		&v1alpha1.TrellisCronJob{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "batch"},
			Spec: v1alpha1.TrellisCronJobSpec{Schedule: "0 3 * * *", Template: tmpl}},
		&v1alpha1.TrellisJobSet{ObjectMeta: metav1.ObjectMeta{Name: "index", Namespace: "batch"},
			Spec: v1alpha1.TrellisJobSetSpec{Shards: 2, Template: tmpl}},
		&v1alpha1.TrellisTrainingJob{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "batch"},
			Spec: v1alpha1.TrellisTrainingJobSpec{Framework: v1alpha1.FrameworkPyTorch, BackoffLimit: new(int32(1)),
				ReplicaSpecs: []v1alpha1.ReplicaSpec{{Role: "Master", Replicas: 1, Template: tmpl}, {Role: "Worker", Replicas: 2, Template: tmpl}}}},
		&v1alpha1.TrellisDaemon{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: inject.ProfileNamespace}, Spec: v1alpha1.TrellisDaemonSpec{Template: tmpl}},
	}
	for _, o := range objs {
		if err := e.fleet.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// Each member runs its own copy; the StatefulSet's 4 replicas are
	// divided by the members' free capacity, at least one each
	// (minClusters 2).
	for _, o := range objs {
		e.eventually(fmt.Sprintf("%T %s in both members", o, o.GetName()), time.Minute, func(ctx context.Context) (bool, error) {
			sum := int32(0)
			for m, c := range e.cs {
				got := o.DeepCopyObject().(client.Object)
				if err := c.Get(ctx, client.ObjectKeyFromObject(o), got); err != nil {
					return false, fmt.Errorf("%s: %w (binding: %s)", m, err, e.binding(ctx, o))
				}
				if kv, ok := got.(*v1alpha1.TrellisStatefulSet); ok {
					if *kv.Spec.Replicas < 1 {
						return false, fmt.Errorf("%s: kv has %d replicas", m, *kv.Spec.Replicas)
					}
					sum += *kv.Spec.Replicas
				}
			}
			if _, ok := o.(*v1alpha1.TrellisStatefulSet); ok && sum != 4 {
				return false, fmt.Errorf("kv: %d replicas in the members, want 4", sum)
			}
			return true, nil
		})
	}
	e.eventually("aggregated status of every kind", 2*time.Minute, func(ctx context.Context) (bool, error) {
		kv := &v1alpha1.TrellisStatefulSet{}
		if err := e.fleet.Get(ctx, client.ObjectKeyFromObject(objs[0]), kv); err != nil {
			return false, err
		}
		if kv.Status.ReadyReplicas != 4 || !ready(kv.Status.Conditions) {
			return false, fmt.Errorf("kv: %+v", kv.Status)
		}
		cj := &v1alpha1.TrellisCronJob{}
		if err := e.fleet.Get(ctx, client.ObjectKeyFromObject(objs[1]), cj); err != nil {
			return false, err
		}
		if !ready(cj.Status.Conditions) || cj.Status.ObservedGeneration != cj.Generation {
			return false, fmt.Errorf("nightly: %+v", cj.Status)
		}
		js := &v1alpha1.TrellisJobSet{}
		if err := e.fleet.Get(ctx, client.ObjectKeyFromObject(objs[2]), js); err != nil {
			return false, err
		}
		// kwok completes Job pods: 2 shards in each member.
		if js.Status.Succeeded != int32(2*len(e.members)) || js.Status.Failed != 0 {
			return false, fmt.Errorf("index: %+v", js.Status)
		}
		tj := &v1alpha1.TrellisTrainingJob{}
		if err := e.fleet.Get(ctx, client.ObjectKeyFromObject(objs[3]), tj); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(tj.Status.Conditions, v1alpha1.ConditionReady)
		if c == nil || !strings.Contains(c.Message, fmt.Sprintf("of %d clusters", len(e.members))) || tj.Status.Active+tj.Status.Succeeded != int32(3*len(e.members)) {
			return false, fmt.Errorf("train: %+v", tj.Status)
		}
		d := &v1alpha1.TrellisDaemon{}
		if err := e.fleet.Get(ctx, client.ObjectKeyFromObject(objs[4]), d); err != nil {
			return false, err
		}
		// One pod per kwok node of each member.
		if n := int32(len(e.members) * (2 + e.services/100)); d.Status.NumberReady != n || d.Status.DesiredNumberScheduled != n || !ready(d.Status.Conditions) {
			return false, fmt.Errorf("agent: %+v", d.Status)
		}
		return true, nil
	})
}

func ready(conds []metav1.Condition) bool {
	return meta.IsStatusConditionTrue(conds, v1alpha1.ConditionReady)
}

// memberOwned: a workload whose members own spec.replicas (an HPA scales
// it there) keeps each member's value across template changes; one that
// does not is put back to its share, which shows Karmada does revert.
func (e *env) memberOwned(ctx context.Context) {
	t := e.t
	api := gen.Service("api", gen.WithNamespace("shop"), gen.WithReplicas(3))
	api.UID = ""
	api.Annotations = map[string]string{"fleet.trellis.dev/member-owns-replicas": "true"}
	if err := e.fleet.Create(ctx, api); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(api)
	e.eventually("api on west", time.Minute, func(ctx context.Context) (bool, error) {
		west, err := e.memberReplicas(ctx, "west", key)
		return west >= 1, err
	})
	// As an HPA on west would: through the scale subresource.
	scale := func(name string, n int32) {
		ts := &v1alpha1.TrellisService{}
		if err := e.cs["west"].Get(ctx, client.ObjectKey{Namespace: "shop", Name: name}, ts); err != nil {
			t.Fatal(err)
		}
		patch := client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, n))
		if err := e.cs["west"].SubResource("scale").Patch(ctx, ts, patch); err != nil {
			t.Fatalf("scale %s on west: %v", name, err)
		}
	}
	scale("api", 5)
	scale("web", 7)
	// A template change at the fleet makes Karmada apply both again.
	for _, name := range []string{"api", "web"} {
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			ts := &v1alpha1.TrellisService{}
			if err := e.fleet.Get(ctx, client.ObjectKey{Namespace: "shop", Name: name}, ts); err != nil {
				return err
			}
			ts.Spec.Template.Metadata.Labels = map[string]string{"release": "2"}
			return e.fleet.Update(ctx, ts)
		}); err != nil {
			t.Fatal(err)
		}
	}
	e.eventually("the new template in west, api still at the member's 5, web back to 2", time.Minute, func(ctx context.Context) (bool, error) {
		for name, want := range map[string]int32{"api": 5, "web": 2} {
			ts := &v1alpha1.TrellisService{}
			if err := e.cs["west"].Get(ctx, client.ObjectKey{Namespace: "shop", Name: name}, ts); err != nil {
				return false, err
			}
			if ts.Spec.Template.Metadata.Labels["release"] != "2" || *ts.Spec.Replicas != want {
				return false, fmt.Errorf("%s on west: release %q, replicas %d (want %d)", name, ts.Spec.Template.Metadata.Labels["release"], *ts.Spec.Replicas, want)
			}
		}
		return true, nil
	})
	// The member's own status stays: west's controller reports 5 replicas.
	e.eventually("west's status of api", 30*time.Second, func(ctx context.Context) (bool, error) {
		ts := &v1alpha1.TrellisService{}
		if err := e.cs["west"].Get(ctx, key, ts); err != nil {
			return false, err
		}
		return ts.Status.Replicas == 5 && ts.Status.ObservedGeneration == ts.Generation, fmt.Errorf("west api status %+v", ts.Status)
	})
	// Held for a while: nothing reverts it.
	time.Sleep(5 * time.Second)
	if n, err := e.memberReplicas(ctx, "west", key); err != nil || n != 5 {
		t.Fatalf("west's api replicas %d (%v): the member-owned field was reverted", n, err)
	}
}

// binding describes the workload's ResourceBinding: where Karmada
// scheduled it and its conditions.
func (e *env) binding(ctx context.Context, o client.Object) string {
	kind := strings.ToLower(fmt.Sprintf("%T", o)[len("*v1alpha1."):])
	rb, err := e.f.Karmada.Dynamic.Resource(bindingGVR).Namespace(o.GetNamespace()).Get(ctx, o.GetName()+"-"+kind, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	clusters, _, _ := unstructured.NestedSlice(rb.Object, "spec", "clusters")
	conds, _, _ := unstructured.NestedSlice(rb.Object, "status", "conditions")
	return fmt.Sprintf("clusters %v, conditions %v", clusters, conds)
}

// serverset is the members of a service's serversets (every environment).
func (e *env) serverset(service string) ([]serverset.Member, error) {
	dir := "/discovery/" + service
	envs, _, err := e.zk.Children(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	var out []serverset.Member
	for _, env := range envs {
		m, err := serverset.Read(e.zk, dir+"/"+env)
		if err != nil {
			return nil, err
		}
		out = append(out, m...)
	}
	return out, nil
}

// federatedQuota: the quota planner's per-member plans for shop become one
// FederatedResourceQuota, and Karmada gives every member its share as the
// ResourceQuota trellis-quota.
func (e *env) federatedQuota(ctx context.Context) {
	t := e.t
	plans := map[string]quota.Plan{}
	for i, m := range e.members {
		plans[m] = quota.Plan{Quotas: map[string]map[corev1.ResourceName]resource.Quantity{"shop": {
			corev1.ResourceRequestsCPU:    resource.MustParse(fmt.Sprintf("%d", 50+i)),
			corev1.ResourceRequestsMemory: resource.MustParse("100Gi"),
			corev1.ResourcePods:           resource.MustParse("500"),
		}}}
	}
	fs := quota.Federate(plans, 2)
	if len(fs) != 1 {
		t.Fatalf("%d federated quotas, want 1 (shop)", len(fs))
	}
	if err := fleet.Apply(ctx, e.f.Karmada.Config, fs[0].Object()); err != nil {
		t.Fatal(err)
	}
	e.eventually("every member's share of shop's quota", time.Minute, func(ctx context.Context) (bool, error) {
		for i, m := range e.members {
			rq := &corev1.ResourceQuota{}
			if err := e.cs[m].Get(ctx, client.ObjectKey{Namespace: "shop", Name: quota.Name}, rq); err != nil {
				return false, fmt.Errorf("%s: %w", m, err)
			}
			cpu := rq.Spec.Hard[corev1.ResourceRequestsCPU]
			if cpu.Value() != int64(50+i) {
				return false, fmt.Errorf("%s: requests.cpu %s, want %d", m, cpu.String(), 50+i)
			}
		}
		return true, nil
	})
}
