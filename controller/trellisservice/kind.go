package trellisservice

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/controller/inject"
	"github.com/trellis-dev/trellis/controller/internal/workload"
)

// Workload is the TrellisService kind for the shared reconciler.
type Workload struct{}

var (
	_ workload.Kind[*v1alpha1.TrellisService]     = Workload{}
	_ workload.Observer[*v1alpha1.TrellisService] = Workload{}
	_ workload.Terminal                           = Workload{}
)

// The methods of workload.Kind.

func (Workload) Name() string                  { return Kind }
func (Workload) New() *v1alpha1.TrellisService { return &v1alpha1.TrellisService{} }
func (Workload) NewList() client.ObjectList    { return &v1alpha1.TrellisServiceList{} }
func (Workload) Owns() []client.Object {
	return []client.Object{&appsv1.Deployment{}, &corev1.Service{}, &policyv1.PodDisruptionBudget{}, &corev1.ConfigMap{}, &networkingv1.Ingress{}}
}

func (Workload) Status(o *v1alpha1.TrellisService) (any, *v1alpha1.CommonStatus) {
	return &o.Status, &o.Status.CommonStatus
}

func (Workload) Templates(o *v1alpha1.TrellisService) []*v1alpha1.PodTemplate {
	return []*v1alpha1.PodTemplate{&o.Spec.Template}
}

func (Workload) Translate(o *v1alpha1.TrellisService, p *inject.Profile) ([]client.Object, error) {
	return Translate(o, p)
}

// Terminal: every translation error is the spec's (a missing ingress port
// as much as missing resources), so none is retried.
func (Workload) Terminal(error) bool { return true }

// Observe reports the Deployment's replicas; the service is available once
// the wanted number are updated and available and no old ones remain.
func (Workload) Observe(ctx context.Context, cache client.Reader, ts *v1alpha1.TrellisService) (workload.Outcome, error) {
	dep := &appsv1.Deployment{}
	if err := cache.Get(ctx, client.ObjectKey{Namespace: ts.Namespace, Name: ts.Name}, dep); err != nil && !apierrors.IsNotFound(err) {
		return workload.Outcome{}, fmt.Errorf("failed to read Deployment %s/%s: %w", ts.Namespace, ts.Name, err)
	}
	ts.Status.Replicas = dep.Status.Replicas
	ts.Status.ReadyReplicas = dep.Status.ReadyReplicas
	ts.Status.UpdatedReplicas = dep.Status.UpdatedReplicas
	want := int32(1)
	if ts.Spec.Replicas != nil {
		want = *ts.Spec.Replicas
	}
	rolledOut := dep.Generation > 0 && dep.Status.ObservedGeneration >= dep.Generation &&
		dep.Status.UpdatedReplicas >= want && dep.Status.AvailableReplicas >= want && dep.Status.Replicas == want
	if rolledOut {
		return workload.Progress(true, fmt.Sprintf("%d/%d replicas available", dep.Status.AvailableReplicas, want)), nil
	}
	return workload.Progress(false, fmt.Sprintf("%d/%d replicas available, %d updated", dep.Status.AvailableReplicas, want, dep.Status.UpdatedReplicas)), nil
}
