package addons

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// checkFleetMembers refuses to apply a fleet API whose number of etcd
// members differs from the running one's: the StatefulSet would start
// members that are not in the cluster's membership (or stop ones that
// are) and the quorum would be lost. Growing or shrinking an etcd
// cluster is a member add or remove at a time, which Trellis does not do.
// It runs before anything is written.
func (a *Applier) checkFleetMembers(ctx context.Context, rendered []Rendered) error {
	for _, r := range rendered {
		if r.Addon.Name != KarmadaAPIServerAddon {
			continue
		}
		for _, o := range r.Objects {
			if o.GetKind() != "StatefulSet" || o.GetName() != KarmadaService {
				continue
			}
			var sts appsv1.StatefulSet
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &sts); err != nil || sts.Spec.Replicas == nil {
				return fmt.Errorf("addon %s: StatefulSet %s has no replicas: %v", r.Addon.Name, KarmadaService, err)
			}
			want := int64(*sts.Spec.Replicas)
			live, err := a.Client.AppsV1().StatefulSets(Namespace).Get(ctx, KarmadaService, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("failed to read statefulset %s: %w", KarmadaService, err)
			}
			have := int64(1)
			if live.Spec.Replicas != nil {
				have = int64(*live.Spec.Replicas)
			}
			if have != want {
				return fmt.Errorf("addon %s: the fleet's etcd has %d members (statefulset %s/%s) and the definition asks for %d: changing an etcd's membership is not supported; set the addon's values.replicas to %d to keep it",
					r.Addon.Name, have, Namespace, KarmadaService, want, have)
			}
		}
	}
	return nil
}
