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

	t.Run("NewNamespace", func(t *testing.T) {
		// team-a's CI may submit in "other" on this cluster; the fleet has
		// no such namespace yet.
		_, err := e.cp.Client.RbacV1().RoleBindings("other").Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "team-a-ci"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "team-a", Name: "ci"}},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "edit-trellis"},
		}, metav1.CreateOptions{})
		must(t, err)
		_, err = e.cp.Client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "edit-trellis"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"workloads.trellis.dev"}, Resources: []string{"trellisservices"}, Verbs: []string{"get", "create", "update", "patch"}}},
		}, metav1.CreateOptions{})
		must(t, err)
		body := append(service("newcomer", namespace("other")), placementIn("other", "newcomer", "TrellisService", "newcomer", "")...)
		var dry *api.SubmitResult
		waitFor(t, "the RoleBinding in effect", func() bool {
			dry, err = ci.Submit(ctx, body, gwclient.SubmitOptions{DryRun: true})
			return err == nil
		})
		if !strings.Contains(strings.Join(dry.Warnings, "\n"), "namespace other is not in the fleet yet") {
			t.Errorf("dry run's warnings %q do not say the namespace will be made", dry.Warnings)
		}
		if _, err := fc.CoreV1().Namespaces().Get(ctx, "other", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("a dry run made the namespace in the fleet: %v", err)
		}
		res, err := ci.Submit(ctx, body, gwclient.SubmitOptions{})
		must(t, err)
		if res.Action != "created" || res.Placement != "other/trellis-newcomer" {
			t.Errorf("submission: %+v", res)
		}
		if _, err := fc.CoreV1().Namespaces().Get(ctx, "other", metav1.GetOptions{}); err != nil {
			t.Errorf("namespace other in the fleet: %v", err)
		}
		if _, err := fdyn.Resource(gateway.PropagationPolicyGVR).Namespace("other").Get(ctx, "trellis-newcomer", metav1.GetOptions{}); err != nil {
			t.Errorf("the placement's policy in the fleet: %v", err)
		}
		// A namespace neither has (the caller may submit anywhere): a
		// refusal that names the field, and nothing made in the fleet.
		_, err = e.cp.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "team-a-ci-everywhere"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "team-a", Name: "ci"}},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "edit-trellis"},
		}, metav1.CreateOptions{})
		must(t, err)
		defer func() {
			must(t, e.cp.Client.RbacV1().ClusterRoleBindings().Delete(ctx, "team-a-ci-everywhere", metav1.DeleteOptions{}))
		}()
		lost := append(service("lost", namespace("nowhere")), placementIn("nowhere", "lost", "TrellisService", "lost", "")...)
		waitFor(t, "the ClusterRoleBinding in effect", func() bool {
			_, err = ci.Submit(ctx, lost, gwclient.SubmitOptions{})
			var ge *gwclient.Error
			return errors.As(err, &ge) && ge.Code != http.StatusForbidden
		})
		_ = refused(t, err, http.StatusUnprocessableEntity, "metadata.namespace", `namespaces "nowhere" not found`)
		if _, err := fc.CoreV1().Namespaces().Get(ctx, "nowhere", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("a refused submission made namespace nowhere in the fleet: %v", err)
		}
	})

	t.Run("Quota", func(t *testing.T) {
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
		both := "  clusters: [east, west]\n"
		// Duplicated: each member runs the whole workload; west's 50m is
		// too little for one 100m replica and its sidecars.
		dup := append(service("dup"), placement("dup", "TrellisService", "dup", both)...)
		_, err = ci.Submit(ctx, dup, gwclient.SubmitOptions{})
		ge := refused(t, err, http.StatusUnprocessableEntity, "quota", "more than team-a/trellis-quota in member west allows")
		t.Logf("duplicated: %v", ge)
		if strings.Contains(ge.Error(), "member east") {
			t.Errorf("east fits the workload but is named: %v", ge)
		}
		// Only east: fits.
		east := append(service("east-only"), placement("east-only", "TrellisService", "east-only", "  clusters: [east]\n")...)
		res, err := ci.Submit(ctx, east, gwclient.SubmitOptions{DryRun: true})
		must(t, err)
		if !hasCheck(res.Checks, "quota", "passed") {
			t.Errorf("east only: checks %+v, want quota passed", res.Checks)
		}
		// Divided (weighted): the two assignments together bound it.
		weighted := "  clusters: [east, west]\n  weights: {east: 1, west: 1}\n"
		fits := append(service("split", replicas(8)), []byte(strings.Replace(placement("split", "TrellisService", "split", weighted), "spread: duplicated", "spread: weighted", 1))...)
		_, err = ci.Submit(ctx, fits, gwclient.SubmitOptions{DryRun: true})
		must(t, err)
		over := append(service("split", replicas(10)), []byte(strings.Replace(placement("split", "TrellisService", "split", weighted), "spread: duplicated", "spread: weighted", 1))...)
		_, err = ci.Submit(ctx, over, gwclient.SubmitOptions{})
		t.Logf("divided: %v", refused(t, err, http.StatusUnprocessableEntity, "more than team-a/trellis-quota across members east, west allows"))
		for _, name := range []string{"dup", "split"} {
			if inFleet("trellisservices", name) {
				t.Errorf("refused %s was written to the fleet", name)
			}
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
