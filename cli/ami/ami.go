// Package ami holds `trellis ami`: rolling every node of instance groups
// onto a new machine image.
package ami

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kops/upup/pkg/fi/cloudup/awsup"

	"github.com/trellis-dev/trellis/bootstrap"
	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/bootstrap/health"
	"github.com/trellis-dev/trellis/bootstrap/render"
	"github.com/trellis-dev/trellis/bootstrap/rollout"
	"github.com/trellis-dev/trellis/bootstrap/statestore"
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
	cmd.Flags().StringVarP(&c.File, "file", "f", "", "cluster definition (clusters/<name>.yaml)")
	cmd.Flags().StringVar(&c.State, "state", os.Getenv("KOPS_STATE_STORE"), "kops state store (default $KOPS_STATE_STORE)")
	cmd.Flags().StringVar(&c.Emulator, "aws-emulator", os.Getenv(bootstrap.EmulatorEnv), "URL of an AWS API emulator on loopback: every AWS call and the s3:// state store go there (default $"+bootstrap.EmulatorEnv+")")
	_ = cmd.MarkFlagRequired("file")
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
	Yes            bool
	Image          string
	Groups         []string
	MaxSurge       int
	MaxUnavailable int
	DrainGrace     int
	HTTPChecks     []string
	CommandChecks  []string
	CheckTimeout   time.Duration
	Validate       bool
	LockTTL        time.Duration
	Canary         bool
	PauseCanary    bool
	Budget         int
	GateTimeout    time.Duration
	DrainTimeout   time.Duration
	BakeTime       time.Duration
	Kubeconfig     string
	Rollback       bool
	CloudOnly      bool
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
	cmd.Flags().StringSliceVar(&o.Groups, "groups", nil, "instance groups to roll (default: every node group)")
	cmd.Flags().BoolVar(&o.Yes, "yes", false, "run the rollout (default: print the plan)")
	cmd.Flags().IntVar(&o.MaxSurge, "max-surge", -1, "new nodes per batch per group (default: the group's maxSurge, else 10% of its minimum size)")
	cmd.Flags().IntVar(&o.MaxUnavailable, "max-unavailable", -1, "old nodes replaced in place per batch when max-surge is 0 (default: the group's maxUnavailable)")
	cmd.Flags().BoolVar(&o.Canary, "canary", true, "start each group with a one-node batch")
	cmd.Flags().BoolVar(&o.PauseCanary, "pause-after-canary", false, "pause for a human after each group's canary (resume with `trellis ami resume`)")
	cmd.Flags().IntVar(&o.Budget, "budget", 0, "new nodes surged at once across all groups (default: the sum of the groups' surges)")
	cmd.Flags().DurationVar(&o.BakeTime, "bake-time", 0, "wait after each batch")
	o.addRunFlags(cmd)
	cmd.Flags().BoolVar(&o.Rollback, "rollback", false, "roll back onto the previous image of the last rollout")
	return cmd
}

func runRollout(ctx context.Context, o *rolloutOptions, s streams.Streams) error {
	store, def, name, err := o.store()
	if err != nil {
		return err
	}
	resume := o.Image == "" && !o.Rollback
	var prev *rollout.State
	if o.Rollback {
		if prev, err = rollbackTarget(ctx, store, o); err != nil {
			return err
		}
	}
	groups, err := bootstrap.Strategies(def, bootstrap.StrategyOverrides{Groups: o.Groups, MaxSurge: o.MaxSurge, MaxUnavailable: o.MaxUnavailable,
		Canary: o.Canary, PauseAfterCanary: o.PauseCanary, BakeTime: o.BakeTime})
	if err != nil {
		return fmt.Errorf("%s: %w", o.File, err)
	}
	cloudOnly, err := o.cloudOnly(ctx, store, resume)
	if err != nil {
		return err
	}
	for g, st := range groups {
		st.CloudOnly = cloudOnly
		groups[g] = st
	}
	cloud, err := awsup.NewAWSCloud(def.Region, map[string]string{awsup.TagClusterName: name})
	if err != nil {
		return fmt.Errorf("failed to reach AWS: %w", err)
	}
	cs, err := statestore.Open(ctx, o.State)
	if err != nil {
		return err
	}
	awsCloud := &rollout.AWSCloud{AWS: cloud, Cluster: name, Clientset: cs}
	if o.Image != "" {
		img, err := cloud.ResolveImage(o.Image)
		if err != nil {
			return fmt.Errorf("failed to resolve image %q: %w", o.Image, err)
		}
		if err := bootstrap.CheckImageArchitecture(def, slices.Collect(maps.Keys(groups)), o.Image, string(img.Architecture)); err != nil {
			return fmt.Errorf("%s: %w", o.File, err)
		}
	}
	opts := rollout.Options{
		Image: o.Image, Groups: groups, Budget: o.Budget, GateTimeout: o.GateTimeout, Drain: rollout.DrainOptions{Timeout: o.DrainTimeout}, LockTTL: o.LockTTL,
		Progress: s.Out,
	}
	if o.DrainGrace >= 0 {
		opts.Drain.GracePeriod = new(int64(o.DrainGrace))
	}
	if !o.Yes && !resume {
		var pdbs rollout.Constraints
		if o.Kubeconfig != "" {
			kc, err := kube.Client(o.Kubeconfig, "trellis-ami-rollout")
			if err != nil {
				return err
			}
			if pdbs, err = rollout.NewKubeCluster(ctx, kc); err != nil {
				return err
			}
		}
		plan, err := rollout.MakePlan(ctx, awsCloud, pdbs, opts)
		if err != nil {
			return err
		}
		plan.Print(s.Out)
		fmt.Fprintln(s.Out, "Nothing changed. Pass --yes to start the rollout.")
		return nil
	}
	if prev != nil {
		// A finished state makes room for the rollback rollout.
		prev.Status = rollout.StatusDone
		if err := store.Save(ctx, prev); err != nil {
			return err
		}
		fmt.Fprintf(s.Out, "Rolling %s back onto %s\n", strings.Join(o.Groups, ", "), o.Image)
	}
	var cluster rollout.Cluster
	if !cloudOnly {
		kc, err := kube.Client(o.Kubeconfig, "trellis-ami-rollout")
		if err != nil {
			return err
		}
		if cluster, err = rollout.NewKubeCluster(ctx, kc); err != nil {
			return err
		}
		opts.Checks = o.checks(kc, def)
	}
	host, _ := os.Hostname()
	opts.Owner = fmt.Sprintf("%s/%d", host, os.Getpid())
	st, err := rollout.New(awsCloud, cluster, store, opts, nil).Start(ctx, name)
	if st != nil {
		st.Print(s.Out)
	}
	return err
}

