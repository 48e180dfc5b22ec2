// Package zk holds `trellis zk`: reading ZooKeeper serversets.
package zk

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
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

type options struct {
	Servers string
	Root    string
	Watch   bool
	Out     string
}

func newServersetCommand(s streams.Streams) *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "serverset SERVICE ENV [--watch] [--out FILE]",
		Short: "List a serverset's members; --watch follows changes, --out keeps a local file (with the 50% shrink guard)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			conn, _, err := zk.Connect(strings.Split(o.Servers, ","), 10*time.Second, zk.WithLogInfo(false))
			if err != nil {
				return err
			}
			defer conn.Close()
			dir := path.Join(o.Root, args[0], args[1])
			var file *serverset.FileWriter
			if o.Out != "" {
				file = &serverset.FileWriter{Path: o.Out}
			}
			show := func(ms []serverset.Member) error {
				if file != nil {
					if err := file.Write(ms); err != nil {
						fmt.Fprintf(s.Err, "%v\n", err)
						return err
					}
				}
				b, err := json.Marshal(ms)
				if err != nil {
					return err
				}
				fmt.Fprintln(s.Out, string(b))
				return nil
			}
			if !o.Watch {
				ms, err := serverset.Read(conn, dir)
				if err != nil {
					return err
				}
				return show(ms)
			}
			return serverset.Watch(cmd.Context(), conn, dir, show)
		},
	}
	cmd.Flags().StringVar(&o.Servers, "zookeeper", "127.0.0.1:2181", "comma-separated ZooKeeper ensemble")
	cmd.Flags().StringVar(&o.Root, "root", "/discovery", "znode under which serversets live")
	cmd.Flags().BoolVar(&o.Watch, "watch", false, "print the members again on every change")
	cmd.Flags().StringVar(&o.Out, "out", "", "keep the members in this file, written atomically")
	return cmd
}
