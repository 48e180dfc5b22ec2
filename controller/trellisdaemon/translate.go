// Package trellisdaemon reconciles TrellisDaemons into a DaemonSet, in the
// namespaces that may run infrastructure daemons.
package trellisdaemon

import (
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/controller/inject"
	"github.com/trellis-dev/trellis/controller/internal/workload"
)

// Kind is the API kind this package reconciles.
const Kind = "TrellisDaemon"

// DefaultNamespaces may run TrellisDaemons unless configured otherwise.
var DefaultNamespaces = []string{"trellis-system", "kube-system"}

// Translate returns the DaemonSet a TrellisDaemon becomes, or an ErrInvalid
// error when its namespace is not among allowed.
func Translate(d *v1alpha1.TrellisDaemon, p *inject.Profile, allowed []string) ([]client.Object, error) {
	if !slices.Contains(allowed, d.Namespace) {
		return nil, fmt.Errorf("%s %s/%s: namespace %q may not run infrastructure daemons (allowed: %v): %w",
			Kind, d.Namespace, d.Name, d.Namespace, allowed, workload.ErrInvalid)
	}
	pt, err := inject.PodTemplate(p, inject.Workload{
		Kind: Kind, Name: d.Name, Namespace: d.Namespace, Service: d.Name,
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
		ObjectMeta: workload.OwnedMeta(d, Kind, d.Name, d.Name),
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: inject.SelectorLabels(Kind, d.Name)},
			Template: pt,
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{
				Type:          appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: &maxUnavailable},
			},
		},
	}}, nil
}
