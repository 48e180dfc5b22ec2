package fleet

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"github.com/trellis-dev/trellis/config"
	"github.com/trellis-dev/trellis/controller/inject"
	"github.com/trellis-dev/trellis/fleet/karmada"
	apply "github.com/trellis-dev/trellis/internal/kubeapply"
)

// Bundle is what the fleet's apiserver needs to take Trellis workloads:
// the six workload CRDs (the files `make generate` writes, as the members'
// addon bundle ships them), their interpreter customizations, and the
// taint policy that lets placements fail over from a member that is not
// Ready (Karmada's Failover feature gate and NoExecute taint policies must
// be on: karmada.Options.Failover), and the runtime's namespace, kept to the
// fleet.
func Bundle() ([]*unstructured.Unstructured, error) {
	files, err := fs.Glob(config.CRDs, "crd/*.yaml")
	if err != nil {
		return nil, fmt.Errorf("list the workload CRDs: %w", err)
	}
	sort.Strings(files)
	var out []*unstructured.Unstructured
	for _, f := range files {
		data, err := config.CRDs.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read the workload CRD: %w", err)
		}
		objs, err := apply.Decode(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out = append(out, objs...)
	}
	rics, err := InterpreterCustomizations()
	if err != nil {
		return nil, err
	}
	return append(append(out, rics...), TaintPolicy(), RuntimeNamespace()), nil
}

// SkipAutoPropagationLabel keeps Karmada from propagating a namespace of
// the fleet's apiserver to the members.
const SkipAutoPropagationLabel = "namespace.karmada.io/skip-auto-propagation"

// RuntimeNamespace is the fleet's trellis-system, where workloads of the
// runtime (TrellisDaemons) are placed from. Every member has its own, made
// by its addon bundle, so Karmada is told not to propagate it: it would
// find the members' namespace not its own and retry, and log so, forever.
func RuntimeNamespace() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": inject.ProfileNamespace, "labels": map[string]any{
			ManagedByLabel: ManagedBy, SkipAutoPropagationLabel: "true",
		}},
	}}
}

// Install applies the bundle to the fleet's apiserver and waits until the
// CRDs are served.
func Install(ctx context.Context, fleet *rest.Config) (int, error) {
	objs, err := Bundle()
	if err != nil {
		return 0, err
	}
	a, err := apply.New(fleet, karmada.FieldManager)
	if err != nil {
		return 0, err
	}
	if err := a.ApplyCRDsFirst(ctx, objs...); err != nil {
		return 0, err
	}
	return len(objs), nil
}

// InstallOptions tune InstallAll.
type InstallOptions struct {
	// KarmadaDir, when set, has Karmada's own API installed first
	// (karmada.Install) from KarmadaDir/manifests, with its webhook and
	// aggregated apiserver at WebhookURL and AggregatedHost:AggregatedPort,
	// their certificates signed by the CA the fleet's kubeconfig trusts.
	KarmadaDir     string
	WebhookURL     string
	AggregatedHost string
	AggregatedPort int
	// Wait is how long to retry while the fleet's components start.
	Wait time.Duration
	Log  *slog.Logger
}

// InstallAll installs Karmada's API (with KarmadaDir) and then the fleet
// bundle, retrying the bundle until Wait is spent (Karmada's webhook
// admits its interpreter customizations and taint policy).
func InstallAll(ctx context.Context, fleet *rest.Config, o InstallOptions) (int, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.KarmadaDir != "" {
		if o.WebhookURL == "" {
			return 0, fmt.Errorf("--karmada needs the webhook's URL (--webhook-url)")
		}
		// Karmada's webhook and aggregated apiserver certificates are
		// checked against the CA the fleet's kubeconfig trusts.
		ca, err := caBundle(fleet)
		if err != nil {
			return 0, fmt.Errorf("the fleet's apiserver: %w", err)
		}
		if err := karmada.Install(ctx, fleet, karmada.InstallOptions{
			ManifestDir: o.KarmadaDir, WebhookURL: o.WebhookURL, AggregatedHost: o.AggregatedHost,
			AggregatedPort: o.AggregatedPort, CAPEM: ca, Wait: o.Wait, Log: o.Log,
		}); err != nil {
			return 0, err
		}
	}
	var n int
	err := karmada.Retry(ctx, o.Wait, func(ctx context.Context) error {
		var err error
		if n, err = Install(ctx, fleet); err != nil {
			o.Log.Info("fleet bundle: retrying", "err", err)
		}
		return err
	})
	return n, err
}
