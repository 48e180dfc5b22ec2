package cluster

import (
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/trellis-dev/trellis/bootstrap"
	"github.com/trellis-dev/trellis/cli/internal/streams"
)

type upgradeOptions struct {
	stateFlags
	To         string
	Yes        bool
	Kubeconfig string
	Interval   time.Duration
}

func newUpgradeCommand(s streams.Streams) *cobra.Command {
	o := &upgradeOptions{}
	cmd := &cobra.Command{
		Use:   "upgrade -f FILE --state URL --to VERSION [--yes]",
		Short: "Upgrade Kubernetes one minor at a time: plan, apply, then roll control plane before nodes",
		Long: `Checks version skew (no downgrades, one minor at a time, a version this Trellis
and every addon of the definition support), prints the plan, and with --yes
stores the new spec, applies it, and rolls every instance group through kops's
rolling update, control-plane groups first. With --kubeconfig the rolling
update drains nodes and validates the cluster between groups; without it the
update is cloud-only.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := loadAWS(o.File)
			if err != nil {
				return err
			}
			opts, err := o.applyOptions(cmd.Context(), l.ClusterDefinition, s, false)
			if err != nil {
				return err
			}
			opts.Yes = o.Yes
			uo := bootstrap.UpgradeOptions{ApplyOptions: opts, To: o.To, Interval: o.Interval}
			if o.Kubeconfig != "" {
				cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
				if err != nil {
					return err
				}
				if uo.K8sClient, err = kubernetes.NewForConfig(cfg); err != nil {
					return err
				}
			}
			_, err = bootstrap.Upgrade(cmd.Context(), l.ClusterDefinition, uo)
			return err
		},
	}
	o.add(cmd)
	cmd.Flags().StringVar(&o.To, "to", "", "Kubernetes version to upgrade to, e.g. 1.36.1")
	cmd.Flags().BoolVar(&o.Yes, "yes", false, "apply the upgrade (default: plan only)")
	cmd.Flags().StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig of the cluster, to drain and validate while rolling")
	cmd.Flags().DurationVar(&o.Interval, "interval", 0, "pause between instances while rolling")
	_ = cmd.MarkFlagRequired("to")
	return cmd
}
