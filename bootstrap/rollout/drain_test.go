package rollout_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/trellis-dev/trellis/bootstrap/rollout"
	"github.com/trellis-dev/trellis/internal/testutil/cluster"
)

// TestIntegrationDrainFinishesAGrantedEviction: a drain killed mid-eviction
// leaves the apiserver's grant (the pod in its budget's
// status.disruptedPods) without the delete that should follow it, and the
// real disruption controller then refuses every eviction for 2 minutes. The
// next drain deletes the granted pod at once; a grant too old to trust, or
// one from the pod's first seconds or before (a predecessor of the same
// name), is left to the budget. The request cannot be cut between its two
// writes on purpose: the test writes the grant into the budget's status,
// and the controller takes the disruption from the budget for it.
func TestIntegrationDrainFinishesAGrantedEviction(t *testing.T) {
	cp := cluster.Start(t, cluster.Options{ControllerManager: true})
	c := cp.Client
	ctx := context.Background()
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kc, err := rollout.NewKubeCluster(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		// grant is when the eviction was granted, from the pod's creation
		// and from now.
		fromCreation, ago time.Duration
		finished          bool
	}{
		{name: "fresh", fromCreation: 3 * time.Second, finished: true},
		{name: "stale", ago: 90 * time.Second},
		{name: "successor", fromCreation: -5 * time.Second},
		{name: "near-creation", fromCreation: time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// One pod on the node to drain, one elsewhere; the budget
			// allows one disruption, which the grant takes.
			node, other := "node-"+tc.name, "other-"+tc.name
			for _, n := range []string{node, other} {
				if _, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			app := map[string]string{"app": tc.name}
			var granted *corev1.Pod
			for _, n := range []string{node, other} {
				p := readyPod(t, c, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: tc.name + "-on-" + n, Namespace: "shop", Labels: app},
					Spec: corev1.PodSpec{NodeName: n, TerminationGracePeriodSeconds: new(int64(0)), Containers: []corev1.Container{{Name: "app", Image: "app"}}}})
				if n == node {
					granted = p
				}
			}
			min := intstr.FromInt(1)
			pdb, err := c.PolicyV1().PodDisruptionBudgets("shop").Create(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: tc.name, Namespace: "shop"},
				Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &min, Selector: &metav1.LabelSelector{MatchLabels: app}}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			pdb = waitBudget(t, c, pdb.Name, 1)
			// A grant counts from 2 s after the pod's creation (times are
			// whole seconds, and may come from different apiservers).
			at := time.Now().Add(-tc.ago)
			if tc.fromCreation != 0 {
				at = granted.CreationTimestamp.Add(tc.fromCreation)
			}
			pdb.Status.DisruptedPods = map[string]metav1.Time{granted.Name: {Time: at}}
			if _, err := c.PolicyV1().PodDisruptionBudgets("shop").UpdateStatus(ctx, pdb, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			// The disruption controller takes the granted pod as gone:
			// nothing more may go (the test wrote the grant alone).
			waitBudget(t, c, pdb.Name, 0)
			n, err := c.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			timeout := 20 * time.Second
			if !tc.finished {
				timeout = 3 * time.Second
			}
			err = kc.Drain(ctx, n, rollout.DrainOptions{Timeout: timeout}, nil)
			_, gerr := c.CoreV1().Pods("shop").Get(ctx, granted.Name, metav1.GetOptions{})
			switch {
			case tc.finished && (err != nil || !apierrors.IsNotFound(gerr)):
				t.Fatalf("drain: %v; the granted pod: %v, want it deleted", err, gerr)
			case !tc.finished && (err == nil || !strings.Contains(err.Error(), "evictions refused by PodDisruptionBudget shop/"+tc.name) || gerr != nil):
				t.Fatalf("drain: %v; the pod: %v, want it kept and the budget named", err, gerr)
			}
			t.Logf("drain of a pod granted %s: %v in %s", tc.name, err, time.Since(start).Round(time.Millisecond))
		})
	}
}

// readyPod creates a pod bound to its node and marks it Ready, as its
// kubelet would.
func readyPod(t *testing.T, c kubernetes.Interface, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	p, err := c.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if p, err = c.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return p
}

// waitBudget waits until the disruption controller allows n disruptions.
func waitBudget(t *testing.T, c kubernetes.Interface, name string, n int32) *policyv1.PodDisruptionBudget {
	t.Helper()
	var pdb *policyv1.PodDisruptionBudget
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		pdb, err = c.PolicyV1().PodDisruptionBudgets("shop").Get(ctx, name, metav1.GetOptions{})
		return err == nil && pdb.Status.ObservedGeneration == pdb.Generation && pdb.Status.DisruptionsAllowed == n, nil
	})
	if err != nil {
		t.Fatalf("budget %s never allowed %d disruptions: %+v", name, n, pdb.Status)
	}
	return pdb
}
