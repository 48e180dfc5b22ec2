package rollout

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
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
// grant (its DeletionTimeout, 2 min after the grant).
//
// A drain finishes such a grant (deletes the pod) only when the budget as
// it stands now would let it go, as the Eviction API would decide at this
// moment (grantHolds): the controller has seen the budget's spec, its
// status is the controller's own count (which leaves the granted pod out
// of currentHealthy), and that count still meets the budget. The grant's
// age is measured on the apiserver's clock, never the drain host's
// (docs/design/drain-grant.md). The delete does not add the
// DisruptionTarget condition the Eviction API adds before its delete (the
// killed request may have added it): a Job's podFailurePolicy may then
// count the pod as failed, not disrupted.
const (
	// grantWindow: only grants younger than this, on the apiserver's
	// clock, are finished. The disruption controller drops a grant 2 min
	// after it, on its own clock, and counts the pod healthy again: a
	// delete this early cannot race it while the control plane's clocks
	// are within a minute of each other.
	grantWindow = time.Minute
	// grantSkew accepts a grant this far in the apiserver's future (HA
	// apiservers' clocks apart): only liveness, the window bounds safety.
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
		return nil, fmt.Errorf("failed to list the disruption budgets in namespace %s: %w", ns, err)
	}
	seen[ns] = l.Items
	return l.Items, nil
}

// refused is what an eviction refused by a budget finds in this pass's
// budgets: the budgets that guard the pod, and whether its one budget
// records a grant for it (a candidate for finishGrant, which decides on a
// fresh read).
func (k *KubeCluster) refused(ctx context.Context, seen budgets, p *corev1.Pod) (pdb string, granted bool) {
	pdbs, err := k.budgetsOf(ctx, seen, p.Namespace)
	if err != nil {
		return "(unknown)", false
	}
	mine := guarding(pdbs, p)
	if len(mine) == 0 {
		return "(unknown)", false
	}
	names := make([]string, len(mine))
	for i, b := range mine {
		names[i] = p.Namespace + "/" + b.Name
	}
	_, granted = mine[0].Status.DisruptedPods[p.Name]
	return strings.Join(names, ", "), granted && len(mine) == 1
}

// guarding returns the budgets whose selector matches the pod.
func guarding(pdbs []policyv1.PodDisruptionBudget, p *corev1.Pod) []*policyv1.PodDisruptionBudget {
	var mine []*policyv1.PodDisruptionBudget
	for i := range pdbs {
		b := &pdbs[i]
		sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(p.Labels)) {
			continue
		}
		mine = append(mine, b)
	}
	return mine
}

// grantHolds says why the grant its budgets hold for p may not be finished
// at now, the apiserver's clock at the read of pdbs; nil: delete the pod.
// It asks what the Eviction API would ask at this moment, of a status the
// disruption controller wrote after the grant:
//   - the pod has exactly one budget (the Eviction API refuses more);
//   - that budget records a grant for it, made at least grantAfterCreation
//     after the pod's creation (not a same-named predecessor's), under
//     grantWindow ago and at most grantSkew ahead;
//   - the controller has seen the budget's spec (observedGeneration) and
//     its last sync did not fail;
//   - the status is the controller's count: disruptionsAllowed is
//     currentHealthy - desiredHealthy (floored at 0). The Eviction API's own
//     write of the grant decrements disruptionsAllowed and leaves the pod in
//     currentHealthy: that status is not yet recounted;
//   - currentHealthy >= desiredHealthy. The controller leaves a granted pod
//     out of currentHealthy, so this is "deleting the pod keeps the budget".
func grantHolds(pdbs []policyv1.PodDisruptionBudget, p *corev1.Pod, now time.Time) error {
	mine := guarding(pdbs, p)
	if len(mine) != 1 {
		return fmt.Errorf("%d budgets guard it", len(mine))
	}
	b := mine[0]
	at, ok := b.Status.DisruptedPods[p.Name]
	switch age := now.Sub(at.Time); {
	case !ok:
		return fmt.Errorf("budget %s holds no grant for it", b.Name)
	case at.Time.Before(p.CreationTimestamp.Add(grantAfterCreation)):
		return fmt.Errorf("budget %s's grant is from %s, under %s after the pod's creation (%s)", b.Name,
			at.UTC().Format(time.RFC3339), grantAfterCreation, p.CreationTimestamp.UTC().Format(time.RFC3339))
	case age >= grantWindow || age <= -grantSkew:
		return fmt.Errorf("budget %s's grant is %s old on the apiserver's clock, want under %s", b.Name, age, grantWindow)
	}
	st := b.Status
	if st.ObservedGeneration != b.Generation {
		return fmt.Errorf("budget %s: generation %d not yet observed by the disruption controller (observed %d)", b.Name, b.Generation, st.ObservedGeneration)
	}
	if c := meta.FindStatusCondition(st.Conditions, policyv1.DisruptionAllowedCondition); c != nil && c.Reason == policyv1.SyncFailedReason {
		return fmt.Errorf("budget %s: the disruption controller's last sync failed: %s", b.Name, c.Message)
	}
	counted := st.CurrentHealthy - st.DesiredHealthy
	if counted < 0 || st.ExpectedPods <= 0 {
		counted = 0
	}
	if st.DisruptionsAllowed != counted {
		return fmt.Errorf("budget %s: status not recounted since the grant (%d disruptions allowed, %d healthy of %d needed)", b.Name,
			st.DisruptionsAllowed, st.CurrentHealthy, st.DesiredHealthy)
	}
	if st.CurrentHealthy < st.DesiredHealthy {
		return fmt.Errorf("budget %s needs %d healthy pods and has %d besides it", b.Name, st.DesiredHealthy, st.CurrentHealthy)
	}
	return nil
}

// finishGrant deletes a pod whose eviction was granted, when its budget,
// read afresh with the apiserver's clock, still lets it go (grantHolds);
// why says what kept it otherwise. The delete has the pod's UID as its
// precondition (never a successor of the same name). A pod already gone
// or replaced is done; any other failure is left to the next pass.
func (k *KubeCluster) finishGrant(ctx context.Context, p *corev1.Pod, opts DrainOptions) (done bool, why string, err error) {
	pdbs, now, err := k.serverBudgets(ctx, p.Namespace)
	if err != nil {
		if ctx.Err() != nil {
			return false, "", ctx.Err()
		}
		return false, err.Error(), nil
	}
	if err := grantHolds(pdbs, p, now); err != nil {
		return false, err.Error(), nil
	}
	del := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}, GracePeriodSeconds: opts.GracePeriod}
	err = k.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, del)
	switch {
	case err == nil, apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return true, "", nil
	case ctx.Err() != nil:
		return false, "", ctx.Err()
	default:
		return false, fmt.Sprintf("failed to delete it: %v", err), nil
	}
}
