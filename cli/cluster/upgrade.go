package cluster

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/trellis-dev/trellis/bootstrap"
	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/bootstrap/rollout"
	"github.com/trellis-dev/trellis/cli/internal/streams"
)

// rollFlags are how upgrade and update roll the groups.
type rollFlags struct {
	stateFlags
	Yes         bool
	Kubeconfig  string
	Interval    time.Duration
	GateTimeout time.Duration
	LockTTL     time.Duration
}

func (o *rollFlags) add(cmd *cobra.Command) {
	o.stateFlags.add(cmd)
	cmd.Flags().BoolVar(&o.Yes, "yes", false, "store, apply and roll (default: plan only)")
	cmd.Flags().StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig of the cluster, to drain nodes and gate on them while rolling (default: cloud-only)")
	cmd.Flags().DurationVar(&o.Interval, "interval", 0, "pause after each batch of a node group while rolling")
	cmd.Flags().DurationVar(&o.GateTimeout, "gate-timeout", 15*time.Minute, "how long new instances may take to pass the health gates")
	cmd.Flags().DurationVar(&o.LockTTL, "lock-ttl", 5*time.Minute, "how long the roll's lock outlives a run that stopped renewing it")
}

// options turns the flags into the library's options.
func (o *rollFlags) options(ctx context.Context, def *definition.ClusterDefinition, s streams.Streams) (bootstrap.UpgradeOptions, error) {
	opts, err := o.applyOptions(ctx, def, s, false)
	if err != nil {
		return bootstrap.UpgradeOptions{}, err
	}
	opts.Yes = o.Yes
	host, _ := os.Hostname()
	uo := bootstrap.UpgradeOptions{ApplyOptions: opts, Interval: o.Interval, Roll: rollout.Options{
		Owner: fmt.Sprintf("%s/%d", host, os.Getpid()), GateTimeout: o.GateTimeout, LockTTL: o.LockTTL,
		Progress: s.Out,
	}}
	if o.Kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
		if err != nil {
			return uo, fmt.Errorf("failed to load kubeconfig %s: %w", o.Kubeconfig, err)
		}
		if uo.K8sClient, err = kubernetes.NewForConfig(cfg); err != nil {
			return uo, fmt.Errorf("failed to build a client from kubeconfig %s: %w", o.Kubeconfig, err)
		}
	}
	return uo, nil
}

// run loads the definition, turns the flags into options, calls a rolling
// command of the library and prints the roll's final state.
func (o *rollFlags) run(s streams.Streams, call func(context.Context, *definition.ClusterDefinition, bootstrap.UpgradeOptions) (*bootstrap.UpgradeResult, error)) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		l, err := loadAWS(o.File)
		if err != nil {
			return err
		}
		uo, err := o.options(cmd.Context(), l.ClusterDefinition, s)
		if err != nil {
			return err
		}
		res, err := call(cmd.Context(), l.ClusterDefinition, uo)
		if res != nil && res.Rollout != nil {
			res.Rollout.Print(s.Out)
		}
		return err
	}
}

const rollHelp = `With --kubeconfig, old nodes are tainted, cordoned and drained through the
Eviction API (PodDisruptionBudgets honoured) and new ones must be Ready with
every runtime DaemonSet pod Ready before the next batch; control-plane
instances that are not nodes of the cluster roll cloud-only. Without it the
roll is cloud-only: a new instance passes when its group reports it in
service.

The roll is kept in the state store: run the same command again after a crash
and it resumes; 'trellis ami status|pause|resume|abort' work on it.`

func newUpgradeCommand(s streams.Streams, opts Options) *cobra.Command {
	o := &rollFlags{stateFlags: newStateFlags(opts)}
	var to string
	cmd := &cobra.Command{
		Use:   "upgrade -f FILE --state URL --to VERSION [--yes]",
		Short: "Upgrade Kubernetes one minor at a time: plan, apply, then roll control plane before nodes",
		Long: `Checks version skew (no downgrades, one minor at a time, a version this Trellis
and every addon of the definition support), prints the plan, and with --yes
stores the new spec, applies it (new launch-template versions), and rolls
every instance group with the rollout engine of 'trellis ami rollout': each
control-plane group alone and in place, one instance at a time, then the node
groups with their definition's maxSurge/maxUnavailable, a canary first.

` + rollHelp,
		Args: cobra.NoArgs,
		RunE: o.run(s, func(ctx context.Context, def *definition.ClusterDefinition, uo bootstrap.UpgradeOptions) (*bootstrap.UpgradeResult, error) {
			uo.To = to
			return bootstrap.Upgrade(ctx, def, uo)
		}),
	}
	o.add(cmd)
	cmd.Flags().StringVar(&to, "to", "", "Kubernetes version to upgrade to, e.g. 1.36.1")
	_ = cmd.MarkFlagRequired("to")
	return cmd
}

func newUpdateCommand(s streams.Streams, opts Options) *cobra.Command {
	o := &rollFlags{stateFlags: newStateFlags(opts)}
	cmd := &cobra.Command{
		Use:   "update -f FILE --state URL [--yes]",
		Short: "Bring a cluster to its changed definition: plan, store, apply, then roll the groups whose instances changed",
		Long: `Prints the field-level diff and the cloud plan. With --yes, stores the changed
specs and applies them, then rolls every group whose instances are not on
their newest launch template (a change of machine types, mixed instances,
root volume, instance metadata, image ...) with the rollout engine, as
upgrade does; groups the change leaves alone have nothing to replace.
A kubernetesVersion change is refused: that is 'trellis cluster upgrade'.
A failed store or apply leaves the state store as it was.

` + rollHelp,
		Args: cobra.NoArgs,
		RunE: o.run(s, bootstrap.ApplyAndRoll),
	}
	o.add(cmd)
	return cmd
}
