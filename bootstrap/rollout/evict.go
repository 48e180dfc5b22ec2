package rollout

import (
	"context"
	"fmt"
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
// leaves the pod running and counted as already disrupted: until the
// disruption controller gives up on the grant (its DeletionTimeout, 2
// min), the budget refuses every eviction it guards, this pod's too. The
// next drain finishes what the apiserver granted: it deletes the pod,
// which the budget already counts as gone, so no second disruption is
// taken.
const (
	// grantWindow: only grants younger than this are finished. The
	// disruption controller drops a grant after 2 min and counts the pod
	// healthy again; a delete this early cannot race it.
	grantWindow = time.Minute
	// grantSkew tolerates an apiserver clock this far ahead of ours.
	grantSkew = 10 * time.Second
)

// refused is what an eviction refused by a budget finds: the budget that
// guards the pod, and whether that budget holds a fresh grant for this
// very pod (granted after the pod was created: a StatefulSet pod recreated
// under the same name is not the one granted).
func (k *KubeCluster) refused(ctx context.Context, p *corev1.Pod) (pdb string, granted bool) {
	pdbs, err := k.Client.PolicyV1().PodDisruptionBudgets(p.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "(unknown)", false
	}
	for i := range pdbs.Items {
		b := &pdbs.Items[i]
		sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(p.Labels)) {
			continue
		}
		return p.Namespace + "/" + b.Name, k.freshGrant(b, p)
	}
	return "(unknown)", false
}

func (k *KubeCluster) freshGrant(b *policyv1.PodDisruptionBudget, p *corev1.Pod) bool {
	// Both times are whole seconds: a grant in the second the pod was
	// created may be its predecessor's, and is left to the budget.
	at, ok := b.Status.DisruptedPods[p.Name]
	if !ok || !at.After(p.CreationTimestamp.Time) {
		return false
	}
	age := k.Clock.Since(at.Time)
	return age > -grantSkew && age < grantWindow
}

// finishGrant deletes a pod whose eviction was granted (its UID as the
// precondition: never a successor of the same name).
func (k *KubeCluster) finishGrant(ctx context.Context, p *corev1.Pod, opts DrainOptions) error {
	del := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}, GracePeriodSeconds: opts.GracePeriod}
	err := k.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, del)
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("failed to finish the granted eviction of %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}
