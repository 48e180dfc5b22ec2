package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/fleet"
	"github.com/trellis-dev/trellis/fleet/karmada"
	"github.com/trellis-dev/trellis/gateway"
	"github.com/trellis-dev/trellis/gateway/api"
	gwclient "github.com/trellis-dev/trellis/gateway/client"
)

// placement is a fleet Placement document for the workload kind/name in
// team-a, with extra spec lines.
func placement(name, kind, workload, extra string) string {
	return placementIn("team-a", name, kind, workload, extra)
}

// placementIn is placement in namespace ns.
func placementIn(ns, name, kind, workload, extra string) string {
	return `---
apiVersion: fleet.trellis.dev/v1alpha1
kind: Placement
metadata: {name: ` + name + `, namespace: ` + ns + `}
spec:
  workloads: [{kind: ` + kind + `, name: ` + workload + `}]
  spread: duplicated
` + extra
}

// TestIntegrationFleetSubmit: with a fleet (a real Karmada control plane
// with Trellis's bundle), a submission with a placement is authorized and
// checked as any other, then written to the fleet's apiserver with the
// placement's PropagationPolicy, and nothing to the gateway's cluster; a
// bad placement or an unauthorized caller writes nothing anywhere.
func TestIntegrationFleetSubmit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	kcp, err := karmada.Start(ctx, t.TempDir(), karmada.Options{Failover: true}) // the bundle's taint policy needs it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kcp.Stop)
	if _, err := fleet.Install(ctx, kcp.Config); err != nil {
		t.Fatalf("install the fleet bundle: %v", err)
	}
	fc, err := kubernetes.NewForConfig(kcp.Config)
	must(t, err)
	_, err = fc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}, metav1.CreateOptions{})
	must(t, err)
	fdyn, err := dynamic.NewForConfig(kcp.Config)
	must(t, err)
	inFleet := func(gvrResource, name string) bool {
		t.Helper()
		gvr := v1alpha1.GroupVersion.WithResource(gvrResource)
		if gvrResource == "propagationpolicies" {
			gvr = gateway.PropagationPolicyGVR
		}
		_, err := fdyn.Resource(gvr).Namespace("team-a").Get(ctx, name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}

	e := startEnv(t, gateway.Config{Fleet: kcp.Config})
	ci := e.pod("team-a", "ci")

	t.Run("Placed", func(t *testing.T) {
		body := append(service("placed"), placement("web", "TrellisService", "placed", "")...)
		res, err := ci.Submit(ctx, body, gwclient.SubmitOptions{})
		must(t, err)
		if res.Placement != "team-a/trellis-web" || res.Action != "created" {
			t.Errorf("placement %q, action %q", res.Placement, res.Action)
		}
		if !inFleet("trellisservices", "placed") || !inFleet("propagationpolicies", "trellis-web") {
			t.Errorf("the workload or its policy is not in the fleet")
		}
		e.nothingWritten("trellisservices", "team-a", "placed")
	})

	t.Run("DryRun", func(t *testing.T) {
		body := append(service("tried"), placement("tried", "TrellisService", "tried", "")...)
		res, err := ci.Submit(ctx, body, gwclient.SubmitOptions{DryRun: true})
		must(t, err)
		if !res.DryRun || res.Diff == "" {
			t.Errorf("dry run: %+v", res)
		}
		if inFleet("trellisservices", "tried") || inFleet("propagationpolicies", "trellis-tried") {
			t.Errorf("a dry run wrote to the fleet")
		}
	})

	t.Run("Refused", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			client *gwclient.Client
			body   []byte
			code   int
			want   []string
		}{
			{"OtherWorkload", ci, append(service("greedy"), placement("greedy", "TrellisService", "someone-else", "")...),
				http.StatusBadRequest, []string{"Placement spec.workloads[0]", `"someone-else"`}},
			{"BadSpread", ci, append(service("spread"), placement("spread", "TrellisService", "spread", "  minClusters: -1\n")...),
				http.StatusBadRequest, []string{"placement:", "minClusters"}},
			{"OtherNamespace", ci, append(service("moved"), []byte(`---
apiVersion: fleet.trellis.dev/v1alpha1
kind: Placement
metadata: {name: moved, namespace: team-b}
spec:
  workloads: [{kind: TrellisService, name: moved}]
`)...), http.StatusBadRequest, []string{"Placement metadata.namespace"}},
			{"Unpinned", ci, append(service("unpinned", image(registry+"/team-a/web:latest")), placement("unpinned", "TrellisService", "unpinned", "")...),
				http.StatusUnprocessableEntity, []string{"provenance"}},
			{"NotAllowed", e.pod("team-b", "viewer"), append(service("sneaky"), placement("sneaky", "TrellisService", "sneaky", "")...),
				http.StatusForbidden, nil},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, err := tc.client.Submit(ctx, tc.body, gwclient.SubmitOptions{})
				_ = refused(t, err, tc.code, tc.want...)
			})
		}
		for _, name := range []string{"greedy", "spread", "moved", "unpinned", "sneaky"} {
			if inFleet("trellisservices", name) || inFleet("propagationpolicies", "trellis-"+name) {
				t.Errorf("refused %s was written to the fleet", name)
			}
			e.nothingWritten("trellisservices", "team-a", name)
		}
	})
	t.Run("Idempotent", func(t *testing.T) {
		body := append(service("retried"), placement("retried", "TrellisService", "retried", "")...)
		first, err := ci.Submit(ctx, body, gwclient.SubmitOptions{ID: "deploy-41"})
		must(t, err)
		again, err := ci.Submit(ctx, body, gwclient.SubmitOptions{ID: "deploy-41"})
		must(t, err)
		if first.Action != "created" || !again.Replayed || again.ResourceVersion != first.ResourceVersion {
			t.Errorf("retry: first %+v, again %+v; want the first result replayed", first, again)
		}
		other := append(service("retried", cpu("200m")), placement("retried", "TrellisService", "retried", "")...)
		_, err = ci.Submit(ctx, other, gwclient.SubmitOptions{ID: "deploy-41"})
		_ = refused(t, err, http.StatusConflict, `submission id "deploy-41" was used for a different body`)
		// Another replica has not seen the id: it finds it in the fleet's
		// copy of the workload.
		replica := e.pod("team-a", "ci")
		replica.Server = e.startGateway(gateway.Config{Fleet: kcp.Config})
		third, err := replica.Submit(ctx, body, gwclient.SubmitOptions{ID: "deploy-41"})
		must(t, err)
		if !third.Replayed || third.Action != "unchanged" {
			t.Errorf("retry through another replica: %+v; want replayed, unchanged", third)
		}
		_, err = replica.Submit(ctx, other, gwclient.SubmitOptions{ID: "deploy-41"})
		_ = refused(t, err, http.StatusConflict, "different body")
		// Karmada's controllers write the fleet's copy too (labels, status),
		// so its resource version moves; the conflicting body's CPU must
		// not be there.
		u, err := fdyn.Resource(v1alpha1.GroupVersion.WithResource("trellisservices")).Namespace("team-a").Get(ctx, "retried", metav1.GetOptions{})
		must(t, err)
		cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "containers")
		if len(cs) != 1 || fmt.Sprint(cs[0].(map[string]any)["resources"]) != "map[limits:map[cpu:100m memory:64Mi] requests:map[cpu:100m memory:64Mi]]" {
			t.Errorf("the fleet's copy changed: containers %v; a conflicting submission wrote", cs)
		}
	})

	t.Run("NamespaceNotInFleet", func(t *testing.T) {
		// team-a's CI may submit in "other" on this cluster; the fleet has
		// no such namespace, and the gateway makes none.
		_, err := e.cp.Client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "edit-trellis"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"workloads.trellis.dev"}, Resources: []string{"trellisservices"}, Verbs: []string{"get", "create", "update", "patch"}}},
		}, metav1.CreateOptions{})
		must(t, err)
		_, err = e.cp.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "team-a-ci-everywhere"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "team-a", Name: "ci"}},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "edit-trellis"},
		}, metav1.CreateOptions{})
		must(t, err)
		defer func() {
			must(t, e.cp.Client.RbacV1().ClusterRoleBindings().Delete(ctx, "team-a-ci-everywhere", metav1.DeleteOptions{}))
		}()
		body := append(service("newcomer", namespace("other")), placementIn("other", "newcomer", "TrellisService", "newcomer", "")...)
		waitFor(t, "the ClusterRoleBinding in effect", func() bool {
			_, err = ci.Submit(ctx, body, gwclient.SubmitOptions{})
			var ge *gwclient.Error
			return errors.As(err, &ge) && ge.Code != http.StatusForbidden
		})
		_ = refused(t, err, http.StatusUnprocessableEntity, "metadata.namespace", "namespace other is not in the fleet")
		if _, err := fc.CoreV1().Namespaces().Get(ctx, "other", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("a refused submission made namespace other in the fleet: %v", err)
		}
		e.nothingWritten("trellisservices", "other", "newcomer")
		// On the cluster, a namespace that does not exist is a 422 naming
		// the field too (NamespaceLifecycle), not a 503.
		_, err = ci.Submit(ctx, service("lost", namespace("nowhere")), gwclient.SubmitOptions{})
		_ = refused(t, err, http.StatusUnprocessableEntity, "metadata.namespace", `namespaces "nowhere" not found`)
	})

	t.Run("Quota", func(t *testing.T) {
		// Two members as Karmada lists them (nothing answers at their
		// endpoints: the check reads the list only).
		for _, m := range []string{"east", "west"} {
			c := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
				"metadata": map[string]any{"name": m, "labels": map[string]any{"region": m}},
				"spec":     map[string]any{"apiEndpoint": "https://127.0.0.1:1", "syncMode": "Push"},
			}}
			_, err := fdyn.Resource(gateway.ClusterGVR).Create(ctx, c, metav1.CreateOptions{})
			must(t, err)
		}
		// Trellis's FederatedResourceQuota: static assignments per member.
		frq := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "policy.karmada.io/v1alpha1", "kind": "FederatedResourceQuota",
			"metadata": map[string]any{"name": "trellis-quota", "namespace": "team-a"},
			"spec": map[string]any{
				"overall": map[string]any{"requests.cpu": "1050m"},
				"staticAssignments": []any{
					map[string]any{"clusterName": "east", "hard": map[string]any{"requests.cpu": "1"}},
					map[string]any{"clusterName": "west", "hard": map[string]any{"requests.cpu": "50m"}},
				},
			},
		}}
		_, err := fdyn.Resource(gateway.FederatedResourceQuotaGVR).Namespace("team-a").Create(ctx, frq, metav1.CreateOptions{})
		must(t, err)
		defer func() {
			must(t, fdyn.Resource(gateway.FederatedResourceQuotaGVR).Namespace("team-a").Delete(ctx, "trellis-quota", metav1.DeleteOptions{}))
		}()
		spread := func(name string, n int, spread, extra string) []byte {
			return append(service(name, replicas(n)), []byte(strings.Replace(placement(name, "TrellisService", name, extra), "spread: duplicated", "spread: "+spread, 1))...)
		}
		both := "  clusters: [east, west]\n"
		for _, tc := range []struct {
			name, body string
			want       string // "" when it fits
		}{
			// Duplicated: each member runs the whole workload; west's 50m
			// is too little for one 100m replica and its sidecars.
			{"duplicated", string(spread("dup", 1, "duplicated", both)), "more than team-a/trellis-quota in member west allows"},
			{"duplicated by labels", string(spread("dup-west", 1, "duplicated", "  clusterLabels: {region: west}\n")), "in member west"},
			{"east only", string(spread("east-only", 1, "duplicated", "  clusters: [east]\n")), ""},
			// Weighted 1:1: west's share of 8 is 4 replicas.
			{"weighted", string(spread("split", 8, "weighted", both+"  weights: {east: 1, west: 1}\n")), "more than team-a/trellis-quota in member west allows"},
			// Capacity: the two assignments together bound it.
			{"capacity fits", string(spread("cap", 8, "capacity", both)), ""},
			{"capacity over", string(spread("cap", 10, "capacity", both)), "more than team-a/trellis-quota across members east, west allows"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				res, err := ci.Submit(ctx, []byte(tc.body), gwclient.SubmitOptions{DryRun: true})
				if tc.want == "" {
					must(t, err)
					if !hasCheck(res.Checks, "quota", "passed") {
						t.Errorf("checks %+v, want quota passed", res.Checks)
					}
					return
				}
				t.Logf("%s: %v", tc.name, refused(t, err, http.StatusUnprocessableEntity, "quota", tc.want))
			})
		}
		// A refusal writes nothing.
		_, err = ci.Submit(ctx, spread("dup", 1, "duplicated", both), gwclient.SubmitOptions{})
		_ = refused(t, err, http.StatusUnprocessableEntity, "quota")
		if inFleet("trellisservices", "dup") || inFleet("propagationpolicies", "trellis-dup") {
			t.Errorf("a refused submission was written to the fleet")
		}
	})
}

// hasCheck says whether checks has name with result.
func hasCheck(checks []api.CheckResult, name, result string) bool {
	for _, c := range checks {
		if c.Name == name && c.Result == result {
			return true
		}
	}
	return false
}
