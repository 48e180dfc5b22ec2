package main

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/trellis-dev/trellis/api/wellknown"
)

const (
	benchNode      = "bench-node"
	benchNamespace = "shop"
)

func serviceName(i int) string { return fmt.Sprintf("svc-%02d", i) }

// createPods makes nPods pods bound to benchNode, perService to a
// Deployment -> ReplicaSet -> Pod chain as a Deployment controller would
// leave them (labels, pod-template-hash, controller ownerReferences), and
// returns one log per pod's container. No controller runs: the objects
// only have to be what the shipper's informer lists and watches.
func createPods(ctx context.Context, c kubernetes.Interface, nPods, perService int) ([]podLog, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNamespace}}
	if _, err := c.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create namespace %s: %w", benchNamespace, err)
	}
	// No controller-manager makes the default service account, which pod
	// admission needs.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: benchNamespace}}
	if _, err := c.CoreV1().ServiceAccounts(benchNamespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create the default service account: %w", err)
	}
	var logs []podLog
	var rs *appsv1.ReplicaSet
	for i := range nPods {
		svc := serviceName(i / perService)
		const hash = "7d9f8c6b5"
		labels := map[string]string{
			"app.kubernetes.io/name": svc, "app.kubernetes.io/part-of": "shop", "app.kubernetes.io/version": "1.4.2",
			"team": "checkout", "tier": "backend", wellknown.LabelService: svc, "pod-template-hash": hash,
		}
		if i%perService == 0 {
			var err error
			if rs, err = createWorkload(ctx, c, svc, hash, labels); err != nil {
				return nil, err
			}
		}
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("%s-%s-%05d", svc, hash, i), Namespace: benchNamespace, Labels: labels,
				Annotations: map[string]string{wellknown.AnnotationDiscoveryEnv: "prod"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID,
					Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
			},
			Spec: corev1.PodSpec{NodeName: benchNode, Containers: []corev1.Container{{Name: "app", Image: "registry.example/shop/" + svc + ":1.4.2"}}},
		}
		p, err := c.CoreV1().Pods(benchNamespace).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("create pod %d of %d: %w", i, nPods, err)
		}
		logs = append(logs, podLog{ns: p.Namespace, pod: p.Name, uid: string(p.UID), container: "app"})
	}
	return logs, nil
}

// createWorkload makes a Deployment and the ReplicaSet it owns.
func createWorkload(ctx context.Context, c kubernetes.Interface, svc, hash string, labels map[string]string) (*appsv1.ReplicaSet, error) {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{wellknown.LabelService: svc}}
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/shop/" + svc + ":1.4.2"}}}}
	d, err := c.AppsV1().Deployments(benchNamespace).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: svc, Namespace: benchNamespace, Labels: labels},
		Spec:       appsv1.DeploymentSpec{Selector: sel, Template: tmpl},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create deployment %s: %w", svc, err)
	}
	rs, err := c.AppsV1().ReplicaSets(benchNamespace).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: svc + "-" + hash, Namespace: benchNamespace, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: appsv1.ReplicaSetSpec{Selector: sel, Template: tmpl},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create replicaset of %s: %w", svc, err)
	}
	return rs, nil
}
