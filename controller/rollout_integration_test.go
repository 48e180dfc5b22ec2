package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/controller"
	"github.com/trellis-dev/trellis/controller/inject"
	"github.com/trellis-dev/trellis/internal/testutil/cluster"
	"github.com/trellis-dev/trellis/internal/testutil/gen"
)

// TestIntegrationProfileRollout changes the runtime profile under six
// running TrellisServices: they move to the new revision two at a time, one
// batch per interval, never all at once.
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
	const interval = 4 * time.Second
	mgr, err := controller.New(cp.Config, controller.Config{SkipNameValidation: true, ProfileRolloutBatch: 2, ProfileRolloutInterval: interval})
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
	time.Sleep(time.Second) // statuses record r1

	profile.Data[inject.ProfileKey] = "revision: r2\nimages: {traffic: trellis/traffic:2}\n"
	if err := c.Update(ctx, profile); err != nil {
		t.Fatal(err)
	}
	// The first batch moves; within most of an interval no more than one
	// batch (two) does.
	var first time.Time
	e.eventually("the first batch", 30*time.Second, func(ctx context.Context) (bool, error) {
		n, err := revisions(ctx)
		if n["r2"] > 0 {
			first = time.Now()
		}
		return n["r2"] > 0, err
	})
	for time.Since(first) < interval*8/10 {
		n, err := revisions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n["r2"] > 2 {
			t.Fatalf("%d deployments on r2 within the first interval, want at most 2 (%v)", n["r2"], n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.eventually("all on r2", 60*time.Second, func(ctx context.Context) (bool, error) {
		n, err := revisions(ctx)
		return n["r2"] == 6, err
	})
	if took := time.Since(first); took < interval*3/2 {
		t.Errorf("all six moved %s after the first: faster than three batches of two at one batch per %s", took, interval)
	}
}
