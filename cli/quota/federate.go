package quota

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"

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
			byMember := map[string]quota.Plan{}
			for _, p := range plans {
				member, file, ok := strings.Cut(p, "=")
				if !ok || len(validation.IsDNS1123Label(member)) > 0 {
					return fmt.Errorf("--plan %q: want MEMBER=FILE, MEMBER a fleet member's name", p)
				}
				if _, dup := byMember[member]; dup {
					return fmt.Errorf("--plan: member %s given twice", member)
				}
				plan, err := readPlan(file)
				if err != nil {
					return err
				}
				byMember[member] = plan
			}
			if len(byMember) < 2 {
				return fmt.Errorf("give at least two --plan MEMBER=FILE: a federated quota spans clusters")
			}
			fs := quota.Federate(byMember, minMembers)
			var objs []*unstructured.Unstructured
			for _, f := range fs {
				objs = append(objs, f.Object())
				fmt.Fprintln(s.Err, f.String())
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
