// Package flags wires the flags many commands share (the definition file,
// the state store, the AWS emulator, the kubeconfig, the output format),
// each with its environment default, so that they read the same everywhere.
package flags

import (
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/trellis-dev/trellis/bootstrap"
)

// File is the required --file/-f.
func File(cmd *cobra.Command, p *string, usage string) {
	cmd.Flags().StringVarP(p, "file", "f", "", usage)
	_ = cmd.MarkFlagRequired("file")
}

// Cluster is the block of every command that acts on a cluster in its
// state store: the required --file/-f (its definition), --state and
// --aws-emulator.
func Cluster(cmd *cobra.Command, file, state, emulator *string) {
	File(cmd, file, "cluster definition (clusters/<name>.yaml)")
	State(cmd.Flags(), state, "kops state store: s3://bucket/prefix, file:///path or memfs://name (default $KOPS_STATE_STORE)")
	Emulator(cmd.Flags(), emulator, "URL of an AWS API emulator on loopback (moto_server, as make local-aws runs): every AWS call and the s3:// state store go there, with offline kops assets (default $"+bootstrap.EmulatorEnv+")")
}

// State is --state, default $KOPS_STATE_STORE.
func State(fs *pflag.FlagSet, p *string, usage string) {
	fs.StringVar(p, "state", os.Getenv("KOPS_STATE_STORE"), usage)
}

// Emulator is --aws-emulator, default $TRELLIS_AWS_EMULATOR.
func Emulator(fs *pflag.FlagSet, p *string, usage string) {
	fs.StringVar(p, "aws-emulator", os.Getenv(bootstrap.EmulatorEnv), usage)
}

// Kubeconfig is --kubeconfig, default $KUBECONFIG.
func Kubeconfig(fs *pflag.FlagSet, p *string, usage string) {
	fs.StringVar(p, "kubeconfig", os.Getenv("KUBECONFIG"), usage)
}

// Output is --output/-o: table (default) or json.
func Output(fs *pflag.FlagSet, p *string) {
	fs.StringVarP(p, "output", "o", "table", "table or json")
}
