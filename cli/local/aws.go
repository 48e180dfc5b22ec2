package local

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/trellis-dev/trellis/awsloop"
	"github.com/trellis-dev/trellis/awsloop/nodeprovider"
	"github.com/trellis-dev/trellis/bootstrap"
	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/cli/internal/streams"
	"github.com/trellis-dev/trellis/internal/awsemu"
)

// newAWSCommand returns `trellis local aws`.
func newAWSCommand(s streams.Streams) *cobra.Command {
	var o awsloop.Options
	var file string
	home, _ := os.UserHomeDir()
	cmd := &cobra.Command{
		Use:   "aws -f clusters/local-aws.yaml",
		Short: "The production path locally: the AWS API emulator, the cluster created in it, its instances as kind nodes (runs until interrupted)",
		Long: `Needs the local kind cluster (` + "`trellis local up`" + `). Starts moto on loopback,
registers the kind node image as an AMI behind the definition's ssm: images,
runs ` + "`cluster create --yes`" + ` against the emulator, and then keeps every running
instance of the cluster's node groups a kind node of the local cluster (kubeadm
join, providerID aws:///zone/instance-id, the group's labels and taints), removing
the nodes of terminated instances. Run cluster and ami commands from another
shell after sourcing --env-file. Everything in the emulator goes when this stops.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := definition.Load(file)
			if err != nil {
				return err
			}
			if l.Cloud != definition.CloudAWS {
				return fmt.Errorf("%s: cloud %q; `local aws` takes an AWS definition (clusters/local-aws.yaml)", file, l.Cloud)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			o.Out, o.Log = s.Out, logger(s)
			return awsloop.Up(ctx, l.ClusterDefinition, o)
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "clusters/local-aws.yaml", "AWS cluster definition whose images are ssm: parameters")
	cmd.Flags().StringVar(&o.Kind, "kind-cluster", "trellis-local", "the local kind cluster the instances join")
	cmd.Flags().StringVar(&o.Kubeconfig, "kubeconfig", defaultKubeconfig(), "kubeconfig of the kind cluster")
	cmd.Flags().StringVar(&o.StateStore, "state", "s3://trellis-state/clusters", "kops state store in the emulator's S3")
	cmd.Flags().IntVar(&o.Port, "port", 4566, "emulator port on 127.0.0.1")
	cmd.Flags().StringVar(&o.EnvFile, "env-file", filepath.Join(home, ".cache", "trellis", "local-aws.env"), "where to write the environment for other shells")
	cmd.Flags().StringVar(&o.NodeLogs, "node-logs", filepath.Join(home, ".cache", "trellis", "local-aws", "node-logs"), "host directory keeping each instance node's shipped logs (/var/log/trellis) under its instance id, after the node is gone; emptied at start")
	cmd.AddCommand(newAWSImageCommand(s))
	return cmd
}

// newAWSImageCommand returns `trellis local aws image NAME`.
func newAWSImageCommand(s streams.Streams) *cobra.Command {
	var kind, region string
	cmd := &cobra.Command{
		Use:   "image NAME",
		Short: "Register a new node image (the kind node image with a marker file naming it) as an AMI in the running emulator; prints the AMI id",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			url := os.Getenv(bootstrap.EmulatorEnv)
			if url == "" {
				return fmt.Errorf("$%s is not set: source the env file `trellis local aws` wrote", bootstrap.EmulatorEnv)
			}
			if err := bootstrap.CheckEmulator(url); err != nil {
				return err
			}
			return registerImage(cmd.Context(), s, url, region, kind, args[0])
		},
	}
	cmd.Flags().StringVar(&kind, "kind-cluster", "trellis-local", "the local kind cluster whose node image is the base")
	cmd.Flags().StringVar(&region, "region", "us-east-1", "the definition's region")
	return cmd
}

func registerImage(ctx context.Context, s streams.Streams, url, region, kind, name string) error {
	base, err := nodeprovider.KindNodeImage(ctx, kind)
	if err != nil {
		return err
	}
	ami, _, err := nodeprovider.RegisterNodeImage(ctx, awsemu.NewClients(url, region).EC2, base, name)
	if err != nil {
		return err
	}
	fmt.Fprintln(s.Out, ami)
	return nil
}
