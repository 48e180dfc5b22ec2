package localfleet_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/controller/inject"
	"github.com/trellis-dev/trellis/internal/testutil/gen"
)

// memberHealth is Karmada's health of a workload in each member it is
// scheduled to (ResourceBinding status.aggregatedStatus[].health), as the
// kind's health interpreter judged the member's copy.
func (e *env) memberHealth(ctx context.Context, kind, ns, name string) (map[string]string, error) {
	rb, err := e.f.Karmada.Dynamic.Resource(bindingGVR).Namespace(ns).Get(ctx, name+"-"+strings.ToLower(kind), metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	items, _, _ := unstructured.NestedSlice(rb.Object, "status", "aggregatedStatus")
	out := map[string]string{}
	for _, it := range items {
		m, _ := it.(map[string]any)
		c, _, _ := unstructured.NestedString(m, "clusterName")
		h, _, _ := unstructured.NestedString(m, "health")
		out[c] = h
	}
	return out, nil
}

// allHealth waits until Karmada reports health h for kind ns/name in
// at least min members and in every member the binding lists.
func (e *env) allHealth(ctx context.Context, kind, ns, name, h string, min int) {
	e.eventually(fmt.Sprintf("%s %s/%s %s in every member", kind, ns, name, h), 2*time.Minute, func(ctx context.Context) (bool, error) {
		got, err := e.memberHealth(ctx, kind, ns, name)
		if err != nil {
			return false, err
		}
		if len(got) < min {
			return false, fmt.Errorf("health in %d members, want at least %d: %v", len(got), min, got)
		}
		for m, v := range got {
			if v != h {
				return false, fmt.Errorf("%s: %q, want %q (all: %v)", m, v, h, got)
			}
		}
		return true, nil
	})
}

// health: Karmada's health of every kind follows the members' status
// through the interpreters (a health script that fails counts as
// Healthy in Karmada, so Unhealthy must be seen too), and a ConfigMap a
// workload's pods read travels with it to the members that run it.
func (e *env) health(ctx context.Context) {
	t := e.t
	// The kinds everyKind placed, Ready or running to completion in both
	// members, and web (weighted over every member).
	for _, w := range []struct{ kind, ns, name string }{
		{"TrellisService", "shop", "web"},
		{"TrellisStatefulSet", "batch", "kv"},
		{"TrellisCronJob", "batch", "nightly"},
		{"TrellisJobSet", "batch", "index"},
		{"TrellisTrainingJob", "batch", "train"},
		{"TrellisDaemon", inject.ProfileNamespace, "agent"},
	} {
		e.allHealth(ctx, w.kind, w.ns, w.name, "Healthy", 2)
	}

	// Unhealthy where the status says so: pods no node can take (Ready
	// False), and a daemon outside the namespaces that may run daemons
	// (Degraded, InvalidSpec).
	settings := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: "batch"}, Data: map[string]string{"mode": "strict"}}
	if err := e.fleet.Create(ctx, settings); err != nil {
		t.Fatal(err)
	}
	app := gen.Container("app")
	app.EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}}
	stuck := &v1alpha1.TrellisService{ObjectMeta: metav1.ObjectMeta{Name: "stuck", Namespace: "batch"},
		Spec: v1alpha1.TrellisServiceSpec{Replicas: new(int32(2)), Ports: []v1alpha1.Port{{Name: "http", Port: 8080}},
			Template: v1alpha1.PodTemplate{NodeSelector: map[string]string{"trellis.dev/pool": "nowhere"}, Containers: []corev1.Container{app}}}}
	rogue := &v1alpha1.TrellisDaemon{ObjectMeta: metav1.ObjectMeta{Name: "rogue", Namespace: "batch"},
		Spec: v1alpha1.TrellisDaemonSpec{Template: v1alpha1.PodTemplate{Containers: []corev1.Container{gen.Container("agent")}}}}
	for _, o := range []client.Object{stuck, rogue} {
		if err := e.fleet.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	e.allHealth(ctx, "TrellisService", "batch", "stuck", "Unhealthy", 1)
	e.allHealth(ctx, "TrellisDaemon", "batch", "rogue", "Unhealthy", 2)

	// settings went wherever stuck runs, and only as a dependency: the
	// batch placement selects workloads, not ConfigMaps.
	got, err := e.memberHealth(ctx, "TrellisService", "batch", "stuck")
	if err != nil {
		t.Fatal(err)
	}
	for m := range got {
		e.eventually("ConfigMap settings in "+m, time.Minute, func(ctx context.Context) (bool, error) {
			cm := &corev1.ConfigMap{}
			if err := e.cs[m].Get(ctx, client.ObjectKeyFromObject(settings), cm); err != nil {
				return false, err
			}
			return cm.Data["mode"] == "strict", fmt.Errorf("%s: data %v", m, cm.Data)
		})
	}

	// Gone again: the later subtests count what runs in the members.
	for _, o := range []client.Object{stuck, rogue} {
		if err := e.fleet.Delete(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
}
