package issuer

import (
	"bytes"
	"context"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/yaml"

	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/internal/certsapi"
	"github.com/trellis-dev/trellis/internal/pki"
	"github.com/trellis-dev/trellis/internal/testutil/cluster"
)

// TestIntegrationRecordsExpiryOnPod signs on a real apiserver as the
// issuer's service account under the ClusterRole of its manifest
// (config/manifests/trellis-cert-issuer): the pod gets the leaf's validity
// as annotations, and nothing else of the certificate. An issuer that may
// not patch pods still issues, and counts the failure.
func TestIntegrationRecordsExpiryOnPod(t *testing.T) {
	cp := cluster.Start(t, cluster.Options{})
	ctx := context.Background()
	admin := cp.Client
	_, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}, metav1.CreateOptions{})
	must(t, err)
	pod, err := admin.CoreV1().Pods("shop").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1"},
		Spec: corev1.PodSpec{NodeName: "node-a", ServiceAccountName: "web", Containers: []corev1.Container{{Name: "app", Image: "app"}}}}, metav1.CreateOptions{})
	must(t, err)

	role := manifestClusterRole(t)
	bind(t, admin, role, "trellis-cert-issuer")
	readOnly := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}}}
	bind(t, admin, readOnly, "pod-reader")

	fc := clocktesting.NewFakeClock(time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC))
	root, err := pki.NewRoot(td.Name(), 24*time.Hour, fc.Now())
	must(t, err)
	signer, err := pki.NewIntermediate(root, td.Name(), 12*time.Hour, fc.Now())
	must(t, err)
	sign := func(sa string) (*Issuer, string) {
		t.Helper()
		is := New(Config{TrustDomain: td, Client: as(t, cp.Config, sa), Clock: fc, TTL: 90 * time.Minute}, pki.NewState(root, signer))
		resp, err := is.Sign(ctx, "node-a", certsapi.SignRequest{Namespace: "shop", Name: "web-1", UID: string(pod.UID), CSR: newCSR(t)})
		if err != nil {
			t.Fatalf("as %s: issuance failed: %v", sa, err)
		}
		chain, err := pki.ParseCerts(resp.Chain)
		must(t, err)
		return is, chain[0].NotAfter.UTC().Format(time.RFC3339)
	}

	t.Run("the issuer's role may record the expiry", func(t *testing.T) {
		is, notAfter := sign("trellis-cert-issuer")
		got, err := admin.CoreV1().Pods("shop").Get(ctx, "web-1", metav1.GetOptions{})
		must(t, err)
		ann := got.Annotations
		if ann[wellknown.AnnotationIdentityNotAfter] != notAfter || notAfter != "2026-11-23T11:30:00Z" ||
			ann[wellknown.AnnotationIdentityNotBefore] != "2026-11-23T09:55:00Z" {
			t.Fatalf("pod annotations %v; want not-after %s (the leaf's NotAfter) and not-before 2026-11-23T09:55:00Z", ann, notAfter)
		}
		for k, v := range ann {
			if strings.Contains(v, "BEGIN") || len(v) > 40 {
				t.Errorf("annotation %s=%q: only dates belong on the pod", k, v)
			}
		}
		if n := testutil.ToFloat64(is.recordFailed); n != 0 {
			t.Fatalf("%v record failures, want 0", n)
		}
	})
	t.Run("a refused patch does not fail the issuance", func(t *testing.T) {
		fc.Step(time.Hour)
		is, notAfter := sign("pod-reader")
		got, err := admin.CoreV1().Pods("shop").Get(ctx, "web-1", metav1.GetOptions{})
		must(t, err)
		if got.Annotations[wellknown.AnnotationIdentityNotAfter] == notAfter {
			t.Fatalf("a service account without patch on pods annotated the pod")
		}
		if n := testutil.ToFloat64(is.recordFailed); n != 1 {
			t.Fatalf("%v record failures, want 1", n)
		}
	})
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// manifestClusterRole is the ClusterRole of the issuer's addon manifest.
func manifestClusterRole(t *testing.T) *rbacv1.ClusterRole {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "config", "manifests", "trellis-cert-issuer", "issuer.yaml"))
	must(t, err)
	for _, doc := range bytes.Split(data, []byte("\n---\n")) {
		var r rbacv1.ClusterRole
		if err := yaml.Unmarshal(doc, &r); err == nil && r.Kind == "ClusterRole" {
			return &r
		}
	}
	t.Fatal("issuer.yaml: no ClusterRole")
	return nil
}

// bind creates role and binds it to the service account
// trellis-system/sa.
func bind(t *testing.T, admin kubernetes.Interface, role *rbacv1.ClusterRole, sa string) {
	t.Helper()
	ctx := context.Background()
	_, err := admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})
	must(t, err)
	_, err = admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "trellis-system", Name: sa}}}, metav1.CreateOptions{})
	must(t, err)
}

// as is a client acting as the service account trellis-system/sa.
func as(t *testing.T, cfg *rest.Config, sa string) kubernetes.Interface {
	t.Helper()
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:trellis-system:" + sa}
	k, err := kubernetes.NewForConfig(c)
	must(t, err)
	return k
}

func newCSR(t *testing.T) []byte {
	t.Helper()
	key, err := pki.NewKey()
	must(t, err)
	csr, err := pki.NewCSR(key)
	must(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: csr.Raw})
}
