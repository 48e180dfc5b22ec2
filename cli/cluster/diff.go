package cluster

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/trellis-dev/trellis/bootstrap"
	"github.com/trellis-dev/trellis/cli/internal/streams"
)

func newDiffCommand(s streams.Streams, opts Options) *cobra.Command {
	f := newStateFlags(opts)
	o := &f
	cmd := &cobra.Command{
		Use:   "diff -f FILE --state URL",
		Short: "Show field-level spec changes between a definition and the stored cluster, and the cloud plan",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := loadAWS(o.File)
			if err != nil {
				return err
			}
			opts, err := o.applyOptions(cmd.Context(), l.ClusterDefinition, s, false)
			if err != nil {
				return err
			}
			res, err := bootstrap.Diff(cmd.Context(), l.ClusterDefinition, opts)
			if err != nil {
				return err
			}
			bootstrap.PrintChanges(s.Out, res.Changes)
			if res.Plan.Changes {
				fmt.Fprintln(s.Out, "Cloud: changes planned (above).")
			} else {
				fmt.Fprintln(s.Out, "Cloud: no changes.")
			}
			return nil
		},
	}
	o.add(cmd)
	return cmd
}
