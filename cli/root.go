// Package cli is the trellis command tree: cobra commands that parse flags
// and call the libraries under bootstrap/ and friends.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	addonscmd "github.com/trellis-dev/trellis/cli/addons"
	"github.com/trellis-dev/trellis/cli/ami"
	"github.com/trellis-dev/trellis/cli/cluster"
	etcdcmd "github.com/trellis-dev/trellis/cli/etcd"
	fleetcmd "github.com/trellis-dev/trellis/cli/fleet"
	"github.com/trellis-dev/trellis/cli/internal/streams"
	localcmd "github.com/trellis-dev/trellis/cli/local"
	quotacmd "github.com/trellis-dev/trellis/cli/quota"
	"github.com/trellis-dev/trellis/cli/submit"
	"github.com/trellis-dev/trellis/cli/workloads"
	zkcmd "github.com/trellis-dev/trellis/cli/zk"
	"github.com/trellis-dev/trellis/internal/logs"
)

// Streams are the command's standard streams.
type Streams = streams.Streams

// Exit codes.
const (
	ExitOK      = 0
	ExitFailed  = 1
	ExitInvalid = 2
)

// Options are what a process wires into the command tree beyond its
// streams (the product binary: none).
type Options struct {
	Cluster cluster.Options
}

// NewCommand returns the root command.
func NewCommand(s Streams, o Options) *cobra.Command {
	var verbosity int
	cmd := &cobra.Command{
		Use:           "trellis",
		Short:         "Bootstrap Kubernetes clusters with kops and wire the Trellis runtime into them",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return logs.Setup(verbosity, s.Err)
		},
	}
	cmd.SetIn(s.In)
	cmd.SetOut(s.Out)
	cmd.SetErr(s.Err)
	cmd.PersistentFlags().IntVarP(&verbosity, "v", "v", 0, "log verbosity (kops and client logs appear from 1)")
	cmd.AddCommand(cluster.NewCommand(s, o.Cluster), ami.NewCommand(s), addonscmd.NewCommand(s), etcdcmd.NewCommand(s), quotacmd.NewCommand(s), zkcmd.NewCommand(s), localcmd.NewCommand(s), fleetcmd.NewCommand(s), submit.NewCommand(s), workloads.NewCommand(s))
	return cmd
}

// Main runs the command line and returns the process exit code.
func Main(ctx context.Context, args []string, s Streams) int {
	return MainWith(ctx, args, s, Options{})
}

// MainWith is Main with what a test build wires in (a fake cloud).
func MainWith(ctx context.Context, args []string, s Streams, o Options) int {
	cmd := NewCommand(s, o)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	printError(s.Err, err)
	if errors.Is(err, cluster.ErrNotValid) {
		return ExitInvalid
	}
	return ExitFailed
}

func printError(w io.Writer, err error) {
	fmt.Fprintf(w, "Error: %v\n", err)
}
