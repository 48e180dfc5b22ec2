// Package trellisservice reconciles TrellisServices into a Deployment, a
// Service, a PodDisruptionBudget, a ConfigMap and an optional Ingress.
package trellisservice

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/controller/inject"
)

// Kind is the API kind this package reconciles.
const Kind = "TrellisService"

// ServiceName is the discovery and DNS name of a TrellisService.
func ServiceName(ts *v1alpha1.TrellisService) string {
	if ts.Spec.Service != "" {
		return ts.Spec.Service
	}
	return ts.Name
}

// Translate returns the native objects a TrellisService becomes, owned by it.
// It is a pure function of the object and the runtime profile.
func Translate(ts *v1alpha1.TrellisService, p *inject.Profile) ([]client.Object, error) {
	svcName := ServiceName(ts)
	owner := []metav1.OwnerReference{*metav1.NewControllerRef(ts, v1alpha1.GroupVersion.WithKind(Kind))}
	meta := func(name string) metav1.ObjectMeta {
		labels := inject.SelectorLabels(Kind, ts.Name)
		labels[wellknown.LabelService] = svcName
		labels[wellknown.LabelManagedBy] = wellknown.ManagedBy
		return metav1.ObjectMeta{Name: name, Namespace: ts.Namespace, Labels: labels, OwnerReferences: owner}
	}
	var objs []client.Object

	configMap := ""
	if len(ts.Spec.Runtime.Config) > 0 {
		configMap = ts.Name + "-config"
		cm := &corev1.ConfigMap{ObjectMeta: meta(configMap), Data: map[string]string{}}
		for k, v := range ts.Spec.Runtime.Config {
			cm.Data[k] = v
		}
		objs = append(objs, cm)
	}

	tmpl, err := inject.PodTemplate(p, inject.Workload{
		Kind: Kind, Name: ts.Name, Namespace: ts.Namespace, Service: svcName,
		ObjectLabels: ts.Labels, Ports: ts.Spec.Ports, Runtime: ts.Spec.Runtime, ConfigMap: configMap,
	}, ts.Spec.Template)
	if err != nil {
		return nil, err
	}
	replicas := int32(1)
	if ts.Spec.Replicas != nil {
		replicas = *ts.Spec.Replicas
	}
	maxUnavailable := intstr.FromInt32(0)
	maxSurge := intstr.FromString("25%")
	dep := &appsv1.Deployment{
		ObjectMeta: meta(ts.Name),
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: inject.SelectorLabels(Kind, ts.Name)},
			Template: tmpl,
			Strategy: appsv1.DeploymentStrategy{
				Type:          appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &maxUnavailable, MaxSurge: &maxSurge},
			},
		},
	}
	objs = append(objs, dep)

	svc := &corev1.Service{
		ObjectMeta: meta(svcName),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: inject.SelectorLabels(Kind, ts.Name),
		},
	}
	svc.Spec.Ports = inject.ServicePorts(ts.Spec.Ports)
	objs = append(objs, svc)

	// By default at most 25% of the pods may be disrupted at once, rounded
	// up, so even a single-replica service can be drained off a node; a
	// minAvailable floor is the user's explicit choice.
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: meta(ts.Name),
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: inject.SelectorLabels(Kind, ts.Name)}},
	}
	if ts.Spec.MinAvailable != nil {
		pdb.Spec.MinAvailable = ts.Spec.MinAvailable
	} else {
		pdb.Spec.MaxUnavailable = new(intstr.FromString("25%"))
	}
	objs = append(objs, pdb)

	if in := ts.Spec.Ingress; in != nil {
		var port *v1alpha1.Port
		for i := range ts.Spec.Ports {
			if ts.Spec.Ports[i].Name == in.Port {
				port = &ts.Spec.Ports[i]
			}
		}
		if port == nil {
			return nil, fmt.Errorf("TrellisService %s/%s: ingress.port %q names no port", ts.Namespace, ts.Name, in.Port)
		}
		path := in.Path
		if path == "" {
			path = "/"
		}
		objs = append(objs, &networkingv1.Ingress{
			ObjectMeta: meta(ts.Name),
			Spec: networkingv1.IngressSpec{
				IngressClassName: in.ClassName,
				Rules: []networkingv1.IngressRule{{
					Host: in.Host,
					IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
						Paths: []networkingv1.HTTPIngressPath{{
							Path:     path,
							PathType: new(networkingv1.PathTypePrefix),
							Backend:  networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: svcName, Port: networkingv1.ServiceBackendPort{Name: port.Name}}},
						}},
					}},
				}},
			},
		})
	}
	for _, o := range objs {
		setTypeMeta(o)
	}
	return objs, nil
}

func setTypeMeta(o client.Object) {
	switch x := o.(type) {
	case *appsv1.Deployment:
		x.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}
	case *corev1.Service:
		x.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}
	case *corev1.ConfigMap:
		x.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}
	case *policyv1.PodDisruptionBudget:
		x.TypeMeta = metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"}
	case *networkingv1.Ingress:
		x.TypeMeta = metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"}
	}
}
