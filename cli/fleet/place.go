package fleet

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/trellis-dev/trellis/cli/internal/flags"
	"github.com/trellis-dev/trellis/cli/internal/kube"
	"github.com/trellis-dev/trellis/cli/internal/streams"
	"github.com/trellis-dev/trellis/fleet"
)

type placeOptions struct {
	fleetKubeconfig *string
	file            string
	dryRun          bool
}

func newPlaceCommand(s streams.Streams, fleetKubeconfig *string) *cobra.Command {
	o := &placeOptions{fleetKubeconfig: fleetKubeconfig}
	cmd := &cobra.Command{
		Use:   "place -f placements.yaml [--dry-run]",
		Short: "Render Trellis placements into Karmada PropagationPolicies and apply them (--dry-run prints them)",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return o.run(cmd.Context(), s) },
	}
	flags.File(cmd, &o.file, "placements file")
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "print the policies instead of applying them")
	return cmd
}

func (o *placeOptions) run(ctx context.Context, s streams.Streams) error {
	ps, err := fleet.LoadPlacements(o.file)
	if err != nil {
		return err
	}
	if o.dryRun {
		for _, p := range ps {
			if err := kube.PrintYAML(s.Out, p.PropagationPolicy()); err != nil {
				return err
			}
		}
		return nil
	}
	cfg, err := kube.Config(*o.fleetKubeconfig, userAgent)
	if err != nil {
		return err
	}
	applied, err := fleet.Place(ctx, cfg, ps)
	for _, name := range applied {
		fmt.Fprintf(s.Out, "propagationpolicy %s applied\n", name)
	}
	return err
}
