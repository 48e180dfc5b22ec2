package apply

import (
	"context"
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestUpToDateIgnoresDefaults(t *testing.T) {
	want := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "1"}},
		Spec: appsv1.DeploymentSpec{Replicas: new(int32(2)), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Image: "i"}},
		}}},
	}
	live := want.DeepCopy()
	live.Labels["extra"] = "x"
	live.Spec.RevisionHistoryLimit = new(int32(10))
	live.Spec.Template.Spec.Containers[0].ImagePullPolicy = corev1.PullIfNotPresent
	live.Spec.Template.Spec.DNSPolicy = corev1.DNSClusterFirst
	if !UpToDate(want, live) {
		t.Error("defaults on the live object count as drift")
	}
	live.Spec.Replicas = new(int32(5))
	if UpToDate(want, live) {
		t.Error("changed replicas not detected")
	}
	live = want.DeepCopy()
	live.Labels["a"] = "2"
	if UpToDate(want, live) {
		t.Error("changed label not detected")
	}
}

// TestEnsureStaleCache: our own object, created a moment ago, is not in the
// cache yet; the create finds it, and Ensure must not call it foreign.
func TestEnsureStaleCache(t *testing.T) {
	ctx := context.Background()
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner", Namespace: "ns", UID: "owner-uid"}}
	desired := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(owner, corev1.SchemeGroupVersion.WithKind("ConfigMap"))}},
		Data:       map[string]string{"k": "v"},
	}
	server := fake.NewClientBuilder().WithObjects(desired.DeepCopy()).Build()
	emptyCache := fake.NewClientBuilder().Build()
	res, err := Ensure(ctx, server, emptyCache, server, owner, desired.DeepCopy(), nil)
	if err != nil || res != Unchanged {
		t.Fatalf("got %q, %v; want unchanged", res, err)
	}
	// Someone else's object of that name is reported, not touched.
	foreign := desired.DeepCopy()
	foreign.OwnerReferences = nil
	server = fake.NewClientBuilder().WithObjects(foreign).Build()
	if _, err := Ensure(ctx, server, emptyCache, server, owner, desired.DeepCopy(), nil); !errors.Is(err, ErrNotOwned) {
		t.Fatalf("want ErrNotOwned, got %v", err)
	}
}
