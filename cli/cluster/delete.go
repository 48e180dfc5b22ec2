package cluster

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/trellis-dev/trellis/bootstrap"
	"github.com/trellis-dev/trellis/cli/internal/flags"
	"github.com/trellis-dev/trellis/cli/internal/streams"
)

type deleteOptions struct {
	File     string
	State    string
	Emulator string
	Yes      bool
	Wait     time.Duration
	Interval time.Duration
}

func newDeleteCommand(s streams.Streams) *cobra.Command {
	o := &deleteOptions{}
	cmd := &cobra.Command{
		Use:   "delete -f FILE --state URL [--yes]",
		Short: "Delete every cloud resource a cluster owns and its state-store folder (plan without --yes)",
		Long: `Lists every cloud resource the cluster owns, found by kops's ownership tags
(kubernetes.io/cluster/<name>=owned, KubernetesCluster=<name>) with kops's own
listing, and the cluster's files in the state store. With --yes deletes them
all, as 'kops delete cluster --yes' does: instances, autoscaling groups and
launch templates, load balancers, the VPC and its subnets, gateways and route
tables, security groups, volumes, IAM roles and instance profiles, DNS records,
then the state-store folder (specs, keys, Trellis's own files).

Only the definition's name and region are needed, so it also cleans up after a
failed create (whose state store was restored). Resources tagged shared and
other clusters' resources and files are left alone.

Resources that others depend on are retried pass after pass (every 10s) until
--wait. SIGINT or SIGTERM stops it before the next call, with none in flight;
so does the end of --wait. It then lists what it deleted and what is left and
keeps the state-store folder: run the same command again to finish.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := loadAWSEnv(cmd.Context(), o.File, o.Emulator, s, "delete")
			if err != nil {
				return err
			}
			plan, err := bootstrap.Delete(cmd.Context(), l.ClusterDefinition, bootstrap.DeleteOptions{StateStore: o.State, Yes: o.Yes, Out: s.Out, Wait: o.Wait, Interval: o.Interval})
			again := fmt.Sprintf("trellis cluster delete -f %s --state %s --yes", o.File, o.State)
			return plan.Report(s.Out, o.Yes, again, err)
		},
	}
	flags.Cluster(cmd, &o.File, &o.State, &o.Emulator)
	cmd.Flags().BoolVar(&o.Yes, "yes", false, "delete (default: list what would be deleted)")
	cmd.Flags().DurationVar(&o.Wait, "wait", 10*time.Minute, "how long kops may retry deleting resources that still have dependents")
	cmd.Flags().DurationVar(&o.Interval, "interval", 10*time.Second, "pause between deletion passes")
	_ = cmd.Flags().MarkHidden("interval")
	return cmd
}