// cloudOnly says whether this run rolls without Kubernetes: --cloud-only,
// or resuming a rollout whose groups all roll cloud-only. Gates that look at
// nodes cannot go with it.
func (o *rolloutOptions) cloudOnly(ctx context.Context, store *rollout.VFSStore, resume bool) (bool, error) {
	only := o.CloudOnly
	if resume && !only {
		st, err := store.Load(ctx)
		if err != nil {
			return false, err
		}
		if st != nil && len(st.Groups) > 0 {
			only = true
			for _, g := range st.Groups {
				only = only && (g.Strategy.CloudOnly || g.Done)
			}
		}
	}
	if only && (len(o.HTTPChecks) > 0 || len(o.CommandChecks) > 0 || o.Validate) {
		return false, errors.New("--check-http, --check-command and --validate-cluster gate on nodes: a cloud-only rollout has none")
	}
	return only, nil
}

// rollbackTarget sets o's image and groups to the previous image of the
// last rollout, which must have stopped.
func rollbackTarget(ctx context.Context, store *rollout.VFSStore, o *rolloutOptions) (*rollout.State, error) {
	prev, err := store.Load(ctx)
	if err != nil {
		return nil, err
	}
	if prev == nil {
		return nil, rollout.ErrNoRollout
	}
	if prev.Status == rollout.StatusRunning || prev.Status == rollout.StatusAborting {
		return nil, fmt.Errorf("rollout %s is %s: abort it and let it stop first", prev.ID, prev.Status)
	}
	if prev.Image == "" {
		return nil, fmt.Errorf("rollout %s (%s) changed no image: there is no image to roll back to", prev.ID, prev.Reason)
	}
	o.Image, o.Groups = "", nil
	for _, g := range prev.GroupNames() {
		p := prev.Groups[g]
		if p.PrevImage == "" {
			continue
		}
		if o.Image != "" && o.Image != p.PrevImage {
			return nil, fmt.Errorf("groups came from different images (%s, %s): roll them back one at a time with --groups", o.Image, p.PrevImage)
		}
		o.Image = p.PrevImage
		o.Groups = append(o.Groups, g)
	}
	if o.Image == "" {
		return nil, errors.New("the last rollout recorded no previous image")
	}
	return prev, nil
}

// validateCheck is `trellis cluster validate` as a gate.
func validateCheck(kc kubernetes.Interface, def *definition.ClusterDefinition) rollout.Check {
	return func(ctx context.Context, _ *corev1.Node) error {
		res, err := health.Validate(ctx, kc, def)
		if err != nil {
			return fmt.Errorf("cluster validation: %w", err)
		}
		if !res.Valid {
			f := res.Failures[0]
			return fmt.Errorf("cluster validation: %s %s: %s (%d failures)", f.Kind, f.Name, f.Message, len(res.Failures))
		}
		return nil
	}
}

// checks are the custom gates the flags ask for.
func (o *rolloutOptions) checks(kc kubernetes.Interface, def *definition.ClusterDefinition) []rollout.Check {
	var out []rollout.Check
	for _, u := range o.HTTPChecks {
		out = append(out, rollout.HTTPCheck(u, o.CheckTimeout))
	}
	for _, c := range o.CommandChecks {
		out = append(out, rollout.CommandCheck(c, o.CheckTimeout))
	}
	if o.Validate {
		out = append(out, validateCheck(kc, def))
	}
	return out
}

func newResumeCommand(s streams.Streams) *cobra.Command {
	o := &rolloutOptions{}
	cmd := &cobra.Command{
		Use:   "resume -f FILE",
		Short: "Resume a paused or interrupted rollout",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Image = "" // resume what the state store holds
			o.MaxSurge, o.MaxUnavailable = -1, -1
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
	cmd.Flags().StringVar(&o.Kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster")
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
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	return cmd
}
