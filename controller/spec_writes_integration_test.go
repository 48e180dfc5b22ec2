package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/controller/inject"
	"github.com/trellis-dev/trellis/internal/testutil/gen"
)

// TestIntegrationDeploymentWrittenOnce guards the deployment controller's
// work per Trellis-made Deployment (issue 42): the controller creates the
// Deployment and never writes its spec again once kube-controller-manager
// has rolled it out and the TrellisService's status is written. A second
// spec write (a template or labels that differ from their stored form and
// are rewritten) would show as a generation above 1, a second ReplicaSet
// (the pod-template hash changed) or a second field-manager entry.
func TestIntegrationDeploymentWrittenOnce(t *testing.T) {
	e := startEnv(t)
	ctx := context.Background()
	const n = 3
	for i := range n {
		if err := e.c.Create(ctx, gen.Service(fmt.Sprintf("once-%d", i), gen.WithReplicas(2))); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		key := client.ObjectKey{Namespace: "default", Name: fmt.Sprintf("once-%d", i)}
		e.eventually(key.Name+" rolled out and its status written", 60*time.Second, func(ctx context.Context) (bool, error) {
			d := &appsv1.Deployment{}
			if err := e.c.Get(ctx, key, d); err != nil {
				return false, err
			}
			ts := &v1alpha1.TrellisService{}
			if err := e.c.Get(ctx, key, ts); err != nil {
				return false, err
			}
			c := condition(ts, v1alpha1.ConditionProgressing)
			return d.Status.ObservedGeneration == d.Generation && d.Status.Replicas == 2 &&
				ts.Status.ObservedGeneration == ts.Generation && c != nil && c.Status == metav1.ConditionTrue, nil
		})
	}
	// Give the controller the Deployments' status updates to react to: a
	// second write would follow within this window.
	time.Sleep(3 * time.Second)
	for i := range n {
		key := client.ObjectKey{Namespace: "default", Name: fmt.Sprintf("once-%d", i)}
		d := &appsv1.Deployment{}
		if err := e.c.Get(ctx, key, d); err != nil {
			t.Fatal(err)
		}
		if d.Generation != 1 {
			t.Errorf("Deployment %s: generation %d, want 1 (its spec was written after creation)", key.Name, d.Generation)
		}
		var spec []string
		for _, m := range d.ManagedFields {
			if m.Subresource == "" {
				spec = append(spec, fmt.Sprintf("%s/%s", m.Manager, m.Operation))
			}
		}
		if len(spec) != 1 || spec[0] != "trellis-controller/Update" {
			t.Errorf("Deployment %s: managers of the object %v, want only the create [trellis-controller/Update]", key.Name, spec)
		}
		rss := &appsv1.ReplicaSetList{}
		if err := e.c.List(ctx, rss, client.InNamespace("default"), client.MatchingLabels(inject.SelectorLabels("TrellisService", key.Name))); err != nil {
			t.Fatal(err)
		}
		if len(rss.Items) != 1 {
			t.Errorf("Deployment %s: %d ReplicaSets, want 1 (the pod-template hash changed)", key.Name, len(rss.Items))
		}
	}
}
