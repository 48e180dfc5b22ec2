package loadtest

import (
	"context"
	"fmt"

	"k8s.io/client-go/rest"

	"github.com/trellis-dev/trellis/addons"
	"github.com/trellis-dev/trellis/bootstrap/definition"
)

// ApplyAddon renders the cluster definition at path and applies the one
// addon named, as a cluster create would: the benchmarks' control planes
// get, say, the trellis-flowcontrol addon that production clusters run.
func ApplyAddon(ctx context.Context, cfg *rest.Config, path, name string) error {
	l, err := definition.Load(path)
	if err != nil {
		return err
	}
	rendered, err := addons.Render(l.ClusterDefinition)
	if err != nil {
		return err
	}
	var one []addons.Rendered
	for _, r := range rendered {
		if r.Addon.Name == name {
			one = append(one, r)
		}
	}
	if len(one) == 0 {
		return fmt.Errorf("%s renders no addon %s", path, name)
	}
	a, err := addons.NewApplier(cfg, nil)
	if err != nil {
		return err
	}
	_, err = a.Apply(ctx, one)
	return err
}
