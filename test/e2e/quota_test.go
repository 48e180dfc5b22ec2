//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/governance/quota"
)

// TestQuotaWatchCronJob runs the trellis-quota addon's CronJob once (a Job
// from its template, as `kubectl create job --from` does): in its scratch
// image, as its service account, it must apply the step of a quota
// schedule that has come due.
func TestQuotaWatchCronJob(t *testing.T) {
	ctx := context.Background()
	ns := fmt.Sprintf("e2e-quota-%d", time.Now().Unix())
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	now := time.Now().UTC()
	pods := func(n int64) map[corev1.ResourceName]resource.Quantity {
		return map[corev1.ResourceName]resource.Quantity{corev1.ResourcePods: *resource.NewQuantity(n, resource.DecimalSI)}
	}
	plan := quota.Plan{
		Quotas:    map[string]map[corev1.ResourceName]resource.Quantity{ns: pods(10)},
		Schedules: map[string][]quota.Step{ns: {{From: now.Add(-72 * time.Hour), Hard: pods(10)}, {From: now.Add(-time.Hour), Hard: pods(20)}}},
	}
	// Applied two days ago: the first step, and the schedule in its
	// annotation; the second step is due now.
	if _, err := quota.Apply(ctx, cs, plan, now.Add(-48*time.Hour)); err != nil {
		t.Fatal(err)
	}
	runCronJob(t, "trellis-quota", ns)
	rq, err := cs.CoreV1().ResourceQuotas(ns).Get(ctx, quota.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := rq.Spec.Hard[corev1.ResourcePods]; got.Value() != 20 {
		t.Fatalf("pods quota %s after the watch ran, want the due step's 20", got.String())
	}
}

// runCronJob runs the CronJob trellis-system/name once now, as a Job from
// its template named after it and suffix (as `kubectl create job --from`
// does), and waits until it succeeds.
func runCronJob(t *testing.T, name, suffix string) {
	t.Helper()
	ctx := context.Background()
	cj, err := cs.BatchV1().CronJobs("trellis-system").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name + "-" + suffix, Namespace: "trellis-system"}, Spec: cj.Spec.JobTemplate.Spec}
	if _, err := cs.BatchV1().Jobs("trellis-system").Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		bg := metav1.DeletePropagationBackground
		_ = cs.BatchV1().Jobs("trellis-system").Delete(context.Background(), job.Name, metav1.DeleteOptions{PropagationPolicy: &bg})
	})
	eventually(t, "the Job "+job.Name+" succeeds", 3*time.Minute, func() (bool, string) {
		j, err := cs.BatchV1().Jobs("trellis-system").Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
				t.Fatalf("the Job %s failed: %s", job.Name, c.Message)
			}
		}
		return j.Status.Succeeded > 0, fmt.Sprintf("succeeded %d, failed %d", j.Status.Succeeded, j.Status.Failed)
	})
}
