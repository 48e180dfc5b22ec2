package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/internal/controlplane"
	"github.com/trellis-dev/trellis/internal/testutil/gen"
)

// crTraffic is the diagnostic phase -cr-traffic runs before the controller
// starts: the loader sends the API requests the Trellis phase adds to the
// bundle phase's (each TrellisService's create, the owner read and the
// status patch), with nothing created for them, and the phase prints what
// every process spent on them. With mode with-bundle, the bundle phase's
// objects are created at the same time, in a namespace of their own, and
// the phase lasts until their ReplicaSets exist too: the bundle phase plus
// the requests alone, without the controller. With mode alone, each kind
// of request is sent as a stage of its own (all creates, then all reads,
// then all status patches), each followed by 3s for the watchers, and each
// stage's CPU is printed: what one kind of request costs every process.
// The namespaces are deleted afterwards.
func crTraffic(ctx context.Context, cp *controlplane.ControlPlane, c client.Client, w cache.Cache, n int, mode string) error {
	const ns, bundleNS = "crs", "crs-bundle"
	if mode != "alone" && mode != "with-bundle" {
		return fmt.Errorf("-cr-traffic %q: want alone or with-bundle", mode)
	}
	withBundle := mode == "with-bundle"
	var rs atomic.Int64
	namespaces := []string{ns}
	if withBundle {
		namespaces = append(namespaces, bundleNS)
		remove, err := watchCount(ctx, w, &appsv1.ReplicaSet{}, bundleNS, &rs, nil)
		if err != nil {
			return err
		}
		defer remove()
	}
	for _, name := range namespaces {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			return fmt.Errorf("create namespace %s: %w", name, err)
		}
	}
	var bundle []client.Object
	if withBundle {
		var err error
		if bundle, err = bundleObjects(n, bundleNS); err != nil {
			return err
		}
	}
	bundleDone := make(chan error, 1)
	cpu0 := sampleCPU(cp)
	start := time.Now()
	if withBundle {
		go func() {
			if err := createAll(ctx, len(bundle), func(i int) client.Object { return bundle[i] }, c); err != nil {
				bundleDone <- err
				return
			}
			bundleDone <- waitFor(ctx, bundleNS+"'s ReplicaSets", func() bool { return rs.Load() >= int64(n) })
		}()
	} else {
		bundleDone <- nil
	}
	// stage sends one kind of request for every TrellisService. Alone, it
	// waits 3s more for the watchers and prints what the stage cost.
	stage := func(what string, f func(i int) error) error {
		c0, t0 := sampleCPU(cp), time.Now()
		if err := forAll(n, f); err != nil {
			return err
		}
		if !withBundle {
			time.Sleep(3 * time.Second)
			printCPU(fmt.Sprintf("cr-traffic stage: %d %s, with 3s for the watchers", n, what), c0, sampleCPU(cp), time.Since(t0))
		}
		return nil
	}
	name := func(i int) string { return fmt.Sprintf("svc-%04d", i) }
	if err := stage("TrellisService creates", func(i int) error {
		if err := c.Create(ctx, gen.Service(name(i), gen.WithNamespace(ns))); err != nil {
			return fmt.Errorf("create TrellisService %d: %w", i, err)
		}
		return nil
	}); err != nil {
		return err
	}
	read := make([]*v1alpha1.TrellisService, n)
	if err := stage("reads (the owner read)", func(i int) error {
		read[i] = &v1alpha1.TrellisService{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name(i)}, read[i]); err != nil {
			return fmt.Errorf("read TrellisService %d: %w", i, err)
		}
		return nil
	}); err != nil {
		return err
	}
	if err := stage("status merge patches", func(i int) error {
		// What the controller writes for a new TrellisService, as the
		// same kind of request: one merge patch of the status.
		ts := read[i]
		status := ts.Status
		status.ObservedGeneration = ts.Generation
		for _, cond := range []struct {
			t string
			s metav1.ConditionStatus
		}{{v1alpha1.ConditionReady, metav1.ConditionFalse}, {v1alpha1.ConditionDegraded, metav1.ConditionFalse}, {v1alpha1.ConditionProgressing, metav1.ConditionTrue}} {
			meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: cond.t, Status: cond.s, Reason: "Progressing", Message: "waiting for the Deployment", ObservedGeneration: ts.Generation})
		}
		body, err := json.Marshal(map[string]any{"status": status})
		if err != nil {
			return fmt.Errorf("encode the status of TrellisService %d: %w", i, err)
		}
		if err := c.Status().Patch(ctx, ts, client.RawPatch(types.MergePatchType, body)); err != nil {
			return fmt.Errorf("patch the status of TrellisService %d: %w", i, err)
		}
		return nil
	}); err != nil {
		return err
	}
	sent := time.Since(start)
	if err := <-bundleDone; err != nil {
		return err
	}
	all := time.Since(start)
	cpuAll := sampleCPU(cp)
	what := fmt.Sprintf("cr-traffic phase (%d TrellisServices: create, read, status patch; sent in %.2fs", n, sent.Seconds())
	if withBundle {
		what += fmt.Sprintf("; with the bundle's objects, all ReplicaSets after %.2fs", all.Seconds())
	} else {
		what += ", in stages with 3s after each"
	}
	// Until the last response (or ReplicaSet, as the bundle phase counts),
	// then with the 3s the watchers (the bench's, kube-controller-manager's)
	// take for the last events.
	printCPU(what+")", cpu0, cpuAll, all)
	time.Sleep(3 * time.Second)
	printCPU("cr-traffic phase with 3s more for the watchers", cpu0, sampleCPU(cp), time.Since(start))
	for _, name := range namespaces {
		if err := deleteNamespace(ctx, c, name); err != nil {
			return err
		}
	}
	return nil
}

// forAll runs f for 0..n-1, 32 at a time, and returns the first error.
func forAll(n int, f func(int) error) error {
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 32)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := f(i); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return err
	}
	return nil
}
