package fleet_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/trellis-dev/trellis/fleet"
	"github.com/trellis-dev/trellis/internal/testutil/golden"
)

func TestInterpreterCustomizations(t *testing.T) {
	rics, err := fleet.InterpreterCustomizations()
	if err != nil {
		t.Fatal(err)
	}
	if len(rics) != len(fleet.Kinds()) {
		t.Fatalf("%d customizations for %d kinds", len(rics), len(fleet.Kinds()))
	}
	golden.AssertObjects(t, "testdata/interpreters.yaml", objects(rics))
}

func TestBundle(t *testing.T) {
	objs, err := fleet.Bundle()
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GetKind()]++
	}
	if kinds["CustomResourceDefinition"] != 6 || kinds["ResourceInterpreterCustomization"] != 6 || kinds["ClusterTaintPolicy"] != 1 {
		t.Fatalf("bundle kinds %v", kinds)
	}
}

func TestPlacementsRender(t *testing.T) {
	ps, err := fleet.LoadPlacements("../config/samples/fleet/placements.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var pps []*unstructured.Unstructured
	for _, p := range ps {
		pps = append(pps, p.PropagationPolicy())
	}
	golden.AssertObjects(t, "testdata/placements.propagationpolicies.yaml", objects(pps))
}

func objects(us []*unstructured.Unstructured) []map[string]any {
	out := make([]map[string]any, len(us))
	for i, u := range us {
		out[i] = u.Object
	}
	return out
}

func TestPlacementErrors(t *testing.T) {
	const head = "apiVersion: fleet.trellis.dev/v1alpha1\nkind: Placement\nmetadata: {name: web, namespace: shop}\n"
	for _, tc := range []struct {
		name, doc string
		want      []string
	}{
		{"unknown field", head + "spec:\n  spraed: weighted\n", []string{"p.yaml", "line 5", "spraed"}},
		{"unknown field in the second document", head + "spec: {}\n---\n" + head + "spec:\n  clusterz: [a]\n", []string{"line 10", "clusterz"}},
		{"bad kind", head + "spec:\n  workloads: [{kind: Deployment}]\n", []string{"p.yaml:5", "spec.workloads[0].kind", `"Deployment" is not a Trellis workload kind`}},
		{"weights without weighted", head + "spec:\n  weights: {a: 1}\n", []string{"spec.weights", "spread weighted only"}},
		{"weighted without weights", head + "spec:\n  spread: weighted\n", []string{"spec.weights", "needs a weight"}},
		{"weight outside clusters", head + "spec:\n  spread: weighted\n  clusters: [a]\n  weights: {a: 1, b: 2}\n", []string{"p.yaml:7", "spec.weights.b", "not among spec.clusters"}},
		{"zero weight", head + "spec:\n  spread: weighted\n  weights: {a: 0}\n", []string{"spec.weights.a", "positive"}},
		{"unknown spread", head + "spec:\n  spread: everywhere\n", []string{"spec.spread", "everywhere"}},
		{"min above clusters", head + "spec:\n  clusters: [a]\n  minClusters: 2\n", []string{"spec.minClusters"}},
		{"max below min", head + "spec:\n  minClusters: 3\n  maxClusters: 2\n", []string{"spec.maxClusters"}},
		{"failover", head + "spec:\n  failoverAfter: 1.5s\n", []string{"p.yaml:5", "spec.failoverAfter", "whole number of seconds"}},
		{"bad namespace", "apiVersion: fleet.trellis.dev/v1alpha1\nkind: Placement\nmetadata: {name: web, namespace: Shop}\nspec: {}\n", []string{"metadata.namespace"}},
		{"wrong kind", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web, namespace: shop}\nspec: {}\n", []string{"apiVersion/kind"}},
		{"twice", head + "spec: {}\n---\n" + head + "spec: {}\n", []string{"p.yaml:6", "already defined at line 1"}},
		{"empty", "# nothing\n", []string{"no placements"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := fleet.DecodePlacements("p.yaml", []byte(tc.doc))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}
