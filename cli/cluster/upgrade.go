package cluster

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/trellis-dev/trellis/bootstrap"
	"github.com/trellis-dev/trellis/bootstrap/rollout"
	"github.com/trellis-dev/trellis/cli/internal/streams"
)

type upgradeOptions struct {
	stateFlags
	To          string
	Yes         bool
	Kubeconfig  string
	Interval    time.Duration
	GateTimeout time.Duration
	LockTTL     time.Duration
}

func newUpgradeCommand(s streams.Streams) *cobra.Command {
	o := &upgradeOptions{}
	cmd := &cobra.Command{
		Use:   "upgrade -f FILE --state URL --to VERSION [--yes]",
		Short: "Upgrade Kubernetes one minor at a time: plan, apply, then roll control plane before nodes",
		Long: `Checks version skew (no downgrades, one minor at a time, a version this Trellis
and every addon of the definition support), prints the plan, and with --yes
stores the new spec, applies it (new launch-template versions), and rolls
every instance group with the rollout engine of 'trellis ami rollout': each
control-plane group alone and in place, one instance at a time, then the node
groups with their definition's maxSurge/maxUnavailable, a canary first.

With --kubeconfig, old nodes are tainted, cordoned and drained through the
Eviction API (PodDisruptionBudgets honoured) and new ones must be Ready with
every runtime DaemonSet pod Ready before the next batch; control-plane
instances that are not nodes of the cluster roll cloud-only. Without it the
roll is cloud-only: a new instance passes when its group reports it in
service.

The roll is kept in the state store: run the same command again after a crash
and it resumes; 'trellis ami status|pause|resume|abort' work on it.`,
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
			host, _ := os.Hostname()
			uo := bootstrap.UpgradeOptions{ApplyOptions: opts, To: o.To, Interval: o.Interval, Roll: rollout.Options{
				Owner: fmt.Sprintf("%s/%d", host, os.Getpid()), GateTimeout: o.GateTimeout, LockTTL: o.LockTTL,
				OnStep: func(st rollout.State) { fmt.Fprintln(s.Out, st.Progress(time.Now())) },
			}}
			if o.Kubeconfig != "" {
				cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
				if err != nil {
					return err
				}
				if uo.K8sClient, err = kubernetes.NewForConfig(cfg); err != nil {
					return err
				}
			}
			res, err := bootstrap.Upgrade(cmd.Context(), l.ClusterDefinition, uo)
			if res != nil && res.Rollout != nil {
				res.Rollout.Print(s.Out)
			}
			return err
		},
	}
	o.add(cmd)
	cmd.Flags().StringVar(&o.To, "to", "", "Kubernetes version to upgrade to, e.g. 1.36.1")
	cmd.Flags().BoolVar(&o.Yes, "yes", false, "apply the upgrade (default: plan only)")
	cmd.Flags().StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig of the cluster, to drain and validate while rolling")
	cmd.Flags().DurationVar(&o.Interval, "interval", 0, "pause after each batch of a node group while rolling")
	cmd.Flags().DurationVar(&o.GateTimeout, "gate-timeout", 15*time.Minute, "how long new instances may take to pass the health gates")
	cmd.Flags().DurationVar(&o.LockTTL, "lock-ttl", 5*time.Minute, "how long the roll's lock outlives a run that stopped renewing it")
	_ = cmd.MarkFlagRequired("to")
	return cmd
}
