package addons

import (
	"context"
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/trellis-dev/trellis/internal/testutil/cluster"
	"github.com/trellis-dev/trellis/test/loadtest"
)

// TestIntegrationFlowControl applies the trellis-flowcontrol addon to a
// real apiserver and checks how API Priority and Fairness classifies
// requests, from the apiserver's own X-Kubernetes-PF-* response headers: a
// tenant's service account lands in trellis-tenants, the platform's
// daemons in workload-high, an administrator stays exempt.
func TestIntegrationFlowControl(t *testing.T) {
	cp := cluster.Start(t, cluster.Options{})
	ctx := context.Background()
	a, err := NewApplier(cp.Config, nil)
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := Render(load(t, "prod-us-east-1"))
	if err != nil {
		t.Fatal(err)
	}
	var fc []Rendered
	for _, r := range rendered {
		if r.Addon.Name == "trellis-flowcontrol" {
			fc = append(fc, r)
		}
	}
	if len(fc) != 1 {
		t.Fatalf("prod-us-east-1 renders %d trellis-flowcontrol addons", len(fc))
	}
	if _, err := a.Apply(ctx, fc); err != nil {
		t.Fatal(err)
	}
	levelUID := func(name string) string {
		pl, err := cp.Client.FlowcontrolV1().PriorityLevelConfigurations().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return string(pl.UID)
	}
	for _, ns := range []string{"team-a", Namespace} {
		if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	tenant, err := loadtest.TenantConfig(ctx, cp.Client, cp.Config, "team-a", "deployer")
	if err != nil {
		t.Fatal(err)
	}
	platform, err := loadtest.TenantConfig(ctx, cp.Client, cp.Config, Namespace, "trellis-controller")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		cfg   *rest.Config
		path  string
		level string
	}{
		{"tenant service account", tenant, "/api/v1/namespaces/team-a/pods", "trellis-tenants"},
		{"platform daemon", platform, "/api/v1/namespaces/" + Namespace + "/pods", "workload-high"},
		{"administrator", cp.Config, "/api/v1/namespaces/team-a/pods", "exempt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hc, err := rest.HTTPClientFor(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, tc.cfg.Host+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET %s: %s", tc.path, resp.Status)
			}
			if got, want := resp.Header.Get("X-Kubernetes-PF-PriorityLevel-UID"), levelUID(tc.level); got != want {
				t.Errorf("priority level UID %q, want %s's %q", got, tc.level, want)
			}
		})
	}
}
