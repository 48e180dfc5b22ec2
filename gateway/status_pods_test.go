package gateway_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/controller/inject"
	"github.com/trellis-dev/trellis/gateway"
	gwclient "github.com/trellis-dev/trellis/gateway/client"
)

// TestIntegrationStatusShowsRegistrationAndIdentity reads a workload's
// pods through the status route: each carries its readiness gate's state
// and message as the registrar wrote them, and its SPIFFE ID; a pod
// without the gate says nothing of registration.
func TestIntegrationStatusShowsRegistrationAndIdentity(t *testing.T) {
	e := startEnv(t, gateway.Config{})
	ctx := context.Background()
	ci := e.pod("team-a", "ci")
	_, err := ci.Submit(ctx, service("reg"), gwclient.SubmitOptions{})
	must(t, err)
	pods := e.cp.Client.CoreV1().Pods("team-a")
	for _, p := range []struct {
		name  string
		gated bool
	}{{"reg-0", true}, {"reg-1", false}} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.name, Labels: inject.SelectorLabels("TrellisService", "reg")},
			Spec: corev1.PodSpec{ServiceAccountName: "web", Containers: []corev1.Container{{Name: "app", Image: "x"}}}}
		if p.gated {
			pod.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: wellknown.ConditionRegistered}}
		}
		created, err := pods.Create(ctx, pod, metav1.CreateOptions{})
		must(t, err)
		if p.gated {
			created.Status.Conditions = []corev1.PodCondition{{Type: wellknown.ConditionRegistered, Status: corev1.ConditionFalse,
				Reason: "RegistrarGone", Message: "/discovery/reg/member_0000000001 has been gone for 21s", LastTransitionTime: metav1.Now()}}
			_, err = pods.UpdateStatus(ctx, created, metav1.UpdateOptions{})
			must(t, err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := ci.Status(ctx, "team-a", "trellisservices", "reg")
		must(t, err)
		if len(st.Pods) == 2 && st.Pods[0].Registered == "False" {
			got, plain := st.Pods[0], st.Pods[1]
			if got.RegisteredMessage != "/discovery/reg/member_0000000001 has been gone for 21s" || got.Identity != "spiffe://trellis.local/ns/team-a/sa/web" {
				t.Errorf("gated pod: %+v; want the registrar's message and spiffe://trellis.local/ns/team-a/sa/web", got)
			}
			if plain.Registered != "" || plain.RegisteredMessage != "" {
				t.Errorf("pod without the gate: %+v; want no registration state", plain)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("status never showed the two pods with the gate's state: %+v", st.Pods)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
