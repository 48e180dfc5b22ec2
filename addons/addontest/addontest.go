// Package addontest applies one addon of a cluster definition's bundle to a
// test's control plane, as a cluster create would.
package addontest

import (
	"context"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/trellis-dev/trellis/addons"
	"github.com/trellis-dev/trellis/bootstrap/definition"
)

// Apply renders the cluster definition at path and applies the addon
// named: tests' control planes get, say, the trellis-flowcontrol addon
// that production clusters run. It fails the test when the definition
// renders no such addon.
func Apply(t testing.TB, cfg *rest.Config, path, name string) {
	t.Helper()
	l, err := definition.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := addons.Render(l.ClusterDefinition)
	if err != nil {
		t.Fatal(err)
	}
	var one []addons.Rendered
	for _, r := range rendered {
		if r.Addon.Name == name {
			one = append(one, r)
		}
	}
	if len(one) == 0 {
		t.Fatalf("%s renders no addon %s", path, name)
	}
	a, err := addons.NewApplier(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Apply(context.Background(), one); err != nil {
		t.Fatal(err)
	}
}
