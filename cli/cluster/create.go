package cluster

import (
	"fmt"

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
		Short: "Validate a definition, store its kops specs and apply them",
		Long: `Validates the definition (Trellis's checks, then kops's own, strict), writes the
kops Cluster and InstanceGroup specs to the state store, and applies them
through kops. Without --yes it prints the dry-run plan and changes no cloud
resource; --target terraform --out DIR writes Terraform instead. Any failure
before the cloud is touched leaves the state store as it was.

Without AWS credentials (and without --fake-aws) the specs are stored and the
cloud plan is skipped: run 'trellis cluster diff' once credentials are there.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runCreate(cmd, o, s)
		},
	}
	o.add(cmd)
	cmd.Flags().BoolVar(&o.Yes, "yes", false, "apply the plan (default: dry run)")
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
	if err != nil {
		return err
	}
	name := render.ClusterName(l.ClusterDefinition)
	fmt.Fprintf(s.Out, "Stored cluster %s in %s.\n", name, o.State)
	switch {
	case opts.SpecsOnly:
		fmt.Fprintf(s.Out, "Cloud plan skipped. Run `trellis cluster diff -f %s --state %s` with AWS credentials to see it.\n", o.File, o.State)
	case plan.Target == bootstrap.TargetDryRun && plan.Changes:
		fmt.Fprintln(s.Out, "Dry run: pass --yes to apply these changes.")
	case plan.Target == bootstrap.TargetDryRun:
		fmt.Fprintln(s.Out, "Dry run: no cloud changes.")
	case plan.Target == bootstrap.TargetTerraform:
		fmt.Fprintln(s.Out, "Terraform written.")
	default:
		fmt.Fprintf(s.Out, "Cluster %s applied.\n", name)
	}
	return nil
}
