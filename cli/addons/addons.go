// Package addons holds `trellis addons`: render and apply the addon bundle.
package addons

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/trellis-dev/trellis/addons"
	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/cli/internal/flags"
	"github.com/trellis-dev/trellis/cli/internal/kube"
	"github.com/trellis-dev/trellis/cli/internal/streams"
	karmadaaddon "github.com/trellis-dev/trellis/fleet/karmada/addon"
)

// NewCommand returns `trellis addons`.
func NewCommand(s streams.Streams) *cobra.Command {
	cmd := &cobra.Command{Use: "addons", Short: "Render and apply the addon bundle of a cluster"}
	var file, kubeconfig string
	var force bool
	var state string
	var wait time.Duration
	render := &cobra.Command{
		Use:   "render -f FILE",
		Short: "Print the cluster's addons, in the order they are applied",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := definition.Load(file)
			if err != nil {
				return err
			}
			rendered, err := addons.Render(l.ClusterDefinition, lifecycles()...)
			if err != nil {
				return err
			}
			for _, r := range rendered {
				fmt.Fprintf(s.Out, "# addon %s %s (%s)\n", r.Addon.Name, r.Addon.Version, r.Hash)
				if err := kube.PrintYAML(s.Out, r.Objects...); err != nil {
					return err
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
			return runApply(cmd.Context(), s, file, kubeconfig, state, wait, force)
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
	flags.Kubeconfig(diff.Flags(), &kubeconfig, "kubeconfig of the cluster")
	for _, c := range []*cobra.Command{render, apply, diff} {
		flags.File(c, &file, "cluster definition")
	}
	flags.Kubeconfig(apply.Flags(), &kubeconfig, "kubeconfig of the cluster")
	apply.Flags().BoolVar(&force, "force", false, "re-apply addons that did not change")
	flags.State(apply.Flags(), &state, "kops state store holding the cluster's identity root CA (AWS clusters)")
	apply.Flags().DurationVar(&wait, "wait", 0, "how long each addon's workloads, and each fleet API member the apply replaces, may take to become ready (0: do not wait, and replace no fleet API member)")
	cmd.AddCommand(render, apply, diff)
	return cmd
}

// runApply is `trellis addons apply`: the library applies, this prints.
func runApply(ctx context.Context, s streams.Streams, file, kubeconfig, state string, wait time.Duration, force bool) error {
	l, err := definition.Load(file)
	if err != nil {
		return err
	}
	cfg, err := kube.Config(kubeconfig, "trellis-addons")
	if err != nil {
		return err
	}
	res, err := addons.Apply(ctx, l.ClusterDefinition, addons.ApplyOptions{
		Config: cfg, Out: s.Out, StateStore: state, Wait: wait, Force: force, Lifecycles: lifecycles(),
	})
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
	rendered, err := addons.Render(l.ClusterDefinition, lifecycles()...)
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
	a.Lifecycles = lifecycles()
	return l, rendered, a, nil
}

// lifecycles are the bundle's addon lifecycles, which Render and the
// applier call: the fleet control plane's.
func lifecycles() []addons.Lifecycle { return []addons.Lifecycle{karmadaaddon.Lifecycle{}} }
