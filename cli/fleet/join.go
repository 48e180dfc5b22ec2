package fleet

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"

	"github.com/trellis-dev/trellis/bootstrap"
	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/cli/internal/flags"
	"github.com/trellis-dev/trellis/cli/internal/kube"
	"github.com/trellis-dev/trellis/cli/internal/streams"
	"github.com/trellis-dev/trellis/fleet"
)

type joinOptions struct {
	fleetKubeconfig                                   *string
	file, memberKubeconfig, state, emulator, endpoint string
	wait                                              time.Duration
}

func newJoinCommand(s streams.Streams, fleetKubeconfig *string) *cobra.Command {
	o := &joinOptions{fleetKubeconfig: fleetKubeconfig}
	cmd := &cobra.Command{
		Use:   "join -f clusters/NAME.yaml --kubeconfig MEMBER [--state STORE]",
		Short: "Join a cluster to the fleet (push mode) under its definition's name, cloud, region and zones",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return o.run(cmd.Context(), s) },
	}
	flags.File(cmd, &o.file, "cluster definition")
	flags.Kubeconfig(cmd.Flags(), &o.memberKubeconfig, "admin kubeconfig of the member (default $KUBECONFIG)")
	flags.State(cmd.Flags(), &o.state, "kops state store the member was created from: its apiserver must present a certificate of the cluster's CA there, and the fleet trusts that CA (default $KOPS_STATE_STORE; empty: the kubeconfig's CA)")
	flags.Emulator(cmd.Flags(), &o.emulator, "URL of an AWS API emulator on loopback: an s3:// --state is read there (default $"+bootstrap.EmulatorEnv+")")
	cmd.Flags().StringVar(&o.endpoint, "endpoint", "", "the member apiserver's URL as the fleet's controllers reach it (default: the kubeconfig's; https://kubernetes.default.svc for the management cluster itself)")
	cmd.Flags().DurationVar(&o.wait, "wait", 2*time.Minute, "how long to wait for the member to be Ready in the fleet (0: do not wait)")
	return cmd
}

func (o *joinOptions) run(ctx context.Context, s streams.Streams) error {
	fcfg, m, err := o.member(ctx)
	if err != nil {
		return err
	}
	if err := fleet.Join(ctx, fcfg, m, fleet.JoinOptions{Wait: o.wait, Log: logger(s)}); err != nil {
		return err
	}
	fmt.Fprintf(s.Out, "%s joined the fleet\n", m.Definition.Name)
	return nil
}

// member turns the flags into the fleet's client config and the member to
// join.
func (o *joinOptions) member(ctx context.Context) (*rest.Config, fleet.Member, error) {
	var m fleet.Member
	l, err := definition.Load(o.file)
	if err != nil {
		return nil, m, err
	}
	fcfg, err := kube.Config(*o.fleetKubeconfig, userAgent)
	if err != nil {
		return nil, m, err
	}
	mcfg, err := kube.Config(o.memberKubeconfig, userAgent)
	if err != nil {
		return nil, m, err
	}
	m = fleet.Member{Definition: l.ClusterDefinition, Config: mcfg, StateStore: o.state, Endpoint: o.endpoint}
	if o.state != "" {
		// The member's identity from the store it was created from: the
		// kubeconfig only lends its credentials.
		if m.StateCA, err = bootstrap.StoredClusterCA(ctx, l.ClusterDefinition, o.state, o.emulator); err != nil {
			return nil, m, err
		}
	}
	return fcfg, m, nil
}
