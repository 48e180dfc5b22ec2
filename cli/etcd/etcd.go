// Package etcd holds `trellis etcd`: looking inside etcd snapshots.
package etcd

import (
	"github.com/spf13/cobra"

	"github.com/trellis-dev/trellis/cli/internal/flags"
	"github.com/trellis-dev/trellis/cli/internal/streams"
	"github.com/trellis-dev/trellis/governance/etcdanalyze"
)

// NewCommand returns `trellis etcd`.
func NewCommand(s streams.Streams) *cobra.Command {
	cmd := &cobra.Command{Use: "etcd", Short: "Inspect etcd snapshots"}
	o := &etcdanalyze.RunOptions{}
	analyze := &cobra.Command{
		Use:   "analyze SNAPSHOT.db [--top N] [--folded FILE] [--svg FILE] [-o json]",
		Short: "Where the bytes are: size and count per key space, live and in old revisions",
		Long: `Reads a snapshot (etcdctl snapshot save) with bbolt, decodes the MVCC keys and
aggregates per key space (/registry/<resource>[/<namespace>]), counting the
revisions compaction has not yet removed. --folded writes folded stacks for
flame-graph tools; --svg renders a flame graph of the keyspace.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return etcdanalyze.Run(args[0], *o, s.Out)
		},
	}
	analyze.Flags().IntVar(&o.Top, "top", 30, "key spaces to list (0: all)")
	analyze.Flags().StringVar(&o.Folded, "folded", "", "write folded stacks (key path;... bytes) to this file")
	analyze.Flags().StringVar(&o.SVG, "svg", "", "write a flame graph of the keyspace (SVG) to this file")
	flags.Output(analyze.Flags(), &o.Output)
	cmd.AddCommand(analyze)
	return cmd
}
