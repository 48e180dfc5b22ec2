package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/controller/inject"
	"github.com/trellis-dev/trellis/controller/trellistrainingjob"
	"github.com/trellis-dev/trellis/internal/testutil/gen"
)

func trainingJob(name string, fw v1alpha1.Framework, roles map[v1alpha1.ReplicaRole]int32) *v1alpha1.TrellisTrainingJob {
	tj := &v1alpha1.TrellisTrainingJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       v1alpha1.TrellisTrainingJobSpec{Framework: fw, BackoffLimit: new(int32(1))},
	}
	for _, role := range []v1alpha1.ReplicaRole{"Master", "Chief", "Worker", "PS"} {
		if n, ok := roles[role]; ok {
			tj.Spec.ReplicaSpecs = append(tj.Spec.ReplicaSpecs, v1alpha1.ReplicaSpec{Role: role, Replicas: n, Template: v1alpha1.PodTemplate{Containers: []corev1.Container{gen.Container("trainer")}}})
		}
	}
	return tj
}

// setPodPhase plays the kubelet for one pod.
func (e *env) setPodPhase(ctx context.Context, name string, phase corev1.PodPhase, restarts int32) error {
	p := &corev1.Pod{}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, p); err != nil {
		return err
	}
	p.Status.Phase = phase
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "trainer", Image: p.Spec.Containers[0].Image, RestartCount: restarts}}
	return e.c.Status().Update(ctx, p)
}

func trainingPods(ctx context.Context, e *env, name string) ([]corev1.Pod, error) {
	l := &corev1.PodList{}
	err := e.c.List(ctx, l, client.InNamespace("default"), client.MatchingLabels(inject.SelectorLabels(trellistrainingjob.Kind, name)))
	return l.Items, err
}

func TestIntegrationTrainingJob(t *testing.T) {
	e := startEnv(t)
	ctx := context.Background()

	// PyTorch: the master succeeding ends the job; running workers are
	// cleaned up (policy Running).
	pt := trainingJob("pt", v1alpha1.FrameworkPyTorch, map[v1alpha1.ReplicaRole]int32{"Master": 1, "Worker": 2})
	if err := e.c.Create(ctx, pt); err != nil {
		t.Fatal(err)
	}
	e.eventually("3 replica pods", 30*time.Second, func(ctx context.Context) (bool, error) {
		pods, err := trainingPods(ctx, e, "pt")
		return len(pods) == 3, err
	})
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "pt"}, &corev1.Service{}); err != nil {
		t.Fatalf("headless service: %v", err)
	}
	for _, w := range []string{"pt-worker-0", "pt-worker-1"} {
		if err := e.setPodPhase(ctx, w, corev1.PodRunning, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.setPodPhase(ctx, "pt-master-0", corev1.PodSucceeded, 0); err != nil {
		t.Fatal(err)
	}
	e.eventually("pytorch job succeeded and workers cleaned up", 30*time.Second, func(ctx context.Context) (bool, error) {
		got := &v1alpha1.TrellisTrainingJob{}
		if err := e.c.Get(ctx, client.ObjectKeyFromObject(pt), got); err != nil {
			return false, err
		}
		if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Reason != "Succeeded" {
			return false, fmt.Errorf("conditions %+v", got.Status.Conditions)
		}
		for _, w := range []string{"pt-worker-0", "pt-worker-1"} {
			p := &corev1.Pod{}
			err := e.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: w}, p)
			if err == nil && p.DeletionTimestamp.IsZero() {
				return false, fmt.Errorf("%s still running", w)
			}
			if err != nil && !apierrors.IsNotFound(err) {
				return false, err
			}
		}
		return true, nil
	})
	// The finished master stays for its logs, and nothing is recreated.
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "pt-master-0"}, &corev1.Pod{}); err != nil {
		t.Errorf("succeeded master was removed: %v", err)
	}

	// TensorFlow: a worker restarting past the backoff limit fails the job.
	tf := trainingJob("tf", v1alpha1.FrameworkTensorFlow, map[v1alpha1.ReplicaRole]int32{"Chief": 1, "Worker": 2})
	if err := e.c.Create(ctx, tf); err != nil {
		t.Fatal(err)
	}
	e.eventually("tf pods", 30*time.Second, func(ctx context.Context) (bool, error) {
		pods, err := trainingPods(ctx, e, "tf")
		return len(pods) == 3, err
	})
	if err := e.setPodPhase(ctx, "tf-worker-1", corev1.PodRunning, 2); err != nil {
		t.Fatal(err)
	}
	e.eventually("tf job failed", 30*time.Second, func(ctx context.Context) (bool, error) {
		got := &v1alpha1.TrellisTrainingJob{}
		if err := e.c.Get(ctx, client.ObjectKeyFromObject(tf), got); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionDegraded)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == "Failed", nil
	})
}
