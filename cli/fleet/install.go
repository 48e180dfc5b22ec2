package fleet

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/trellis-dev/trellis/cli/internal/kube"
	"github.com/trellis-dev/trellis/cli/internal/streams"
	"github.com/trellis-dev/trellis/fleet"
)

type installOptions struct {
	fleetKubeconfig *string
	fleet.InstallOptions
}

func newInstallCommand(s streams.Streams, fleetKubeconfig *string) *cobra.Command {
	o := &installOptions{fleetKubeconfig: fleetKubeconfig}
	cmd := &cobra.Command{
		Use:   "install [--karmada DIR --webhook-url URL]",
		Short: "Apply the fleet bundle: the workload CRDs, an interpreter customization per kind, the not-Ready taint policy (with --karmada, Karmada's own API first)",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return o.run(cmd.Context(), s) },
	}
	cmd.Flags().StringVar(&o.KarmadaDir, "karmada", "", "install Karmada's own API first, from DIR/manifests (the layout `make tools` caches; the fleet-install image's /karmada)")
	cmd.Flags().StringVar(&o.WebhookURL, "webhook-url", "", "with --karmada: karmada-webhook's base URL, as the fleet's apiserver reaches it")
	cmd.Flags().StringVar(&o.AggregatedHost, "aggregated-host", "localhost", "with --karmada: karmada-aggregated-apiserver's host, as the fleet's apiserver reaches it")
	cmd.Flags().IntVar(&o.AggregatedPort, "aggregated-port", 7443, "with --karmada: karmada-aggregated-apiserver's port")
	cmd.Flags().DurationVar(&o.Wait, "wait", 0, "retry while the fleet's components start, up to this long")
	return cmd
}

func (o *installOptions) run(ctx context.Context, s streams.Streams) error {
	cfg, err := kube.Config(*o.fleetKubeconfig, userAgent)
	if err != nil {
		return err
	}
	io := o.InstallOptions
	io.Log = logger(s)
	n, err := fleet.InstallAll(ctx, cfg, io)
	if err != nil {
		return err
	}
	fmt.Fprintf(s.Out, "fleet bundle applied: %d objects\n", n)
	return nil
}
