package gateway_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/fleet"
	"github.com/trellis-dev/trellis/fleet/karmada"
	"github.com/trellis-dev/trellis/gateway"
	gwclient "github.com/trellis-dev/trellis/gateway/client"
)

// placement is a fleet Placement document for the workload kind/name in
// team-a, with extra spec lines.
func placement(name, kind, workload, extra string) string {
	return `---
apiVersion: fleet.trellis.dev/v1alpha1
kind: Placement
metadata: {name: ` + name + `, namespace: team-a}
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
}
