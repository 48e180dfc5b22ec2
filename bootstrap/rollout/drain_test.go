package rollout_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"

	"github.com/trellis-dev/trellis/bootstrap/rollout"
	"github.com/trellis-dev/trellis/internal/testutil/cluster"
)

// TestIntegrationDrainFinishesAGrantedEviction: a drain killed mid-eviction
// leaves the apiserver's grant (the pod in its budget's
// status.disruptedPods) without the delete that should follow it, and the
// real disruption controller then refuses every eviction for 2 minutes. The
// next drain deletes the granted pod at once when the budget as it stands
// now lets it go; a grant too old on the apiserver's clock (whatever the
// drain host's clock says), one from the pod's first seconds or before (a
// predecessor of the same name), one whose budget another pod's failure or
// a raised minAvailable has since broken, or one on a pod under two
// budgets is left alone. The request cannot be cut between its two writes
// on purpose: the test writes the grant into the budget's status, and the
// controller takes the disruption from the budget for it.
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
	// Pods have run for 10 minutes (their creation moved back in etcd),
	// as a drained node's pods have, unless young.
	const (
		ago   = -11 * time.Second // the ordinary grant: seconds ago, more than the 10 s allowed ahead
		stale = -90 * time.Second // past the window, short of the controller's 2 min
	)
	for _, tc := range []struct {
		name string
		// grant: when the eviction was granted, from now (from the pod's
		// creation for a young pod).
		grant time.Duration
		young bool
		// hostSkew: the drain host's clock minus the apiserver's.
		hostSkew time.Duration
		// after runs after the controller took the grant: the budget
		// breaks in the meantime.
		after func(t *testing.T, c kubernetes.Interface, q *corev1.Pod, pdb string)
		// twoBudgets: a second budget guards the granted pod.
		twoBudgets bool
		finished   bool
		// why is what keeps it: the drain's error says it.
		why string
	}{
		{name: "past", grant: ago, finished: true},
		{name: "ahead", grant: 3 * time.Second, finished: true}, // an HA apiserver's clock ahead
		{name: "stale", grant: stale, why: "old on the apiserver's clock"},
		{name: "successor", young: true, grant: -5 * time.Second, why: "after the pod's creation"},
		{name: "near-creation", young: true, grant: time.Second, why: "after the pod's creation"},
		{name: "other-unready", grant: ago, after: makeUnready, why: "needs 1 healthy pods and has 0"},
		{name: "min-raised", grant: ago, after: raiseMin, why: "needs 2 healthy pods and has 1"},
		{name: "host-slow", grant: ago, hostSkew: -90 * time.Second, finished: true},
		{name: "host-fast", grant: ago, hostSkew: 90 * time.Second, finished: true},
		{name: "host-slow-stale", grant: stale, hostSkew: -90 * time.Second, why: "old on the apiserver's clock"},
		{name: "host-fast-stale", grant: stale, hostSkew: 90 * time.Second, why: "old on the apiserver's clock"},
		{name: "two-budgets", grant: ago, twoBudgets: true, why: "more than one PodDisruptionBudget"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// One pod on the node to drain, one elsewhere; the budget
			// allows one disruption, which the grant takes.
			node, other := "node-"+tc.name, "other-"+tc.name
			for _, n := range []string{node, other} {
				if _, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			app := map[string]string{"app": tc.name}
			var granted, q *corev1.Pod
			for _, n := range []string{node, other} {
				labels := map[string]string{"app": tc.name}
				if n == node {
					labels["granted"] = tc.name
				}
				p := readyPod(t, c, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: tc.name + "-on-" + n, Namespace: "shop", Labels: labels},
					Spec: corev1.PodSpec{NodeName: n, TerminationGracePeriodSeconds: new(int64(0)), Containers: []corev1.Container{{Name: "app", Image: "app"}}}})
				if !tc.young {
					p = agePod(t, cp, p, 10*time.Minute)
				}
				if n == node {
					granted = p
				} else {
					q = p
				}
			}
			pdb := createBudget(t, c, tc.name, app, 1)
			pdb = waitBudget(t, c, pdb.Name, func(s policyv1.PodDisruptionBudgetStatus) bool { return s.DisruptionsAllowed == 1 })
			// A young pod's grant is set from its creation: a grant counts
			// from 2 s after it (whole seconds, maybe from different
			// apiservers).
			at := time.Now().Add(tc.grant)
			if tc.young {
				at = granted.CreationTimestamp.Add(tc.grant)
			}
			pdb.Status.DisruptedPods = map[string]metav1.Time{granted.Name: {Time: at}}
			if _, err := c.PolicyV1().PodDisruptionBudgets("shop").UpdateStatus(ctx, pdb, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			// The disruption controller takes the granted pod as gone:
			// nothing more may go (the test wrote the grant alone).
			waitBudget(t, c, pdb.Name, func(s policyv1.PodDisruptionBudgetStatus) bool {
				return s.DisruptionsAllowed == 0 && s.CurrentHealthy == 1 && len(s.DisruptedPods) == 1
			})
			if tc.after != nil {
				tc.after(t, c, q, pdb.Name)
			}
			if tc.twoBudgets {
				createBudget(t, c, tc.name+"-all", map[string]string{"granted": tc.name}, 0)
			}
			n, err := c.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			drain := *kc
			drain.Clock = skewedClock{by: tc.hostSkew}
			start := time.Now()
			timeout := 20 * time.Second
			if !tc.finished {
				timeout = 3 * time.Second
			}
			err = drain.Drain(ctx, n, rollout.DrainOptions{Timeout: timeout}, nil)
			_, gerr := c.CoreV1().Pods("shop").Get(ctx, granted.Name, metav1.GetOptions{})
			switch {
			case tc.finished && (err != nil || !apierrors.IsNotFound(gerr)):
				t.Fatalf("drain: %v; the granted pod: %v, want it deleted", err, gerr)
			case !tc.finished && gerr != nil:
				t.Fatalf("drain: %v; the granted pod: %v, want it kept", err, gerr)
			case !tc.finished && (err == nil || !strings.Contains(err.Error(), tc.why)):
				t.Fatalf("drain: %v, want it refused: %q", err, tc.why)
			}
			t.Logf("drain of a pod granted, %s: %v in %s", tc.name, err, time.Since(start).Round(time.Millisecond))
		})
	}
}

