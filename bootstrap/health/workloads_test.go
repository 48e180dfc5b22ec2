package health

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/internal/testutil/cluster"
)

// TestIntegrationAddonWorkloads: an addon whose workloads are not named
// after it (the fleet's karmada: its scheduler and controller-manager) is
// checked by the workloads the index names, and a failure names the addon
// and the workload.
func TestIntegrationAddonWorkloads(t *testing.T) {
	cp := cluster.Start(t, cluster.Options{})
	c := cp.Client
	ctx := context.Background()
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: AddonNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	check := func() []Failure {
		r := &Result{}
		if err := r.checkAddon(ctx, c, "karmada"); err != nil {
			t.Fatal(err)
		}
		return r.Failures
	}
	if f := check(); len(f) != 2 || f[0].Name != "karmada" || f[1].Message != "not installed: no DaemonSet, Deployment, StatefulSet or CronJob trellis-system/karmada-controller-manager" {
		t.Fatalf("nothing installed: %+v, want both workloads missing under addon karmada", f)
	}
	ds, err := c.AppsV1().DaemonSets(AddonNamespace).Create(ctx, daemonSet("karmada-scheduler"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ds.Status = appsv1.DaemonSetStatus{ObservedGeneration: ds.Generation, DesiredNumberScheduled: 1, UpdatedNumberScheduled: 1, NumberReady: 0, CurrentNumberScheduled: 1}
	if ds, err = c.AppsV1().DaemonSets(AddonNamespace).UpdateStatus(ctx, ds, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f := check()
	if len(f) != 2 || f[0].Name != "karmada" || len(f[0].Message) < len("karmada-scheduler: ") || f[0].Message[:len("karmada-scheduler: ")] != "karmada-scheduler: " {
		t.Fatalf("scheduler not ready: %+v, want it named under addon karmada", f)
	}
	if _, err := c.AppsV1().DaemonSets(AddonNamespace).Create(ctx, daemonSet("karmada-controller-manager"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ds.Status.NumberReady, ds.Status.NumberAvailable = 1, 1
	if _, err := c.AppsV1().DaemonSets(AddonNamespace).UpdateStatus(ctx, ds, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if f := check(); len(f) != 1 || f[0].Message[:len("karmada-controller-manager: ")] != "karmada-controller-manager: " {
		t.Fatalf("scheduler ready, controller-manager without status: %+v, want only the controller-manager", f)
	}
}
