package addons

import (
	"context"
	"slices"

	"github.com/trellis-dev/trellis/bootstrap/definition"
)

// Lifecycle is what an addon needs beyond its objects being applied, as
// kops's channels keep hooks beside the manifests where data is not
// enough: values its templates see, checks before anything is written,
// secrets it owns, and work after every addon is applied. The applier
// calls each lifecycle at those points and knows no addon by name.
type Lifecycle interface {
	// Addons names the addons this lifecycle serves.
	Addons() []string
	// Values are what the templates of those addons see as .Addon.
	Values(def *definition.ClusterDefinition) map[string]any
	// Check runs before anything is written; an error stops the apply.
	Check(ctx context.Context, a *Applier, rendered []Rendered) error
	// Seed creates or renews the secrets the addons reference and do not
	// render (key material never goes through templates or golden files).
	Seed(ctx context.Context, a *Applier, rendered []Rendered) error
	// Finish runs after every addon is applied, on every apply (an earlier
	// apply may have left work unfinished); its results are reported.
	Finish(ctx context.Context, a *Applier) ([]Result, error)
}

// lifecycles is the applier's lifecycles.
func (a *Applier) lifecycles() []Lifecycle { return a.Lifecycles }

// valuesFor is the .Addon values of addon name, from the lifecycle that
// serves it (nil: none does).
func valuesFor(lcs []Lifecycle, def *definition.ClusterDefinition, name string) map[string]any {
	for _, lc := range lcs {
		if slices.Contains(lc.Addons(), name) {
			return lc.Values(def)
		}
	}
	return nil
}
