package rollout

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestGrantHolds: a grant is finished only when the budget as the
// disruption controller last counted it, after the grant, still lets the
// pod go, and the grant is young on the apiserver's clock.
func TestGrantHolds(t *testing.T) {
	created := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	granted := created.Add(time.Hour)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "shop", Labels: map[string]string{"app": "web"},
		CreationTimestamp: metav1.NewTime(created)}}
	// minAvailable 5 of 6, web-1 granted and counted out by the controller.
	budget := func(mod func(*policyv1.PodDisruptionBudget)) policyv1.PodDisruptionBudget {
		b := policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", Generation: 2},
			Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
			Status: policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 2, CurrentHealthy: 5, DesiredHealthy: 5, ExpectedPods: 6,
				DisruptedPods: map[string]metav1.Time{"web-1": metav1.NewTime(granted)}}}
		if mod != nil {
			mod(&b)
		}
		return b
	}
	for _, tc := range []struct {
		name    string
		pdbs    []policyv1.PodDisruptionBudget
		now     time.Time
		wantErr string // "" finishes the grant
	}{
		{name: "the budget still met", pdbs: []policyv1.PodDisruptionBudget{budget(nil)}, now: granted.Add(5 * time.Second)},
		{name: "slack left besides", pdbs: []policyv1.PodDisruptionBudget{budget(func(b *policyv1.PodDisruptionBudget) {
			b.Status.CurrentHealthy, b.Status.DisruptionsAllowed = 6, 1
		})}, now: granted.Add(5 * time.Second)},
		{name: "another pod unready since", pdbs: []policyv1.PodDisruptionBudget{budget(func(b *policyv1.PodDisruptionBudget) {
			b.Status.CurrentHealthy = 4
		})}, now: granted.Add(5 * time.Second), wantErr: "needs 5 healthy pods and has 4"},
		{name: "minAvailable raised, not yet observed", pdbs: []policyv1.PodDisruptionBudget{budget(func(b *policyv1.PodDisruptionBudget) {
			b.Generation = 3
		})}, now: granted.Add(5 * time.Second), wantErr: "generation 3 not yet observed"},
		{name: "minAvailable raised, observed", pdbs: []policyv1.PodDisruptionBudget{budget(func(b *policyv1.PodDisruptionBudget) {
			b.Status.DesiredHealthy = 6
		})}, now: granted.Add(5 * time.Second), wantErr: "needs 6 healthy pods and has 5"},
		{name: "the apiserver's own write, not recounted", pdbs: []policyv1.PodDisruptionBudget{budget(func(b *policyv1.PodDisruptionBudget) {
			b.Status.CurrentHealthy = 6 // the granted pod still counted
		})}, now: granted.Add(5 * time.Second), wantErr: "not recounted"},
		{name: "the controller's sync failed", pdbs: []policyv1.PodDisruptionBudget{budget(func(b *policyv1.PodDisruptionBudget) {
			b.Status.Conditions = []metav1.Condition{{Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionFalse, Reason: policyv1.SyncFailedReason, Message: "boom"}}
		})}, now: granted.Add(5 * time.Second), wantErr: "sync failed"},
		{name: "stale", pdbs: []policyv1.PodDisruptionBudget{budget(nil)}, now: granted.Add(grantWindow), wantErr: "old on the apiserver's clock"},
		{name: "far in the future", pdbs: []policyv1.PodDisruptionBudget{budget(nil)}, now: granted.Add(-grantSkew), wantErr: "old on the apiserver's clock"},
		{name: "a little in the future", pdbs: []policyv1.PodDisruptionBudget{budget(nil)}, now: granted.Add(-time.Second)},
		{name: "no grant", pdbs: []policyv1.PodDisruptionBudget{budget(func(b *policyv1.PodDisruptionBudget) {
			b.Status.DisruptedPods = map[string]metav1.Time{"web-2": metav1.NewTime(granted)}
		})}, now: granted, wantErr: "holds no grant"},
		{name: "a predecessor's grant", pdbs: []policyv1.PodDisruptionBudget{budget(func(b *policyv1.PodDisruptionBudget) {
			b.Status.DisruptedPods["web-1"] = metav1.NewTime(created.Add(time.Second))
		})}, now: created.Add(5 * time.Second), wantErr: "after the pod's creation"},
		{name: "two budgets", pdbs: []policyv1.PodDisruptionBudget{budget(nil), budget(func(b *policyv1.PodDisruptionBudget) {
			b.Name, b.Status.DisruptedPods = "all", nil
		})}, now: granted.Add(5 * time.Second), wantErr: "2 budgets guard it"},
		{name: "none", pdbs: nil, now: granted, wantErr: "0 budgets guard it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := grantHolds(tc.pdbs, pod, tc.now)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("grantHolds: %v, want the grant finished", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("grantHolds: %v, want it kept: %q", err, tc.wantErr)
			}
		})
	}
}
