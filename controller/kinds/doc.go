// Package kinds holds the translations of the workload kinds whose reconcile
// is the shared translate-ensure-observe loop: TrellisCronJob,
// TrellisDaemon and TrellisStatefulSet.
package kinds

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/controller/inject"
)

// objectMeta is the metadata of an object owned by a workload.
func objectMeta(owner metav1.Object, gvk schema.GroupVersionKind, kind, name, service string) metav1.ObjectMeta {
	labels := inject.SelectorLabels(kind, owner.GetName())
	labels[v1alpha1.LabelService] = service
	labels[v1alpha1.LabelManagedBy] = v1alpha1.ManagedBy
	return metav1.ObjectMeta{
		Name: name, Namespace: owner.GetNamespace(), Labels: labels,
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(owner, gvk)},
	}
}

func gvk(kind string) schema.GroupVersionKind { return v1alpha1.GroupVersion.WithKind(kind) }
