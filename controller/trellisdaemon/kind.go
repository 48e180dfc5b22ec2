package trellisdaemon

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/controller/inject"
	"github.com/trellis-dev/trellis/controller/internal/workload"
)

// Workload is the TrellisDaemon kind for the shared reconciler.
type Workload struct {
	// Namespaces may run TrellisDaemons.
	Namespaces []string
}

var (
	_ workload.Kind[*v1alpha1.TrellisDaemon]     = Workload{}
	_ workload.Observer[*v1alpha1.TrellisDaemon] = Workload{}
)

// The methods of workload.Kind.

func (Workload) Name() string                 { return Kind }
func (Workload) New() *v1alpha1.TrellisDaemon { return &v1alpha1.TrellisDaemon{} }
func (Workload) NewList() client.ObjectList   { return &v1alpha1.TrellisDaemonList{} }
func (Workload) Owns() []client.Object        { return []client.Object{&appsv1.DaemonSet{}} }
func (Workload) Status(o *v1alpha1.TrellisDaemon) (any, *v1alpha1.CommonStatus) {
	return &o.Status, &o.Status.CommonStatus
}

func (Workload) Templates(o *v1alpha1.TrellisDaemon) []*v1alpha1.PodTemplate {
	return []*v1alpha1.PodTemplate{&o.Spec.Template}
}

func (w Workload) Translate(o *v1alpha1.TrellisDaemon, p *inject.Profile) ([]client.Object, error) {
	return Translate(o, p, w.Namespaces)
}

// Observe reports the DaemonSet's scheduled and ready pods; it is ready
// once every scheduled pod is updated and ready.
func (Workload) Observe(ctx context.Context, cache client.Reader, o *v1alpha1.TrellisDaemon) (workload.Outcome, error) {
	ds := &appsv1.DaemonSet{}
	if out, found, err := workload.GetOwned(ctx, cache, o, ds, "DaemonSet"); !found {
		return out, err
	}
	s := ds.Status
	o.Status.DesiredNumberScheduled, o.Status.NumberReady = s.DesiredNumberScheduled, s.NumberReady
	ready := s.ObservedGeneration >= ds.Generation && s.UpdatedNumberScheduled == s.DesiredNumberScheduled && s.NumberReady == s.DesiredNumberScheduled
	return workload.Progress(ready, fmt.Sprintf("%d/%d pods ready", s.NumberReady, s.DesiredNumberScheduled)), nil
}
