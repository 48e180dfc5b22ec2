// Package ami holds `trellis ami`: rolling every node of instance groups
// onto a new machine image.
package ami

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"

	"github.com/trellis-dev/trellis/bootstrap"
	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/bootstrap/render"
	"github.com/trellis-dev/trellis/bootstrap/rollout"
	"github.com/trellis-dev/trellis/bootstrap/statestore"
	"github.com/trellis-dev/trellis/cli/internal/flags"
	"github.com/trellis-dev/trellis/cli/internal/kube"
	"github.com/trellis-dev/trellis/cli/internal/streams"
)

// NewCommand returns `trellis ami`.
func NewCommand(s streams.Streams) *cobra.Command {
	cmd := &cobra.Command{Use: "ami", Short: "Replace the nodes of instance groups with a new machine image"}
	cmd.AddCommand(newRolloutCommand(s), newStatusCommand(s), newRequestCommand(s, "pause", rollout.StatusPaused), newRequestCommand(s, "abort", rollout.StatusAborting), newResumeCommand(s))
	return cmd
}

type common struct {
	File     string
	State    string
	Emulator string
}

func (c *common) add(cmd *cobra.Command) {
	flags.Cluster(cmd, &c.File, &c.State, &c.Emulator)
}

// store opens the rollout state of the definition's cluster.
func (c *common) store() (*rollout.VFSStore, *definition.ClusterDefinition, string, error) {
	l, err := definition.Load(c.File)
	if err != nil {
		return nil, nil, "", err
	}
	if l.Cloud != definition.CloudAWS {
		return nil, nil, "", fmt.Errorf("%s: AMI rollouts are for AWS clusters", c.File)
	}
	if c.State == "" {
		return nil, nil, "", statestore.ErrNoStateStore
	}
	if err := (bootstrap.Env{Emulator: c.Emulator, Region: l.Region}).Setup(); err != nil {
		return nil, nil, "", err
	}
	name := render.ClusterName(l.ClusterDefinition)
	st, err := rollout.NewVFSStore(c.State, name)
	return st, l.ClusterDefinition, name, err
}

type rolloutOptions struct {
	common
	Kubeconfig string
	bootstrap.AMIRolloutOptions
}

