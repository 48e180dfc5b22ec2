package karmada_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/trellis-dev/trellis/fleet/karmada"
)

var ppGVR = schema.GroupVersionResource{Group: "policy.karmada.io", Version: "v1alpha1", Resource: "propagationpolicies"}

// The control plane comes up from the cached binaries and manifests and
// serves the fleet's API: clusters through the aggregated apiserver, and
// policies through Karmada's webhooks (the mutating one labels each policy
// with the permanent id the detector matches on).
func TestIntegrationControlPlane(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	cp, err := karmada.Start(ctx, t.TempDir(), karmada.Options{Log: slog.New(slog.NewTextHandler(os.Stderr, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(cp.Logs(30))
		}
		cp.Stop()
	})
	t.Logf("karmada control plane up in %s", time.Since(start).Round(time.Millisecond))
	// Each process runs with the plane's GOGC and its own memory limit,
	// as the addon's containers do.
	pids := cp.PIDs()
	for name := range karmada.GoMemLimits {
		if _, ok := pids[name]; !ok {
			t.Errorf("no %s among the plane's processes %v", name, pids)
		}
	}
	for name, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil {
			t.Fatal(err)
		}
		env := strings.Split(string(b), "\x00")
		if !slices.Contains(env, fmt.Sprintf("GOGC=%d", karmada.DefaultGOGC)) {
			t.Errorf("%s runs without GOGC=%d", name, karmada.DefaultGOGC)
		}
		limit, limited := karmada.GoMemLimits[name]
		if got := slices.Contains(env, "GOMEMLIMIT="+limit); limited && !got {
			t.Errorf("%s runs without GOMEMLIMIT=%s", name, limit)
		}
	}
	if _, err := cp.Dynamic.Resource(karmada.ClusterGVR).List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("clusters: %v", err)
	}
	pp := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
		"metadata": map[string]any{"name": "web", "namespace": "default"},
		"spec": map[string]any{
			"resourceSelectors": []any{map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}},
			"placement":         map[string]any{"clusterAffinity": map[string]any{"clusterNames": []any{"m1"}}},
		},
	}}
	got, err := cp.Dynamic.Resource(ppGVR).Namespace("default").Create(ctx, pp, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create PropagationPolicy: %v", err)
	}
	if got.GetLabels()["propagationpolicy.karmada.io/permanent-id"] == "" {
		t.Fatalf("the mutating webhook did not label the policy: labels %v", got.GetLabels())
	}
	// The validating webhook refuses a policy without selectors.
	bad := pp.DeepCopy()
	bad.SetName("bad")
	_ = unstructured.SetNestedSlice(bad.Object, []any{}, "spec", "resourceSelectors")
	if _, err := cp.Dynamic.Resource(ppGVR).Namespace("default").Create(ctx, bad, metav1.CreateOptions{}); err == nil {
		t.Fatal("a policy without resource selectors was accepted")
	}
	// Installed without the ResourceBinding validation (see skippedWebhooks).
	vwcs, err := cp.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hooks := 0
	for _, c := range vwcs.Items {
		for _, w := range c.Webhooks {
			hooks++
			if w.Name == "resourcebinding.karmada.io" {
				t.Errorf("%s has the ResourceBinding validation", c.Name)
			}
		}
	}
	if hooks == 0 {
		t.Error("no validating webhooks installed")
	}
	for _, c := range karmada.Binaries {
		if exited, log := cp.Exited(c); exited {
			t.Fatalf("%s exited:\n%s", c, log)
		}
	}
}
