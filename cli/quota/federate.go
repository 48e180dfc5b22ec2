package quota

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/trellis-dev/trellis/cli/internal/kube"
	"github.com/trellis-dev/trellis/cli/internal/streams"
	"github.com/trellis-dev/trellis/fleet"
	"github.com/trellis-dev/trellis/governance/quota"
)

func federateCommand(s streams.Streams) *cobra.Command {
	var plans []string
	var minMembers int
	var apply bool
	var fleetKubeconfig string
	cmd := &cobra.Command{
		Use:   "federate --plan MEMBER=FILE --plan MEMBER=FILE [--apply]",
		Short: "Join per-member plans into a FederatedResourceQuota per namespace that spans clusters (Karmada pushes each member its share); prints them, or applies them to the fleet",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			objs, err := quota.FederateFiles(plans, minMembers, s.Err)
			if err != nil {
				return err
			}
			if !apply {
				return kube.PrintYAML(s.Out, objs...)
			}
			cfg, err := kube.Config(fleetKubeconfig, "trellis-quota")
			if err != nil {
				return err
			}
			if err := fleet.Apply(cmd.Context(), cfg, objs...); err != nil {
				return err
			}
			fmt.Fprintf(s.Out, "%d federated quotas applied\n", len(objs))
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&plans, "plan", nil, "a member's plan (trellis quota plan's output): MEMBER=FILE, repeated")
	cmd.Flags().IntVar(&minMembers, "min-members", 2, "federate namespaces planned in at least this many members")
	cmd.Flags().BoolVar(&apply, "apply", false, "apply to the fleet instead of printing")
	cmd.Flags().StringVar(&fleetKubeconfig, "fleet-kubeconfig", os.Getenv("TRELLIS_FLEET_KUBECONFIG"), "kubeconfig of the fleet's apiserver (with --apply)")
	return cmd
}
