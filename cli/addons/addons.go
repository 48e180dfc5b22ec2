// Package addons holds `trellis addons`: render and apply the addon bundle.
package addons

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/trellis-dev/trellis/addons"
	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/bootstrap/render"
	"github.com/trellis-dev/trellis/bootstrap/statestore"
	"github.com/trellis-dev/trellis/cli/internal/kube"
	"github.com/trellis-dev/trellis/cli/internal/streams"
	"github.com/trellis-dev/trellis/internal/pki"
)

// NewCommand returns `trellis addons`.
func NewCommand(s streams.Streams) *cobra.Command {
	cmd := &cobra.Command{Use: "addons", Short: "Render and apply the addon bundle of a cluster"}
	var file, kubeconfig string
	var force bool
	var wait, state string
	render := &cobra.Command{
		Use:   "render -f FILE",
		Short: "Print the cluster's addons, in the order they are applied",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := definition.Load(file)
			if err != nil {
				return err
			}
			rendered, err := addons.Render(l.ClusterDefinition)
			if err != nil {
				return err
			}
			for _, r := range rendered {
				fmt.Fprintf(s.Out, "# addon %s %s (%s)\n", r.Addon.Name, r.Addon.Version, r.Hash)
				for _, o := range r.Objects {
					b, err := yaml.Marshal(o.Object)
					if err != nil {
						return err
					}
					fmt.Fprintf(s.Out, "---\n%s", b)
				}
			}
			return nil
		},
	}
	apply := &cobra.Command{
		Use:   "apply -f FILE [--kubeconfig K]",
		Short: "Apply the cluster's addons in dependency order (unchanged addons are skipped)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return Apply(cmd.Context(), s, file, kubeconfig, wait, state, force)
		},
	}
	diff := &cobra.Command{
		Use:   "diff -f FILE [--kubeconfig K]",
		Short: "What apply would create, update and prune (server-side dry run)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, rendered, a, err := applier(file, kubeconfig, s.Out)
			if err != nil {
				return err
			}
			changes, err := a.Diff(cmd.Context(), rendered)
			if err != nil {
				return err
			}
			sign := map[string]string{"create": "+", "update": "~", "delete": "-"}
			for _, c := range changes {
				fmt.Fprintf(s.Out, "%s %s\n", sign[c.Op], c.Key)
			}
			if len(changes) == 0 {
				fmt.Fprintln(s.Out, "no changes")
			}
			return nil
		},
	}
	diff.Flags().StringVar(&kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster")
	for _, c := range []*cobra.Command{render, apply, diff} {
		c.Flags().StringVarP(&file, "file", "f", "", "cluster definition")
		_ = c.MarkFlagRequired("file")
	}
	apply.Flags().StringVar(&kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster")
	apply.Flags().BoolVar(&force, "force", false, "re-apply addons that did not change")
	apply.Flags().StringVar(&state, "state", os.Getenv("KOPS_STATE_STORE"), "kops state store holding the cluster's identity root CA (AWS clusters)")
	apply.Flags().StringVar(&wait, "wait", "0s", "how long each addon's workloads may take to become ready (0: do not wait)")
	cmd.AddCommand(render, apply, diff)
	return cmd
}

// Apply applies the addon bundle of the definition in file to the cluster
// of kubeconfig, each addon waiting up to wait for its workloads; state is
// the kops state store holding the identity root CA (AWS clusters).
func Apply(ctx context.Context, s streams.Streams, file, kubeconfig, wait, state string, force bool) error {
	l, rendered, a, err := applier(file, kubeconfig, s.Out)
	if err != nil {
		return err
	}
	a.Force = force
	// The issuer's CA: for AWS clusters a signing CA under the root kept in
	// the state store; local clusters generate their root. Either seeds the
	// CA Secret only when the cluster has none.
	def := l.ClusterDefinition
	if def.Cloud == definition.CloudKind {
		root, err := pki.NewRoot(def.Runtime.TrustDomain, pki.RootTTL, time.Now())
		if err != nil {
			return err
		}
		if a.CA, err = pki.IssuerState(root, def.Runtime.TrustDomain); err != nil {
			return err
		}
	} else if state != "" {
		root, err := statestore.IdentityRoot(ctx, state, render.ClusterName(def))
		if err != nil {
			return fmt.Errorf("identity root CA of %s: %w (created by `trellis cluster create`)", def.Name, err)
		}
		if a.CA, err = pki.IssuerState(root, def.Runtime.TrustDomain); err != nil {
			return err
		}
	}
	if a.Wait, err = parseDuration(wait); err != nil {
		return err
	}
	res, err := a.Apply(ctx, rendered)
	for _, r := range res {
		if r.Action == "unchanged" {
			fmt.Fprintf(s.Out, "unchanged %s %s\n", r.Addon, r.Version)
		}
	}
	return err
}

// applier loads and renders the definition in file and connects an addon
// applier to the cluster of kubeconfig.
func applier(file, kubeconfig string, out io.Writer) (*definition.Loaded, []addons.Rendered, *addons.Applier, error) {
	l, err := definition.Load(file)
	if err != nil {
		return nil, nil, nil, err
	}
	rendered, err := addons.Render(l.ClusterDefinition)
	if err != nil {
		return nil, nil, nil, err
	}
	cfg, err := kube.Config(kubeconfig, "trellis-addons")
	if err != nil {
		return nil, nil, nil, err
	}
	a, err := addons.NewApplier(cfg, out)
	if err != nil {
		return nil, nil, nil, err
	}
	return l, rendered, a, nil
}

func parseDuration(s string) (d time.Duration, err error) {
	d, err = time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("--wait: %w", err)
	}
	return d, nil
}
