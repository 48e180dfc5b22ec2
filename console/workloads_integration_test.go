package console_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/console"
	"github.com/trellis-dev/trellis/controller/inject"
	"github.com/trellis-dev/trellis/gateway"
	"github.com/trellis-dev/trellis/internal/testutil/cluster"
)

// TestIntegrationWorkloadsEventsAndExpiry runs the workloads list and the
// detail view through the real gateway on a real apiserver's RBAC: alice
// may list team-a's workloads, pods and events, erin only the workloads.
// Alice sees web's last event and its pod's identity expiry; erin sees
// the list with the refusal in place of events, and no detail.
func TestIntegrationWorkloadsEventsAndExpiry(t *testing.T) {
	cp := cluster.Start(t, cluster.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if out, err := cp.Kubectl(ctx, "apply", "--server-side", "-f", "../config/crd/"); err != nil {
		t.Fatalf("install CRDs: %v\n%s", err, out)
	}
	if out, err := cp.Kubectl(ctx, "wait", "--for=condition=Established", "--timeout=60s", "crd", "--all"); err != nil {
		t.Fatalf("CRDs not established: %v\n%s", err, out)
	}
	kc := cp.Client
	for _, ns := range []string{"trellis-system", "team-a"} {
		_, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		must(t, err)
	}
	workloads := rbacv1.PolicyRule{APIGroups: []string{"workloads.trellis.dev"}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}}
	for user, rules := range map[string][]rbacv1.PolicyRule{
		"alice": {workloads, {APIGroups: []string{""}, Resources: []string{"pods", "events"}, Verbs: []string{"list"}}},
		"erin":  {workloads},
	} {
		_, err := kc.RbacV1().Roles("team-a").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: rules}, metav1.CreateOptions{})
		must(t, err)
		_, err = kc.RbacV1().RoleBindings("team-a").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: user},
			Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "oidc:" + user + "@example.com"}}}, metav1.CreateOptions{})
		must(t, err)
	}
	dyn, err := dynamic.NewForConfig(cp.Config)
	must(t, err)
	e := &browserEnv{cp: cp, dyn: dyn}
	e.create(t, service("web", registry+"/web"+digest))
	e.event(t, "web", "Pulled", "Successfully pulled image "+registry+"/web")
	_, err = kc.CoreV1().Pods("team-a").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Labels: inject.SelectorLabels("TrellisService", "web"),
		Annotations: map[string]string{wellknown.AnnotationIdentityNotBefore: now.Add(-20 * time.Minute).Format(time.RFC3339),
			wellknown.AnnotationIdentityNotAfter: now.Add(45 * time.Minute).Format(time.RFC3339)}},
		Spec: corev1.PodSpec{ServiceAccountName: "web", Containers: []corev1.Container{{Name: "app", Image: "x"}}}}, metav1.CreateOptions{})
	must(t, err)

	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	certFile, keyFile := selfSigned(t, dir)
	gw, err := gateway.New(gateway.Config{Rest: cp.Config, Listener: ln, TLSCertFile: certFile, TLSKeyFile: keyFile, ClientCAFile: certFile, Audit: io.Discard})
	must(t, err)
	done := make(chan error, 1)
	go func() { done <- gw.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("gateway: %v", err)
		}
	})
	c, err := console.New(console.Config{API: gw.Handler(), SessionKey: []byte(strings.Repeat("k", 32)), Clock: fixedClock{now}})
	must(t, err)
	alice, _ := signIn(t, c, "oidc:alice@example.com")
	erin, _ := signIn(t, c, "oidc:erin@example.com")

	var r reply
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		r = do(c, http.MethodGet, "/workloads?namespace=team-a", alice, nil)
		if r.StatusCode == http.StatusOK && strings.Contains(r.Body, `<span class="event-Normal">Pulled</span>: <span title="Successfully pulled image registry.example.com/web">`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("alice never saw web's last event: %d\n%s", r.StatusCode, r.Body)
		}
	}
	r = do(c, http.MethodGet, "/workloads/TrellisService/web?namespace=team-a", alice, nil)
	if r.StatusCode != http.StatusOK || !strings.Contains(r.Body, `<span class="cert-ok">expires in 45m</span>`) {
		t.Errorf("alice's detail: %d, want web-0's identity expiring in 45m:\n%s", r.StatusCode, r.Body)
	}

	r = do(c, http.MethodGet, "/workloads?namespace=team-a", erin, nil)
	if r.StatusCode != http.StatusOK || !strings.Contains(r.Body, `id="w-TrellisService-web"`) || strings.Contains(r.Body, "Pulled") ||
		!strings.Contains(r.Body, "<td>not allowed</td>") || !strings.Contains(r.Body, "oidc:erin@example.com may not list events in namespace team-a") {
		t.Errorf("erin's list: %d, want web, the refusal to list events and no event:\n%s", r.StatusCode, r.Body)
	}
	r = do(c, http.MethodGet, "/workloads/TrellisService/web?namespace=team-a", erin, nil)
	if r.StatusCode != http.StatusForbidden || strings.Contains(r.Body, "expires in") {
		t.Errorf("erin's detail: %d, want 403 and no pod:\n%s", r.StatusCode, r.Body)
	}
}
