package rollout

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// A granted eviction whose delete was lost. The Eviction API grants an
// eviction by recording the pod in its PodDisruptionBudget's
// status.disruptedPods, which takes one disruption from the budget, and
// then deletes the pod within the caller's request. A drain killed between
// the two (a rollout process killed mid-call: its request is cancelled)
// leaves the pod running and counted as already disrupted: when the grant
// took the budget's last disruption, the budget refuses every eviction it
// guards, this pod's too, until the disruption controller gives up on the
// grant (its DeletionTimeout, 2 min after the grant). A drain that runs
// within a minute of the grant finishes what the apiserver granted: it
// deletes the pod, which the budget already counts as gone, so no second
// disruption is taken. That holds while the drain's host, the apiservers
// and the controller manager keep their clocks within a minute of each
// other. The delete does not add the DisruptionTarget condition the
// Eviction API adds before its delete (the killed request may have added
// it): a Job's podFailurePolicy may then count the pod as failed, not
// disrupted.
const (
	// grantWindow: only grants younger than this are finished. The
	// disruption controller drops a grant after 2 min and counts the pod
	// healthy again; a delete this early cannot race it.
	grantWindow = time.Minute
	// grantSkew accepts a grant time this far in our future (an apiserver
	// clock ahead of ours): only liveness, the window bounds safety.
	grantSkew = 10 * time.Second
	// grantAfterCreation: a grant counts only this long after the pod's
	// creation. Both are whole seconds, and on an HA control plane they may
	// come from different apiservers' clocks: a grant close to a pod's
	// creation may be its predecessor's (a StatefulSet pod recreated under
	// the same name), and is left to the budget.
	grantAfterCreation = 2 * time.Second
)

// budgets holds one drain pass's PDBs by namespace: a node whose pods are
// refused lists each namespace's budgets once a pass, not once a pod.
type budgets map[string][]policyv1.PodDisruptionBudget

func (k *KubeCluster) budgetsOf(ctx context.Context, seen budgets, ns string) ([]policyv1.PodDisruptionBudget, error) {
	if bs, ok := seen[ns]; ok {
		return bs, nil
	}
	l, err := k.Client.PolicyV1().PodDisruptionBudgets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	seen[ns] = l.Items
	return l.Items, nil
}

// refused is what an eviction refused by a budget finds: the budget that
// guards the pod, and whether that budget holds a fresh grant for this
// very pod. A pod under several budgets is never finished (the Eviction
// API refuses it outright).
func (k *KubeCluster) refused(ctx context.Context, seen budgets, p *corev1.Pod) (pdb string, granted bool) {
	pdbs, err := k.budgetsOf(ctx, seen, p.Namespace)
	if err != nil {
		return "(unknown)", false
	}
	var names []string
	for i := range pdbs {
		b := &pdbs[i]
		sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(p.Labels)) {
			continue
		}
		names = append(names, p.Namespace+"/"+b.Name)
		granted = k.freshGrant(b, p)
	}
	if len(names) == 0 {
		return "(unknown)", false
	}
	return strings.Join(names, ", "), granted && len(names) == 1
}

// freshGrant: the budget granted this pod's eviction at least
// grantAfterCreation after the pod was created, and under grantWindow ago
// on the drain's clock.
func (k *KubeCluster) freshGrant(b *policyv1.PodDisruptionBudget, p *corev1.Pod) bool {
	at, ok := b.Status.DisruptedPods[p.Name]
	if !ok || at.Time.Before(p.CreationTimestamp.Add(grantAfterCreation)) {
		return false
	}
	age := k.Clock.Since(at.Time)
	return age > -grantSkew && age < grantWindow
}

// finishGrant deletes a pod whose eviction was granted, its UID as the
// precondition (never a successor of the same name). A pod already gone
// or replaced is done; any other failure is left to the next pass.
func (k *KubeCluster) finishGrant(ctx context.Context, p *corev1.Pod, opts DrainOptions) (done bool, err error) {
	del := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}, GracePeriodSeconds: opts.GracePeriod}
	err = k.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, del)
	switch {
	case err == nil, apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return true, nil
	case ctx.Err() != nil:
		return false, ctx.Err()
	default:
		return false, nil
	}
}
