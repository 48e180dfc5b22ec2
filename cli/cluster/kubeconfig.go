package cluster

import (
	"time"

	"github.com/spf13/cobra"
	"github.com/trellis-dev/trellis/bootstrap"
	"github.com/trellis-dev/trellis/cli/internal/flags"
	"github.com/trellis-dev/trellis/cli/internal/streams"
)

type kubeconfigOptions struct {
	File       string
	State      string
	Emulator   string
	Admin      time.Duration
	Kubeconfig string
}

func newKubeconfigCommand(s streams.Streams) *cobra.Command {
	o := &kubeconfigOptions{}
	cmd := &cobra.Command{
		Use:   "kubeconfig -f FILE --state URL [--admin DURATION] [--kubeconfig PATH]",
		Short: "Write a kubeconfig context for a cluster with a short-lived admin certificate",
		Long: `Writes a context named after the cluster, as 'kops export kubecfg --admin'
does: the API server's address, the cluster's CA certificates, and an admin
client certificate (organization system:masters) valid for --admin, signed
by the cluster's CA from the state store. The context becomes the current one.
Nothing secret is printed; the CA's private key never leaves the state store
and this process. Run it again when the certificate expires.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := loadAWSEnv(cmd.Context(), o.File, o.Emulator, s, "")
			if err != nil {
				return err
			}
			b, err := bootstrap.Kubeconfig(cmd.Context(), l.ClusterDefinition, bootstrap.KubeconfigOptions{StateStore: o.State, Admin: o.Admin})
			if err != nil {
				return err
			}
			return bootstrap.WriteKubeconfig(b, o.Kubeconfig, s.Out)
		},
	}
	flags.Cluster(cmd, &o.File, &o.State, &o.Emulator)
	cmd.Flags().DurationVar(&o.Admin, "admin", time.Hour, "lifetime of the admin client certificate")
	cmd.Flags().StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file to write (default $KUBECONFIG's first file, else ~/.kube/config)")
	return cmd
}
