package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/controller"
	"github.com/trellis-dev/trellis/controller/inject"
	"github.com/trellis-dev/trellis/internal/testutil/cluster"
	"github.com/trellis-dev/trellis/internal/testutil/gen"
)

// TestIntegrationProfileRollout changes the runtime profile under six
// running TrellisServices: they move to the new revision two at a time, one
// batch per interval of the controller's clock, never all at once. The
// clock is a fake the test holds still and steps an interval at a time, so
// a slow machine delays the batches but cannot merge them (an observer's
// wall-clock window failed when its polls ran late).
func TestIntegrationProfileRollout(t *testing.T) {
	cp, c := startPlane(t, cluster.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	profile := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: inject.ProfileNamespace, Name: inject.ProfileName, Labels: map[string]string{wellknown.LabelManagedBy: wellknown.ManagedBy}},
		Data:       map[string]string{inject.ProfileKey: "revision: r1\nimages: {traffic: trellis/traffic:1}\n"},
	}
	if err := c.Create(ctx, profile); err != nil {
		t.Fatal(err)
	}
	// The controller requeues a refused workload after what is left of
	// the interval on its clock: 2 s of wall time while the clock stands.
	const interval = 2 * time.Second
	fc := clocktesting.NewFakePassiveClock(time.Now())
	mgr, err := controller.New(cp.Config, controller.Config{SkipNameValidation: true, ProfileRolloutBatch: 2, ProfileRolloutInterval: interval, Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = mgr.Start(ctx) }()
	e := &env{t: t, cp: cp, c: c}
	for i := range 6 {
		if err := c.Create(ctx, gen.Service(fmt.Sprintf("svc-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	revisions := func(ctx context.Context) (map[string]int, error) {
		l := &appsv1.DeploymentList{}
		if err := c.List(ctx, l, client.InNamespace("default")); err != nil {
			return nil, err
		}
		n := map[string]int{}
		for _, d := range l.Items {
			n[d.Spec.Template.Annotations[wellknown.AnnotationProfile]]++
		}
		return n, nil
	}
	e.eventually("six deployments on r1", 30*time.Second, func(ctx context.Context) (bool, error) {
		n, err := revisions(ctx)
		return n["r1"] == 6, err
	})
	// Every status records r1 (a workload with none takes the new
	// profile at once, as a new one does).
	e.eventually("six statuses on r1", 30*time.Second, func(ctx context.Context) (bool, error) {
		l := &v1alpha1.TrellisServiceList{}
		if err := c.List(ctx, l, client.InNamespace("default")); err != nil {
			return false, err
		}
		n := 0
		for _, ts := range l.Items {
			if ts.Status.RuntimeProfile == "r1" {
				n++
			}
		}
		return n == 6, nil
	})

	profile.Data[inject.ProfileKey] = "revision: r2\nimages: {traffic: trellis/traffic:2}\n"
	if err := c.Update(ctx, profile); err != nil {
		t.Fatal(err)
	}
	// One batch per interval of the controller's clock: with the clock
	// held, exactly two move, and stay two while the others are refused
	// and requeued (at least twice over, 3 intervals of wall time); each
	// step of an interval lets two more.
	for want := 2; want <= 6; want += 2 {
		e.eventually(fmt.Sprintf("%d deployments on r2", want), 30*time.Second, func(ctx context.Context) (bool, error) {
			n, err := revisions(ctx)
			return n["r2"] >= want, err
		})
		for held := time.Now(); want < 6 && time.Since(held) < 3*interval; time.Sleep(100 * time.Millisecond) {
			n, err := revisions(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if n["r2"] != want {
				t.Fatalf("%d deployments on r2 with the clock held after %d batches of 2, want %d (%v)", n["r2"], want/2, want, n)
			}
		}
		fc.SetTime(fc.Now().Add(interval))
	}
}
