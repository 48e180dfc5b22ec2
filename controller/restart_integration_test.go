package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/controller"
	"github.com/trellis-dev/trellis/internal/testutil/cluster"
	"github.com/trellis-dev/trellis/internal/testutil/gen"
)

// TestIntegrationRestartMidBurst stops the controller in the middle of a
// burst of creations and starts a new one: it converges, with exactly one
// of each owned object per TrellisService, none orphaned, none in conflict.
func TestIntegrationRestartMidBurst(t *testing.T) {
	cp, c := startPlane(t, cluster.Options{})
	ctx := context.Background()
	start := func() (stop func()) {
		mgr, err := controller.New(cp.Config, controller.Config{SkipNameValidation: true, Workers: 8, QPS: 200, Burst: 400})
		if err != nil {
			t.Fatal(err)
		}
		mctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- mgr.Start(mctx) }()
		return func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("manager: %v", err)
			}
		}
	}
	const n = 120
	stop := start()
	created := make(chan struct{})
	go func() {
		defer close(created)
		for i := range n {
			if err := c.Create(ctx, gen.Service(fmt.Sprintf("burst-%03d", i))); err != nil {
				t.Errorf("create: %v", err)
			}
		}
	}()
	// Stop the controller while the burst is under way, then start another.
	time.Sleep(700 * time.Millisecond)
	stop()
	stop = start()
	defer stop()
	<-created

	e := &env{t: t, cp: cp, c: c}
	e.eventually("convergence", 120*time.Second, func(ctx context.Context) (bool, error) {
		list := &v1alpha1.TrellisServiceList{}
		if err := c.List(ctx, list, client.InNamespace("default")); err != nil {
			return false, err
		}
		for _, ts := range list.Items {
			if ts.Status.ObservedGeneration != ts.Generation || !meta.IsStatusConditionTrue(ts.Status.Conditions, v1alpha1.ConditionProgressing) {
				return false, fmt.Errorf("%s not converged: %+v", ts.Name, ts.Status.Conditions)
			}
		}
		return len(list.Items) == n, nil
	})
	for _, tc := range []struct {
		name string
		list client.ObjectList
	}{
		{"deployments", &appsv1.DeploymentList{}},
		{"services", &corev1.ServiceList{}},
		{"pdbs", &policyv1.PodDisruptionBudgetList{}},
	} {
		if err := c.List(ctx, tc.list, client.InNamespace("default"), client.MatchingLabels{wellknown.LabelManagedBy: wellknown.ManagedBy}); err != nil {
			t.Fatal(err)
		}
		items, _ := meta.ExtractList(tc.list)
		owners := map[string]int{}
		for _, it := range items {
			o := it.(metav1.Object)
			ref := metav1.GetControllerOf(o)
			if ref == nil || ref.Kind != "TrellisService" || ref.Name != o.GetName() {
				t.Errorf("%s %s: controller ref %+v", tc.name, o.GetName(), ref)
				continue
			}
			owners[ref.Name]++
		}
		if len(items) != n || len(owners) != n {
			t.Errorf("%s: %d objects for %d owners, want %d", tc.name, len(items), len(owners), n)
		}
	}
	evs, err := cp.Client.EventsV1().Events("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs.Items {
		if ev.Reason == "Conflict" {
			t.Errorf("conflict after restart: %s %s", ev.Regarding.Name, ev.Note)
		}
	}
}
