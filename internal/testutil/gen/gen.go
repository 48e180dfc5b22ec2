// Package gen builds Trellis objects for tests with small option functions:
// gen.Service("web", gen.WithReplicas(3)).
package gen

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/trellis-dev/trellis/api/v1alpha1"
)

// ServiceOption changes a TrellisService under construction.
type ServiceOption func(*v1alpha1.TrellisService)

// Service returns a TrellisService in namespace "default" with one
// container "app" that has resources, serving port http 8080.
func Service(name string, opts ...ServiceOption) *v1alpha1.TrellisService {
	ts := &v1alpha1.TrellisService{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "TrellisService"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: v1alpha1.TrellisServiceSpec{
			Replicas: new(int32(1)),
			Ports:    []v1alpha1.Port{{Name: "http", Port: 8080, Protocol: corev1.ProtocolTCP}},
			Template: v1alpha1.PodTemplate{Containers: []corev1.Container{Container("app")}},
		},
	}
	for _, o := range opts {
		o(ts)
	}
	return ts
}

// Container returns a container with requests and limits.
func Container(name string) corev1.Container {
	return corev1.Container{
		Name:  name,
		Image: "registry.example/" + name + ":1.0",
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
		},
	}
}

func WithNamespace(ns string) ServiceOption {
	return func(ts *v1alpha1.TrellisService) { ts.Namespace = ns }
}

func WithReplicas(n int32) ServiceOption {
	return func(ts *v1alpha1.TrellisService) { ts.Spec.Replicas = &n }
}

func WithConfig(kv map[string]string) ServiceOption {
	return func(ts *v1alpha1.TrellisService) { ts.Spec.Runtime.Config = kv }
}

func WithIngress(host string) ServiceOption {
	return func(ts *v1alpha1.TrellisService) {
		ts.Spec.Ingress = &v1alpha1.Ingress{Host: host, Path: "/", Port: ts.Spec.Ports[0].Name}
	}
}

func WithoutDiscovery() ServiceOption {
	return func(ts *v1alpha1.TrellisService) { ts.Spec.Runtime.Discovery = new(false) }
}

func WithoutIdentity() ServiceOption {
	return func(ts *v1alpha1.TrellisService) { ts.Spec.Runtime.Identity = new(false) }
}

// WithBareContainer adds a container without resources.
func WithBareContainer(name string) ServiceOption {
	return func(ts *v1alpha1.TrellisService) {
		ts.Spec.Template.Containers = append(ts.Spec.Template.Containers, corev1.Container{Name: name, Image: "registry.example/" + name})
	}
}

func WithLabels(kv map[string]string) ServiceOption {
	return func(ts *v1alpha1.TrellisService) { ts.Labels = kv }
}