// makeUnready: the other pod fails its readiness probe after the grant.
func makeUnready(t *testing.T, c kubernetes.Interface, q *corev1.Pod, pdb string) {
	t.Helper()
	q.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
	if _, err := c.CoreV1().Pods(q.Namespace).UpdateStatus(context.Background(), q, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitBudget(t, c, pdb, func(s policyv1.PodDisruptionBudgetStatus) bool { return s.CurrentHealthy == 0 })
}

// raiseMin: the budget's minAvailable goes from 1 to 2 after the grant.
func raiseMin(t *testing.T, c kubernetes.Interface, _ *corev1.Pod, pdb string) {
	t.Helper()
	patch := []byte(`{"spec":{"minAvailable":2}}`)
	if _, err := c.PolicyV1().PodDisruptionBudgets("shop").Patch(context.Background(), pdb, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitBudget(t, c, pdb, func(s policyv1.PodDisruptionBudgetStatus) bool { return s.DesiredHealthy == 2 })
}

// skewedClock is the drain host's clock, by off the apiserver's (which
// runs on the same host).
type skewedClock struct {
	clock.RealClock
	by time.Duration
}

func (c skewedClock) Now() time.Time                  { return time.Now().Add(c.by) }
func (c skewedClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

func createBudget(t *testing.T, c kubernetes.Interface, name string, sel map[string]string, min int) *policyv1.PodDisruptionBudget {
	t.Helper()
	m := intstr.FromInt(min)
	pdb, err := c.PolicyV1().PodDisruptionBudgets("shop").Create(context.Background(), &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &m, Selector: &metav1.LabelSelector{MatchLabels: sel}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pdb
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

// waitBudget waits until the disruption controller has observed the
// budget's spec and its status satisfies ok.
func waitBudget(t *testing.T, c kubernetes.Interface, name string, ok func(policyv1.PodDisruptionBudgetStatus) bool) *policyv1.PodDisruptionBudget {
	t.Helper()
	var pdb *policyv1.PodDisruptionBudget
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		pdb, err = c.PolicyV1().PodDisruptionBudgets("shop").Get(ctx, name, metav1.GetOptions{})
		return err == nil && pdb.Status.ObservedGeneration == pdb.Generation && ok(pdb.Status), nil
	})
	if err != nil {
		t.Fatalf("budget %s never reached the status wanted: %+v", name, pdb.Status)
	}
	return pdb
}

// agePod moves the pod's creation back by d where the apiserver keeps it,
// in etcd (the API sets creationTimestamp itself), and waits until the API
// shows it: a pod that has run for a while, without the wait.
func agePod(t *testing.T, cp *cluster.ControlPlane, p *corev1.Pod, d time.Duration) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	ec, err := clientv3.New(clientv3.Config{Endpoints: []string{cp.EtcdURL}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer ec.Close()
	key := "/registry/pods/" + p.Namespace + "/" + p.Name
	got, err := ec.Get(ctx, key)
	if err != nil || len(got.Kvs) != 1 {
		t.Fatalf("pod %s in etcd: %v (%d keys)", key, err, len(got.Kvs))
	}
	codec := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	obj, _, err := codec.Decode(got.Kvs[0].Value, nil, nil)
	if err != nil {
		t.Fatalf("decoding pod %s from etcd: %v", key, err)
	}
	stored := obj.(*corev1.Pod)
	stored.CreationTimestamp = metav1.NewTime(stored.CreationTimestamp.Add(-d))
	var buf bytes.Buffer
	if err := codec.Encode(stored, &buf); err != nil {
		t.Fatal(err)
	}
	txn, err := ec.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", got.Kvs[0].ModRevision)).Then(clientv3.OpPut(key, buf.String())).Commit()
	if err != nil || !txn.Succeeded {
		t.Fatalf("writing pod %s to etcd: %v (succeeded %v)", key, err, txn != nil && txn.Succeeded)
	}
	var aged *corev1.Pod
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		aged, err = cp.Client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		return err == nil && aged.CreationTimestamp.Equal(&stored.CreationTimestamp), nil
	})
	if err != nil {
		t.Fatalf("the apiserver never showed pod %s created %s", key, stored.CreationTimestamp)
	}
	return aged
}
