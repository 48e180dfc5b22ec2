package controller_test

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/controller"
	"github.com/trellis-dev/trellis/controller/inject"
	"github.com/trellis-dev/trellis/internal/testutil/cluster"
	"github.com/trellis-dev/trellis/internal/testutil/gen"
)

// TestIntegrationLeaderElection runs two controllers: one holds the lease
// and reconciles; when it stops, the other takes over.
func TestIntegrationLeaderElection(t *testing.T) {
	cp, c := startPlane(t, cluster.Options{})
	ctx := context.Background()
	e := &env{t: t, cp: cp, c: c}
	type member struct {
		cancel  context.CancelFunc
		done    chan error
		elected <-chan struct{}
	}
	start := func() *member {
		mgr, err := controller.New(cp.Config, controller.Config{SkipNameValidation: true, LeaderElection: true,
			LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		mctx, cancel := context.WithCancel(ctx)
		m := &member{cancel: cancel, done: make(chan error, 1), elected: mgr.Elected()}
		go func() { m.done <- mgr.Start(mctx) }()
		return m
	}
	a, b := start(), start()
	defer func() {
		for _, m := range []*member{a, b} {
			m.cancel()
			if err := <-m.done; err != nil {
				t.Errorf("controller: %v", err)
			}
		}
	}()
	var leader, standby *member
	select {
	case <-a.elected:
		leader, standby = a, b
	case <-b.elected:
		leader, standby = b, a
	case <-time.After(30 * time.Second):
		t.Fatal("no controller was elected")
	}
	select {
	case <-standby.elected:
		t.Fatal("both controllers were elected")
	case <-time.After(2 * time.Second):
	}
	lease := &coordinationv1.Lease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: inject.ProfileNamespace, Name: "trellis-controller"}, lease); err != nil || lease.Spec.HolderIdentity == nil {
		t.Fatalf("lease: %+v %v", lease.Spec, err)
	}
	if err := c.Create(ctx, gen.Service("first")); err != nil {
		t.Fatal(err)
	}
	e.eventually("the leader reconciles", 20*time.Second, e.exists(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "first"}}))

	// The leader stops; the standby takes over and reconciles.
	leader.cancel()
	if err := <-leader.done; err != nil {
		t.Errorf("the stopped leader: %v", err)
	}
	leader.done <- nil // for the deferred cleanup
	select {
	case <-standby.elected:
	case <-time.After(20 * time.Second):
		t.Fatal("the standby did not take over")
	}
	if err := c.Create(ctx, gen.Service("second")); err != nil {
		t.Fatal(err)
	}
	e.eventually("the new leader reconciles", 20*time.Second, e.exists(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "second"}}))
}