func newRolloutCommand(s streams.Streams) *cobra.Command {
	o := &rolloutOptions{}
	cmd := &cobra.Command{
		Use:   "rollout -f FILE --image IMAGE [--groups a,b] [--max-surge N] [--budget N] [--yes]",
		Short: "Plan, or with --yes run, a rollout of instance groups onto a new image",
		Long: `Without --yes, prints the plan and changes nothing: per group the nodes to
replace, the strategy, the batches and the PodDisruptionBudgets that will
constrain the drains, and an estimate.

With --yes: creates a launch-template version with the image, then per group
and in parallel within --budget: surge new nodes, wait until they pass the
gates (Ready, every runtime DaemonSet pod Ready on them, then --check-http,
--check-command and --validate-cluster), cordon and drain old nodes through
the Eviction API (PodDisruptionBudgets are honoured), terminate them. A group
whose definition says maxSurge 0 (or --max-surge 0 --max-unavailable N) is
replaced in place: N old nodes drained and terminated, the group relaunching
them at the same capacity. The first batch of a group is a single canary.
Progress is kept in the state store after every step: run the same command
again after a crash and it resumes.

--rollback rolls the groups of the last rollout back onto their previous image.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runRollout(cmd.Context(), o, s) },
	}
	o.add(cmd)
	cmd.Flags().StringVar(&o.Image, "image", "", "new image: ami-..., ssm:/parameter or owner/name")
	cmd.Flags().StringSliceVar(&o.Overrides.Groups, "groups", nil, "instance groups to roll (default: every node group)")
	cmd.Flags().BoolVar(&o.Yes, "yes", false, "run the rollout (default: print the plan)")
	cmd.Flags().IntVar(&o.Overrides.MaxSurge, "max-surge", -1, "new nodes per batch per group (default: the group's maxSurge, else 10% of its minimum size)")
	cmd.Flags().IntVar(&o.Overrides.MaxUnavailable, "max-unavailable", -1, "old nodes replaced in place per batch when max-surge is 0 (default: the group's maxUnavailable)")
	cmd.Flags().BoolVar(&o.Overrides.Canary, "canary", true, "start each group with a one-node batch")
	cmd.Flags().BoolVar(&o.Overrides.PauseAfterCanary, "pause-after-canary", false, "pause for a human after each group's canary (resume with `trellis ami resume`)")
	cmd.Flags().IntVar(&o.Budget, "budget", 0, "new nodes surged at once across all groups (default: the sum of the groups' surges)")
	cmd.Flags().DurationVar(&o.Overrides.BakeTime, "bake-time", 0, "wait after each batch")
	o.addRunFlags(cmd)
	cmd.Flags().BoolVar(&o.Rollback, "rollback", false, "roll back onto the previous image of the last rollout")
	return cmd
}

func runRollout(ctx context.Context, o *rolloutOptions, s streams.Streams) error {
	store, def, name, err := o.store()
	if err != nil {
		return err
	}
	ro := o.AMIRolloutOptions
	ro.StateStore, ro.Store, ro.DefinitionFile, ro.Out, ro.PlanBudgets = o.State, store, o.File, s.Out, o.Kubeconfig != ""
	ro.Kube = func() (kubernetes.Interface, error) { return kube.Client(o.Kubeconfig, "trellis-ami-rollout") }
	host, _ := os.Hostname()
	ro.Owner = fmt.Sprintf("%s/%d", host, os.Getpid())
	return bootstrap.RolloutAMI(ctx, def, name, ro)
}

func newResumeCommand(s streams.Streams) *cobra.Command {
	o := &rolloutOptions{}
	cmd := &cobra.Command{
		Use:   "resume -f FILE",
		Short: "Resume a paused or interrupted rollout",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Image = "" // resume what the state store holds
			o.Overrides.MaxSurge, o.Overrides.MaxUnavailable = -1, -1
			return runRollout(cmd.Context(), o, s)
		},
	}
	o.add(cmd)
	o.addRunFlags(cmd)
	return cmd
}

// addRunFlags are the flags of a running rollout: the cluster, gates and
// drains (not kept in the state store: give them again to resume).
func (o *rolloutOptions) addRunFlags(cmd *cobra.Command) {
	flags.Kubeconfig(cmd.Flags(), &o.Kubeconfig, "kubeconfig of the cluster")
	cmd.Flags().DurationVar(&o.GateTimeout, "gate-timeout", 15*time.Minute, "how long new nodes may take to pass the health gates")
	cmd.Flags().DurationVar(&o.DrainTimeout, "drain-timeout", 10*time.Minute, "how long a node's drain may take")
	cmd.Flags().IntVar(&o.DrainGrace, "drain-grace", -1, "eviction grace period in seconds (default: each pod's own)")
	cmd.Flags().StringArrayVar(&o.HTTPChecks, "check-http", nil, "gate: GET this URL ({node}, {ip} substituted) must answer 2xx for each new node (repeatable)")
	cmd.Flags().StringArrayVar(&o.CommandChecks, "check-command", nil, "gate: this shell command must exit 0 for each new node, run with TRELLIS_NODE, TRELLIS_NODE_IP, TRELLIS_PROVIDER_ID (repeatable)")
	cmd.Flags().DurationVar(&o.CheckTimeout, "check-timeout", 30*time.Second, "timeout of one --check-http or --check-command attempt")
	cmd.Flags().BoolVar(&o.Validate, "validate-cluster", false, "gate: the cluster passes what 'trellis cluster validate' checks (every group's nodes Ready, critical kube-system pods Ready, the addons rolled out)")
	cmd.Flags().BoolVar(&o.CloudOnly, "cloud-only", false, "roll without Kubernetes, like kops's --cloudonly: nothing drained, and a new instance passes when its group reports it in service (a resume of such a rollout needs no flag)")
	cmd.Flags().DurationVar(&o.LockTTL, "lock-ttl", 5*time.Minute, "how long the rollout's lock outlives a run that stopped renewing it (another run takes over only after it)")
}

func newRequestCommand(s streams.Streams, verb string, status rollout.Status) *cobra.Command {
	o := &common{}
	cmd := &cobra.Command{
		Use:   verb + " -f FILE",
		Short: map[string]string{"pause": "Pause the rollout after its current step", "abort": "Stop the rollout after its current step (then --rollback if wanted)"}[verb],
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			store, _, _, err := o.store()
			if err != nil {
				return err
			}
			st, err := rollout.Request(cmd.Context(), store, status, time.Now())
			if err != nil {
				return err
			}
			if st.Status == rollout.StatusAborted {
				fmt.Fprintf(s.Out, "Rollout %s: aborted (no run holds it).\n", st.ID)
				return nil
			}
			fmt.Fprintf(s.Out, "Rollout %s: %s requested; it stops after its current step.\n", st.ID, verb)
			return nil
		},
	}
	o.add(cmd)
	return cmd
}

func newStatusCommand(s streams.Streams) *cobra.Command {
	o := &common{}
	var output string
	cmd := &cobra.Command{
		Use:   "status -f FILE [-o json]",
		Short: "Show the rollout's progress per group",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			store, _, _, err := o.store()
			if err != nil {
				return err
			}
			st, err := store.Load(cmd.Context())
			if err != nil {
				return err
			}
			if st == nil {
				return rollout.ErrNoRollout
			}
			if output == "json" {
				enc := json.NewEncoder(s.Out)
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			st.Print(s.Out)
			return nil
		},
	}
	o.add(cmd)
	flags.Output(cmd.Flags(), &output)
	return cmd
}
