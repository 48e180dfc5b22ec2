package trellisstatefulset

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/controller/inject"
	"github.com/trellis-dev/trellis/controller/internal/workload"
)

// Workload is the TrellisStatefulSet kind for the shared reconciler.
type Workload struct{}

var (
	_ workload.Kind[*v1alpha1.TrellisStatefulSet]     = Workload{}
	_ workload.Observer[*v1alpha1.TrellisStatefulSet] = Workload{}
)

// The methods of workload.Kind.

func (Workload) Name() string                      { return Kind }
func (Workload) New() *v1alpha1.TrellisStatefulSet { return &v1alpha1.TrellisStatefulSet{} }
func (Workload) NewList() client.ObjectList        { return &v1alpha1.TrellisStatefulSetList{} }
func (Workload) Owns() []client.Object {
	return []client.Object{&appsv1.StatefulSet{}, &corev1.Service{}, &policyv1.PodDisruptionBudget{}}
}

func (Workload) Status(o *v1alpha1.TrellisStatefulSet) (any, *v1alpha1.CommonStatus) {
	return &o.Status, &o.Status.CommonStatus
}

func (Workload) Templates(o *v1alpha1.TrellisStatefulSet) []*v1alpha1.PodTemplate {
	return []*v1alpha1.PodTemplate{&o.Spec.Template}
}

func (Workload) Translate(o *v1alpha1.TrellisStatefulSet, p *inject.Profile) ([]client.Object, error) {
	return Translate(o, p)
}

// Observe reports the StatefulSet's replicas; it is ready once the wanted
// number are updated and ready.
func (Workload) Observe(ctx context.Context, cache client.Reader, o *v1alpha1.TrellisStatefulSet) (workload.Outcome, error) {
	sts := &appsv1.StatefulSet{}
	if out, found, err := workload.GetOwned(ctx, cache, o, sts, "StatefulSet"); !found {
		return out, err
	}
	want := int32(1)
	if o.Spec.Replicas != nil {
		want = *o.Spec.Replicas
	}
	o.Status.Replicas, o.Status.ReadyReplicas = sts.Status.Replicas, sts.Status.ReadyReplicas
	ready := sts.Status.ObservedGeneration >= sts.Generation && sts.Status.ReadyReplicas == want && sts.Status.UpdatedReplicas == want
	return workload.Progress(ready, fmt.Sprintf("%d/%d replicas ready", sts.Status.ReadyReplicas, want)), nil
}
