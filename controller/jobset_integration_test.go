package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/controller/inject"
	"github.com/trellis-dev/trellis/controller/trellisjobset"
	"github.com/trellis-dev/trellis/internal/testutil/gen"
)

// succeedPods plays the kubelet: every pending pod of the JobSet's shard
// jobs finishes successfully, so the real Job controller completes the Job.
func (e *env) succeedPods(ctx context.Context, name string) error {
	pods := &corev1.PodList{}
	if err := e.c.List(ctx, pods, client.InNamespace("default"), client.MatchingLabels(inject.SelectorLabels(trellisjobset.Kind, name))); err != nil {
		return err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase == corev1.PodSucceeded {
			continue
		}
		now := metav1.Now()
		p.Status.Phase = corev1.PodSucceeded
		p.Status.StartTime = &now
		for _, c := range p.Spec.Containers {
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
				Name: c.Name, Image: c.Image,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: now, FinishedAt: now}},
			})
		}
		if err := e.c.Status().Update(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

func TestIntegrationTrellisJobSet(t *testing.T) {
	e := startEnv(t)
	ctx := context.Background()
	js := &v1alpha1.TrellisJobSet{
		ObjectMeta: metav1.ObjectMeta{Name: "index", Namespace: "default"},
		Spec: v1alpha1.TrellisJobSetSpec{
			Shards:      3,
			Parallelism: new(int32(2)),
			Template:    v1alpha1.PodTemplate{Containers: []corev1.Container{gen.Container("indexer")}},
			ShardConfig: map[string]string{"shard.txt": "{{.Index}}/{{.Count}}"},
		},
	}
	if err := e.c.Create(ctx, js); err != nil {
		t.Fatal(err)
	}
	jobs := func(ctx context.Context) ([]batchv1.Job, error) {
		l := &batchv1.JobList{}
		err := e.c.List(ctx, l, client.InNamespace("default"), client.MatchingLabels(inject.SelectorLabels(trellisjobset.Kind, "index")))
		return l.Items, err
	}
	// Parallelism 2: two shard Jobs, not three.
	e.eventually("two shard jobs", 30*time.Second, func(ctx context.Context) (bool, error) {
		l, err := jobs(ctx)
		return len(l) == 2, err
	})
	time.Sleep(time.Second)
	if l, _ := jobs(ctx); len(l) != 2 {
		t.Fatalf("parallelism 2 exceeded: %d jobs", len(l))
	}
	cm := &corev1.ConfigMap{}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "index-shard-1"}, cm); err != nil || cm.Data["shard.txt"] != "1/3" {
		t.Fatalf("shard 1 config: %v %v", cm.Data, err)
	}
	// Shards finish; the third starts; the set completes.
	e.eventually("all shards done", 90*time.Second, func(ctx context.Context) (bool, error) {
		if err := e.succeedPods(ctx, "index"); err != nil {
			return false, err
		}
		got := &v1alpha1.TrellisJobSet{}
		if err := e.c.Get(ctx, client.ObjectKeyFromObject(js), got); err != nil {
			return false, err
		}
		if !meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionReady) {
			return false, fmt.Errorf("status %+v", got.Status)
		}
		return got.Status.Succeeded == 3 && got.Status.Failed == 0, nil
	})
	l, _ := jobs(ctx)
	if len(l) != 3 {
		t.Errorf("want 3 shard jobs in the end, got %d", len(l))
	}
	for _, j := range l {
		env := map[string]string{}
		for _, ev := range j.Spec.Template.Spec.Containers[0].Env {
			env[ev.Name] = ev.Value
		}
		if env[wellknown.EnvShardCount] != "3" || env[wellknown.EnvShardIndex] != j.Labels[wellknown.LabelShard] {
			t.Errorf("job %s: shard env %v", j.Name, env)
		}
	}
}

func TestIntegrationCronDaemonStatefulSet(t *testing.T) {
	e := startEnv(t)
	ctx := context.Background()
	tmpl := v1alpha1.PodTemplate{Containers: []corev1.Container{gen.Container("c")}}
	objs := []client.Object{
		&v1alpha1.TrellisCronJob{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "default"}, Spec: v1alpha1.TrellisCronJobSpec{Schedule: "0 3 * * *", Template: tmpl}},
		&v1alpha1.TrellisDaemon{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: inject.ProfileNamespace}, Spec: v1alpha1.TrellisDaemonSpec{Template: tmpl}},
		&v1alpha1.TrellisDaemon{ObjectMeta: metav1.ObjectMeta{Name: "rogue", Namespace: "default"}, Spec: v1alpha1.TrellisDaemonSpec{Template: tmpl}},
		&v1alpha1.TrellisStatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "kv", Namespace: "default"}, Spec: v1alpha1.TrellisStatefulSetSpec{Replicas: new(int32(2)), Ports: []v1alpha1.Port{{Name: "client", Port: 2379}}, Template: tmpl}},
	}
	for _, o := range objs {
		if err := e.c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range []client.Object{
		&batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "nightly"}},
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: inject.ProfileNamespace, Name: "agent"}},
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kv"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kv"}},
		&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kv"}},
	} {
		e.eventually(fmt.Sprintf("%T %s", o, o.GetName()), 30*time.Second, e.exists(o))
	}
	// The headless Service gives members stable names.
	svc := &corev1.Service{}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "kv"}, svc); err != nil || svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("kv service: clusterIP %q, %v", svc.Spec.ClusterIP, err)
	}
	// A daemon outside the allowed namespaces is refused, with a reason.
	e.eventually("rogue daemon refused", 20*time.Second, func(ctx context.Context) (bool, error) {
		d := &v1alpha1.TrellisDaemon{}
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "rogue"}, d); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(d.Status.Conditions, v1alpha1.ConditionDegraded)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == "InvalidSpec", nil
	})
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "rogue"}, &appsv1.DaemonSet{}); err == nil {
		t.Error("a DaemonSet was created in a namespace that may not run daemons")
	}
	// The CronJob reports ready once it exists.
	e.eventually("cronjob status", 20*time.Second, func(ctx context.Context) (bool, error) {
		cj := &v1alpha1.TrellisCronJob{}
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "nightly"}, cj); err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(cj.Status.Conditions, v1alpha1.ConditionReady) && cj.Status.ObservedGeneration == cj.Generation, nil
	})
}
