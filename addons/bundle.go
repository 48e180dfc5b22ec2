package addons

import (
	"context"
	"fmt"
	"io"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/bootstrap/render"
	"github.com/trellis-dev/trellis/bootstrap/statestore"
	"github.com/trellis-dev/trellis/internal/pki"
)

// ApplyOptions are what Apply needs besides the definition.
type ApplyOptions struct {
	// Config connects to the cluster.
	Config *rest.Config
	// Out receives one line per addon applied, unchanged or pruned.
	Out io.Writer
	// StateStore is the kops state store holding the cluster's identity
	// root CA (AWS clusters). Empty: the issuer's CA Secret is not seeded.
	StateStore string
	// Wait is how long each addon's workloads may take to become ready.
	Wait time.Duration
	// Force re-applies addons that did not change.
	Force bool
	// Clock dates the CAs minted for the issuer (default: the real clock).
	Clock clock.PassiveClock
	// Lifecycles are those of the bundle's addons (see Lifecycle).
	Lifecycles []Lifecycle
}

// Apply renders the definition's bundle and applies it to the cluster in
// dependency order, seeding the issuer's CA (see IssuerCA).
func Apply(ctx context.Context, def *definition.ClusterDefinition, o ApplyOptions) ([]Result, error) {
	rendered, err := Render(def, o.Lifecycles...)
	if err != nil {
		return nil, err
	}
	a, err := NewApplier(o.Config, o.Out)
	if err != nil {
		return nil, err
	}
	a.Force, a.Wait, a.Clock, a.Lifecycles = o.Force, o.Wait, o.Clock, o.Lifecycles
	if a.CA, err = IssuerCA(ctx, def, o.StateStore, o.Clock); err != nil {
		return nil, err
	}
	return a.Apply(ctx, rendered)
}

// IssuerCA is the signing CA the in-cluster issuer is seeded with (the
// Applier seeds it only when the cluster has none): for AWS clusters a
// signing CA under the root that `trellis cluster create` keeps in the state
// store; local clusters generate their root. nil when an AWS cluster's
// state store is not given.
func IssuerCA(ctx context.Context, def *definition.ClusterDefinition, stateStore string, c clock.PassiveClock) (*pki.State, error) {
	if c == nil {
		c = clock.RealClock{}
	}
	var root *pki.KeyPair
	switch {
	case def.Cloud == definition.CloudKind:
		r, err := pki.NewRoot(def.Runtime.TrustDomain, pki.RootTTL, c.Now())
		if err != nil {
			return nil, err
		}
		root = r
	case stateStore != "":
		r, err := statestore.IdentityRoot(ctx, stateStore, render.ClusterName(def))
		if err != nil {
			return nil, fmt.Errorf("identity root CA of %s: %w (created by `trellis cluster create`)", def.Name, err)
		}
		root = r
	default:
		return nil, nil
	}
	return pki.IssuerState(root, def.Runtime.TrustDomain)
}
