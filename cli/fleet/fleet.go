// Package fleet holds `trellis fleet`: clusters joined under Karmada, the
// fleet bundle, placements and a local fleet on loopback.
package fleet

import (
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/trellis-dev/trellis/cli/internal/streams"
)

const userAgent = "trellis-fleet"

// NewCommand returns `trellis fleet`.
func NewCommand(s streams.Streams) *cobra.Command {
	cmd := &cobra.Command{Use: "fleet", Short: "Run Trellis workloads across clusters with Karmada"}
	var fleetKubeconfig string
	cmd.PersistentFlags().StringVar(&fleetKubeconfig, "fleet-kubeconfig", os.Getenv("TRELLIS_FLEET_KUBECONFIG"), "kubeconfig of the fleet's (Karmada) apiserver ($TRELLIS_FLEET_KUBECONFIG)")

	cmd.AddCommand(newInstallCommand(s, &fleetKubeconfig), newJoinCommand(s, &fleetKubeconfig), newStatusCommand(s, &fleetKubeconfig),
		newPlaceCommand(s, &fleetKubeconfig), newLocalCommand(s))
	return cmd
}

func logger(s streams.Streams) *slog.Logger {
	return slog.New(slog.NewTextHandler(s.Err, nil))
}
