// Package etcd holds `trellis etcd`: looking inside etcd snapshots.
package etcd

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/trellis-dev/trellis/cli/internal/flags"
	"github.com/trellis-dev/trellis/cli/internal/streams"
	"github.com/trellis-dev/trellis/governance/etcdanalyze"
)

// NewCommand returns `trellis etcd`.
func NewCommand(s streams.Streams) *cobra.Command {
	cmd := &cobra.Command{Use: "etcd", Short: "Inspect etcd snapshots"}
	var top int
	var folded, svg, output string
	analyze := &cobra.Command{
		Use:   "analyze SNAPSHOT.db [--top N] [--folded FILE] [--svg FILE] [-o json]",
		Short: "Where the bytes are: size and count per key space, live and in old revisions",
		Long: `Reads a snapshot (etcdctl snapshot save) with bbolt, decodes the MVCC keys and
aggregates per key space (/registry/<resource>[/<namespace>]), counting the
revisions compaction has not yet removed. --folded writes folded stacks for
flame-graph tools; --svg renders a flame graph of the keyspace.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := etcdanalyze.Analyze(args[0])
			if err != nil {
				return err
			}
			if folded != "" {
				if err := writeFile(folded, r.WriteFolded); err != nil {
					return err
				}
			}
			if svg != "" {
				if err := writeFile(svg, r.WriteSVG); err != nil {
					return err
				}
			}
			switch output {
			case "json":
				enc := json.NewEncoder(s.Out)
				enc.SetIndent("", "  ")
				return enc.Encode(r)
			case "table":
				return r.WriteTable(s.Out, top)
			default:
				return fmt.Errorf("unknown --output %q: use table or json", output)
			}
		},
	}
	analyze.Flags().IntVar(&top, "top", 30, "key spaces to list (0: all)")
	analyze.Flags().StringVar(&folded, "folded", "", "write folded stacks (key path;... bytes) to this file")
	analyze.Flags().StringVar(&svg, "svg", "", "write a flame graph of the keyspace (SVG) to this file")
	flags.Output(analyze.Flags(), &output)
	cmd.AddCommand(analyze)
	return cmd
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
