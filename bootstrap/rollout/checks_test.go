package rollout_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/trellis-dev/trellis/bootstrap/rollout"
)

func checkNode(ready bool) *corev1.Node {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "i-0abc"}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-0abc"},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.7"}},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}}}
}

func TestHTTPCheck(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthy/i-0abc/10.0.0.7" {
			return
		}
		http.Error(w, "warming up", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	ctx := context.Background()
	if err := rollout.HTTPCheck(srv.URL+"/healthy/{node}/{ip}", time.Second)(ctx, checkNode(true)); err != nil {
		t.Errorf("healthy: %v", err)
	}
	err := rollout.HTTPCheck(srv.URL+"/other/{node}", time.Second)(ctx, checkNode(true))
	if err == nil || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "warming up") {
		t.Errorf("unhealthy: %v, want the status and body", err)
	}
}

func TestCommandCheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if err := rollout.CommandCheck(`test "$TRELLIS_NODE/$TRELLIS_NODE_IP/$TRELLIS_PROVIDER_ID" = "i-0abc/10.0.0.7/aws:///us-east-1a/i-0abc"`, 5*time.Second)(ctx, checkNode(true)); err != nil {
		t.Errorf("passing command: %v", err)
	}
	if err := rollout.CommandCheck("echo not yet; exit 3", 5*time.Second)(ctx, checkNode(true)); err == nil || !strings.Contains(err.Error(), "not yet") {
		t.Errorf("failing command: %v, want its output", err)
	}
	if err := rollout.CommandCheck("sleep 5", 100*time.Millisecond)(ctx, checkNode(true)); err == nil {
		t.Error("a command over its timeout passed")
	}
}

func TestPDBsOn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := checkNode(true)
	pod := func(name string, labels map[string]string, owner string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", Labels: labels}, Spec: corev1.PodSpec{NodeName: node.Name},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		if owner != "" {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: owner, Name: "x"}}
		}
		return p
	}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"},
		Spec:   policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
		Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1}}
	other := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "shop"},
		Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}}
	c := fake.NewClientset(node, pdb, other,
		pod("web-1", map[string]string{"app": "web"}, ""), pod("web-2", map[string]string{"app": "web"}, ""),
		pod("agent", map[string]string{"app": "db"}, "DaemonSet")) // DaemonSet pods are not drained
	kc, err := rollout.NewKubeCluster(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	got, err := kc.PDBsOn(ctx, []string{"i-0abc"})
	if err != nil || len(got) != 1 || got[0] != "shop/web (allows 1)" {
		t.Fatalf("PDBsOn: %v, %v; want [shop/web (allows 1)]", got, err)
	}
}
