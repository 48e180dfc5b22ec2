package kinds

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/controller/inject"
	"github.com/trellis-dev/trellis/controller/internal/workload"
)

// StatefulSetKind is TrellisStatefulSet -> StatefulSet + headless Service + PDB.
const StatefulSetKind = "TrellisStatefulSet"

func statefulServiceName(s *v1alpha1.TrellisStatefulSet) string {
	if s.Spec.Service != "" {
		return s.Spec.Service
	}
	return s.Name
}

// TranslateStatefulSet returns what a TrellisStatefulSet becomes.
func TranslateStatefulSet(s *v1alpha1.TrellisStatefulSet, p *inject.Profile) ([]client.Object, error) {
	svcName := statefulServiceName(s)
	pt, err := inject.PodTemplate(p, inject.Workload{
		Kind: StatefulSetKind, Name: s.Name, Namespace: s.Namespace, Service: svcName,
		ObjectLabels: s.Labels, Ports: s.Spec.Ports, Runtime: s.Spec.Runtime,
	}, s.Spec.Template)
	if err != nil {
		return nil, err
	}
	replicas := int32(1)
	if s.Spec.Replicas != nil {
		replicas = *s.Spec.Replicas
	}
	selector := &metav1.LabelSelector{MatchLabels: inject.SelectorLabels(StatefulSetKind, s.Name)}
	var claims []corev1.PersistentVolumeClaim
	for _, vct := range s.Spec.VolumeClaimTemplates {
		c := *vct.DeepCopy()
		c.Namespace = ""
		claims = append(claims, c)
	}
	sts := &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: objectMeta(s, gvk(StatefulSetKind), StatefulSetKind, s.Name, svcName),
		Spec: appsv1.StatefulSetSpec{
			Replicas:             &replicas,
			Selector:             selector,
			ServiceName:          svcName,
			Template:             pt,
			VolumeClaimTemplates: claims,
			PodManagementPolicy:  appsv1.ParallelPodManagement,
		},
	}
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: objectMeta(s, gvk(StatefulSetKind), StatefulSetKind, svcName, svcName),
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			Selector:                 selector.MatchLabels,
			PublishNotReadyAddresses: true,
		},
	}
	svc.Spec.Ports = inject.ServicePorts(s.Spec.Ports)
	pdb := &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: objectMeta(s, gvk(StatefulSetKind), StatefulSetKind, s.Name, svcName),
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: selector},
	}
	if s.Spec.MinAvailable != nil {
		pdb.Spec.MinAvailable = s.Spec.MinAvailable
	} else {
		// Stateful members leave one at a time.
		pdb.Spec.MaxUnavailable = new(intstr.FromInt32(1))
	}
	return []client.Object{sts, svc, pdb}, nil
}

// StatefulSet is the TrellisStatefulSet kind for the shared reconciler.
func StatefulSet() workload.Kind[*v1alpha1.TrellisStatefulSet] {
	return workload.Kind[*v1alpha1.TrellisStatefulSet]{
		Name:      StatefulSetKind,
		New:       func() *v1alpha1.TrellisStatefulSet { return &v1alpha1.TrellisStatefulSet{} },
		Translate: TranslateStatefulSet,
		Status: func(o *v1alpha1.TrellisStatefulSet) (any, *v1alpha1.CommonStatus) {
			return &o.Status, &o.Status.CommonStatus
		},
		Observe: func(ctx context.Context, cache client.Reader, o *v1alpha1.TrellisStatefulSet) (bool, string, error) {
			sts := &appsv1.StatefulSet{}
			err := cache.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: o.Name}, sts)
			if apierrors.IsNotFound(err) {
				return false, "StatefulSet not created yet", nil
			}
			if err != nil {
				return false, "", err
			}
			want := int32(1)
			if o.Spec.Replicas != nil {
				want = *o.Spec.Replicas
			}
			o.Status.Replicas, o.Status.ReadyReplicas = sts.Status.Replicas, sts.Status.ReadyReplicas
			ready := sts.Status.ObservedGeneration >= sts.Generation && sts.Status.ReadyReplicas == want && sts.Status.UpdatedReplicas == want
			return ready, fmt.Sprintf("%d/%d replicas ready", sts.Status.ReadyReplicas, want), nil
		},
	}
}
