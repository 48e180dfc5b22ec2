package main

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// benchNamespace holds the workload whose pods the drains evict.
const benchNamespace = "bench-awsnodes"

// startWorkload runs a Deployment of replicas hello pods on the group's
// instance nodes behind a PDB that lets one go at a time, so that both
// tools' drains evict real pods under a budget; it returns when all are
// Ready, and a function that removes them.
func startWorkload(ctx context.Context, kc kubernetes.Interface, group string, replicas int32) (func(), error) {
	labels := map[string]string{"app": "bench-web"}
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	remove := func() {
		_ = kc.CoreV1().Namespaces().Delete(context.Background(), benchNamespace, metav1.DeleteOptions{})
	}
	one := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "bench-web"},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one, Selector: &metav1.LabelSelector{MatchLabels: labels}}}
	if _, err := kc.PolicyV1().PodDisruptionBudgets(benchNamespace).Create(ctx, pdb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return remove, err
	}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "bench-web"}, Spec: appsv1.DeploymentSpec{
		Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"trellis.dev/instance-group": group},
			Containers: []corev1.Container{{Name: "hello", Image: "trellis/hello:0.1.0", Args: []string{"--port=8080"},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 2}}},
		}},
	}}
	if _, err := kc.AppsV1().Deployments(benchNamespace).Create(ctx, dep, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return remove, err
	}
	return remove, awaitWorkload(ctx, kc, replicas)
}

// awaitWorkload waits until the Deployment's replicas are all Ready.
func awaitWorkload(ctx context.Context, kc kubernetes.Interface, replicas int32) error {
	var ready int32
	err := wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := kc.AppsV1().Deployments(benchNamespace).Get(ctx, "bench-web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ready = d.Status.ReadyReplicas
		return ready == replicas && d.Status.UpdatedReplicas == replicas, nil
	})
	if err != nil {
		return fmt.Errorf("bench-web: %d of %d replicas Ready: %w", ready, replicas, err)
	}
	return nil
}
