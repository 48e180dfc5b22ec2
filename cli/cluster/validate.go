package cluster

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/bootstrap/health"
	"github.com/trellis-dev/trellis/cli/internal/flags"
	"github.com/trellis-dev/trellis/cli/internal/kube"
	"github.com/trellis-dev/trellis/cli/internal/streams"
)

type validateOptions struct {
	File       string
	Kubeconfig string
	Output     string
}

func newValidateCommand(s streams.Streams) *cobra.Command {
	o := &validateOptions{}
	cmd := &cobra.Command{
		Use:   "validate --kubeconfig K -f FILE [-o json]",
		Short: "Check a running cluster: nodes Ready per group, critical pods Ready, addons healthy",
		Long:  "Exits 0 when the cluster is valid and 2 when it is not.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runValidate(cmd, o, s)
		},
	}
	flags.File(cmd, &o.File, "cluster definition (clusters/<name>.yaml)")
	flags.Kubeconfig(cmd.Flags(), &o.Kubeconfig, "kubeconfig of the cluster (default $KUBECONFIG)")
	flags.Output(cmd.Flags(), &o.Output)
	return cmd
}

func runValidate(cmd *cobra.Command, o *validateOptions, s streams.Streams) error {
	if o.Output != "table" && o.Output != "json" {
		return fmt.Errorf("unknown --output %q: use table or json", o.Output)
	}
	l, err := definition.Load(o.File)
	if err != nil {
		return err
	}
	c, err := kube.Client(o.Kubeconfig, "trellis-validate")
	if err != nil {
		return err
	}
	r, err := health.Validate(cmd.Context(), c, l.ClusterDefinition)
	if err != nil {
		return err
	}
	if err := r.Write(s.Out, o.Output); err != nil {
		return err
	}
	if !r.Valid {
		return fmt.Errorf("%s: %w (%d failures)", l.Name, ErrNotValid, len(r.Failures))
	}
	return nil
}
