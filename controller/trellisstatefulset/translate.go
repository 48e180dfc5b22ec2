// Package trellisstatefulset reconciles TrellisStatefulSets into a
// StatefulSet, a headless Service for stable member names and a
// PodDisruptionBudget.
package trellisstatefulset

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/controller/inject"
	"github.com/trellis-dev/trellis/controller/internal/workload"
)

// Kind is the API kind this package reconciles.
const Kind = "TrellisStatefulSet"

// serviceName is the headless Service that names the members.
func serviceName(s *v1alpha1.TrellisStatefulSet) string {
	if s.Spec.Service != "" {
		return s.Spec.Service
	}
	return s.Name
}

// Translate returns the StatefulSet, headless Service and PodDisruptionBudget
// a TrellisStatefulSet becomes.
func Translate(s *v1alpha1.TrellisStatefulSet, p *inject.Profile) ([]client.Object, error) {
	svcName := serviceName(s)
	pt, err := inject.PodTemplate(p, inject.Workload{
		Kind: Kind, Name: s.Name, Namespace: s.Namespace, Service: svcName,
		ObjectLabels: s.Labels, Ports: s.Spec.Ports, Runtime: s.Spec.Runtime,
	}, s.Spec.Template)
	if err != nil {
		return nil, err
	}
	replicas := int32(1)
	if s.Spec.Replicas != nil {
		replicas = *s.Spec.Replicas
	}
	selector := &metav1.LabelSelector{MatchLabels: inject.SelectorLabels(Kind, s.Name)}
	var claims []corev1.PersistentVolumeClaim
	for _, vct := range s.Spec.VolumeClaimTemplates {
		c := *vct.DeepCopy()
		c.Namespace = ""
		claims = append(claims, c)
	}
	sts := &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: workload.OwnedMeta(s, Kind, s.Name, svcName),
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
		ObjectMeta: workload.OwnedMeta(s, Kind, svcName, svcName),
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			Selector:                 selector.MatchLabels,
			PublishNotReadyAddresses: true,
		},
	}
	svc.Spec.Ports = inject.ServicePorts(s.Spec.Ports)
	pdb := &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: workload.OwnedMeta(s, Kind, s.Name, svcName),
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
