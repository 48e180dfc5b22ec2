package cluster

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/trellis-dev/trellis/bootstrap"
	"github.com/trellis-dev/trellis/bootstrap/render"
	"github.com/trellis-dev/trellis/cli/internal/streams"
)

type createOptions struct {
	stateFlags
	Yes    bool
	Target string
	OutDir string
}

func newCreateCommand(s streams.Streams) *cobra.Command {
	o := &createOptions{}
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

Without AWS credentials (and without --fake-aws) the plan validates the
definition only and skips the cloud plan.`,
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
	opts, err := o.applyOptions(ctx, l.ClusterDefinition, s, !o.Yes)
	if err != nil {
		return err
	}
	switch o.Target {
	case string(bootstrap.TargetDirect):
	case string(bootstrap.TargetTerraform):
		opts.Target = bootstrap.TargetTerraform
		opts.OutDir = o.OutDir
	default:
		return fmt.Errorf("unknown --target %q: use direct or terraform", o.Target)
	}
	opts.Yes = o.Yes
	plan, err := bootstrap.Create(ctx, l.ClusterDefinition, opts)
	if errors.Is(err, bootstrap.ErrClusterExists) {
		return fmt.Errorf("%w\nTo change it to this definition, see the changes with\n  trellis cluster update -f %s --state %s\nthen apply them with --yes", err, o.File, o.State)
	}
	if err != nil {
		return err
	}
	name := render.ClusterName(l.ClusterDefinition)
	next := fmt.Sprintf("trellis cluster create -f %s --state %s --yes", o.File, o.State)
	switch {
	case opts.SpecsOnly:
		fmt.Fprintf(s.Out, "Validated %s; cloud plan skipped (no AWS credentials). Nothing was written.\nWith credentials, run `%s` to see the plan.\n", name,
			strings.TrimSuffix(next, " --yes"))
	case plan.Target == bootstrap.TargetDryRun:
		fmt.Fprintf(s.Out, "Plan only: nothing was written to the state store or the cloud.\nTo create %s, run:\n  %s\n", name, next)
	case plan.Target == bootstrap.TargetTerraform:
		fmt.Fprintf(s.Out, "Stored cluster %s in %s.\nTerraform written.\n", name, o.State)
	default:
		fmt.Fprintf(s.Out, "Stored cluster %s in %s.\nCluster %s applied.\nNext: `trellis cluster kubeconfig -f %s --admin 1h` for a kubeconfig.\n", name, o.State, name, o.File)
	}
	return nil
}
