package fleet

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/trellis-dev/trellis/cli/internal/flags"
	"github.com/trellis-dev/trellis/cli/internal/kube"
	"github.com/trellis-dev/trellis/cli/internal/streams"
	"github.com/trellis-dev/trellis/fleet"
)

func newStatusCommand(s streams.Streams, fleetKubeconfig *string) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "status [-o json]",
		Short: "The members: Ready, version, nodes, allocated and allocatable capacity, taints",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runStatus(cmd.Context(), s, *fleetKubeconfig, output)
		},
	}
	flags.Output(cmd.Flags(), &output)
	return cmd
}

func runStatus(ctx context.Context, s streams.Streams, fleetKubeconfig, output string) error {
	if output != "table" && output != "json" {
		return fmt.Errorf("unknown --output %q: use table or json", output)
	}
	cfg, err := kube.Config(fleetKubeconfig, userAgent)
	if err != nil {
		return err
	}
	members, err := fleet.Status(ctx, cfg)
	if err != nil {
		return err
	}
	if output == "json" {
		enc := json.NewEncoder(s.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(members)
	}
	return fleet.PrintStatus(s.Out, members)
}
