package kinds

import (
	"context"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/controller/inject"
	"github.com/trellis-dev/trellis/controller/internal/workload"
)

// DaemonKind is TrellisDaemon -> DaemonSet.
const DaemonKind = "TrellisDaemon"

// DefaultDaemonNamespaces may run TrellisDaemons unless configured otherwise.
var DefaultDaemonNamespaces = []string{"trellis-system", "kube-system"}

// TranslateDaemon returns the DaemonSet a TrellisDaemon becomes, or an
// ErrInvalid error when its namespace may not run infrastructure daemons.
func TranslateDaemon(allowed []string) func(*v1alpha1.TrellisDaemon, *inject.Profile) ([]client.Object, error) {
	return func(d *v1alpha1.TrellisDaemon, p *inject.Profile) ([]client.Object, error) {
		if !slices.Contains(allowed, d.Namespace) {
			return nil, fmt.Errorf("%s %s/%s: namespace %q may not run infrastructure daemons (allowed: %v): %w",
				DaemonKind, d.Namespace, d.Name, d.Namespace, allowed, workload.ErrInvalid)
		}
		pt, err := inject.PodTemplate(p, inject.Workload{
			Kind: DaemonKind, Name: d.Name, Namespace: d.Namespace, Service: d.Name,
			ObjectLabels: d.Labels, Runtime: d.Spec.Runtime,
		}, d.Spec.Template)
		if err != nil {
			return nil, err
		}
		maxUnavailable := intstr.FromInt32(1)
		if d.Spec.MaxUnavailable != nil {
			maxUnavailable = intstr.FromInt32(*d.Spec.MaxUnavailable)
		}
		return []client.Object{&appsv1.DaemonSet{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
			ObjectMeta: objectMeta(d, gvk(DaemonKind), DaemonKind, d.Name, d.Name),
			Spec: appsv1.DaemonSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: inject.SelectorLabels(DaemonKind, d.Name)},
				Template: pt,
				UpdateStrategy: appsv1.DaemonSetUpdateStrategy{
					Type:          appsv1.RollingUpdateDaemonSetStrategyType,
					RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: &maxUnavailable},
				},
			},
		}}, nil
	}
}

// Daemon is the TrellisDaemon kind for the shared reconciler.
func Daemon(allowed []string) workload.Kind[*v1alpha1.TrellisDaemon] {
	return workload.Kind[*v1alpha1.TrellisDaemon]{
		Name:      DaemonKind,
		New:       func() *v1alpha1.TrellisDaemon { return &v1alpha1.TrellisDaemon{} },
		Translate: TranslateDaemon(allowed),
		Status: func(o *v1alpha1.TrellisDaemon) (any, *v1alpha1.CommonStatus) {
			return &o.Status, &o.Status.CommonStatus
		},
		Observe: func(ctx context.Context, cache client.Reader, o *v1alpha1.TrellisDaemon) (bool, string, error) {
			ds := &appsv1.DaemonSet{}
			err := cache.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: o.Name}, ds)
			if apierrors.IsNotFound(err) {
				return false, "DaemonSet not created yet", nil
			}
			if err != nil {
				return false, "", err
			}
			s := ds.Status
			o.Status.DesiredNumberScheduled, o.Status.NumberReady = s.DesiredNumberScheduled, s.NumberReady
			ready := s.ObservedGeneration >= ds.Generation && s.UpdatedNumberScheduled == s.DesiredNumberScheduled && s.NumberReady == s.DesiredNumberScheduled
			return ready, fmt.Sprintf("%d/%d pods ready", s.NumberReady, s.DesiredNumberScheduled), nil
		},
	}
}
