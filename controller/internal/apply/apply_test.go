package apply

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
