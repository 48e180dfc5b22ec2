// Package zk holds `trellis zk`: reading ZooKeeper serversets.
package zk

import (
	"github.com/spf13/cobra"

	"github.com/trellis-dev/trellis/cli/internal/streams"
	"github.com/trellis-dev/trellis/internal/serverset"
)

// NewCommand returns `trellis zk`.
func NewCommand(s streams.Streams) *cobra.Command {
	cmd := &cobra.Command{Use: "zk", Short: "Read ZooKeeper serversets"}
	cmd.AddCommand(newServersetCommand(s))
	return cmd
}

func newServersetCommand(s streams.Streams) *cobra.Command {
	o := &serverset.PrintOptions{}
	cmd := &cobra.Command{
		Use:   "serverset SERVICE ENV [--watch] [--out FILE]",
		Short: "List a serverset's members; --watch follows changes, --out keeps a local file (with the 50% shrink guard)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Service, o.Env = args[0], args[1]
			return serverset.Print(cmd.Context(), *o, s.Out, s.Err)
		},
	}
	cmd.Flags().StringVar(&o.Servers, "zookeeper", "127.0.0.1:2181", "comma-separated ZooKeeper ensemble")
	cmd.Flags().StringVar(&o.Root, "root", "/discovery", "znode under which serversets live")
	cmd.Flags().BoolVar(&o.Watch, "watch", false, "print the members again on every change")
	cmd.Flags().StringVar(&o.Out, "out", "", "keep the members in this file, written atomically")
	return cmd
}
