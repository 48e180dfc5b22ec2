package cluster

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/trellis-dev/trellis/bootstrap"
	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/cli/internal/streams"
)

type createOptions struct {
	stateFlags
	Yes    bool
	Target string
	OutDir string
}

func newCreateCommand(s streams.Streams, opts Options) *cobra.Command {
	o := &createOptions{stateFlags: newStateFlags(opts)}
	cmd := &cobra.Command{
		Use:   "create -f FILE --state URL [--yes]",
		Short: "Plan a cluster from its definition; with --yes store its kops specs and apply them",
		Long: `Validates the definition (Trellis's checks, then kops's own, strict).

Without --yes it is a plan, like 'terraform plan' or 'kops update cluster'
without --yes: it prints kops's dry-run plan and writes nothing, neither to the
state store (no spec, no key) nor to the cloud. Run the same command with --yes
to create the cluster.

With --yes it writes the kops Cluster and InstanceGroup specs and the
pod-identity root CA to the state store and applies them through kops. A failed
apply restores the state store as it was; the cloud resources it created stay
(run the command again, kops adopts them, or 'trellis cluster delete').
--target terraform --out DIR stores the specs and writes Terraform instead.

Without AWS credentials the plan validates the definition only and skips the
cloud plan.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runCreate(cmd, o, s)
		},
	}
	o.add(cmd)
	cmd.Flags().BoolVar(&o.Yes, "yes", false, "store the specs and apply the plan (default: plan only, nothing written)")
	cmd.Flags().StringVar(&o.Target, "target", string(bootstrap.TargetDirect), "direct or terraform")
	cmd.Flags().StringVar(&o.OutDir, "out", "", "output directory for --target terraform")
	return cmd
}

func runCreate(cmd *cobra.Command, o *createOptions, s streams.Streams) error {
	ctx := cmd.Context()
	l, err := loadAWS(o.File)
	if err != nil {
		return err
	}
	opts, err := o.createOptions(ctx, l.ClusterDefinition, s)
	if err != nil {
		return err
	}
	plan, err := bootstrap.Create(ctx, l.ClusterDefinition, opts)
	if errors.Is(err, bootstrap.ErrClusterExists) {
		return fmt.Errorf("%w\nTo change it to this definition, see the changes with\n  trellis cluster update -f %s --state %s\nthen apply them with --yes", err, o.File, o.State)
	}
	if err != nil {
		return err
	}
	plan.PrintCreated(s.Out, l.ClusterDefinition, opts, o.File)
	return nil
}

// createOptions turns the flags into Create's options.
func (o *createOptions) createOptions(ctx context.Context, def *definition.ClusterDefinition, s streams.Streams) (bootstrap.ApplyOptions, error) {
	opts, err := o.applyOptions(ctx, def, s, !o.Yes)
	if err != nil {
		return opts, err
	}
	switch o.Target {
	case string(bootstrap.TargetDirect):
	case string(bootstrap.TargetTerraform):
		opts.Target = bootstrap.TargetTerraform
		opts.OutDir = o.OutDir
	default:
		return opts, fmt.Errorf("unknown --target %q: use direct or terraform", o.Target)
	}
	opts.Yes = o.Yes
	return opts, nil
}
