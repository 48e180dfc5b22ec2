// Package fleet holds `trellis fleet`: clusters joined under Karmada, the
// fleet bundle, placements and a local fleet on loopback.
package fleet

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/trellis-dev/trellis/bootstrap"
	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/bootstrap/render"
	"github.com/trellis-dev/trellis/bootstrap/statestore"
	"github.com/trellis-dev/trellis/cli/internal/kube"
	"github.com/trellis-dev/trellis/cli/internal/streams"
	"github.com/trellis-dev/trellis/fleet"
)

const userAgent = "trellis-fleet"

// NewCommand returns `trellis fleet`.
func NewCommand(s streams.Streams) *cobra.Command {
	cmd := &cobra.Command{Use: "fleet", Short: "Run Trellis workloads across clusters with Karmada"}
	var fleetKubeconfig string
	cmd.PersistentFlags().StringVar(&fleetKubeconfig, "fleet-kubeconfig", os.Getenv("TRELLIS_FLEET_KUBECONFIG"), "kubeconfig of the fleet's (Karmada) apiserver ($TRELLIS_FLEET_KUBECONFIG)")

	var karmadaDir, webhookURL, aggregatedHost string
	var aggregatedPort int
	var installWait time.Duration
	install := &cobra.Command{
		Use:   "install [--karmada DIR --webhook-url URL]",
		Short: "Apply the fleet bundle: the workload CRDs, an interpreter customization per kind, the not-Ready taint policy (with --karmada, Karmada's own API first)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := kube.Config(fleetKubeconfig, userAgent)
			if err != nil {
				return err
			}
			n, err := fleet.InstallAll(cmd.Context(), cfg, fleet.InstallOptions{
				KarmadaDir: karmadaDir, WebhookURL: webhookURL, AggregatedHost: aggregatedHost,
				AggregatedPort: aggregatedPort, Wait: installWait, Log: logger(s),
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(s.Out, "fleet bundle applied: %d objects\n", n)
			return nil
		},
	}
	install.Flags().StringVar(&karmadaDir, "karmada", "", "install Karmada's own API first, from DIR/manifests (the layout `make tools` caches; the fleet-install image's /karmada)")
	install.Flags().StringVar(&webhookURL, "webhook-url", "", "with --karmada: karmada-webhook's base URL, as the fleet's apiserver reaches it")
	install.Flags().StringVar(&aggregatedHost, "aggregated-host", "localhost", "with --karmada: karmada-aggregated-apiserver's host, as the fleet's apiserver reaches it")
	install.Flags().IntVar(&aggregatedPort, "aggregated-port", 7443, "with --karmada: karmada-aggregated-apiserver's port")
	install.Flags().DurationVar(&installWait, "wait", 0, "retry while the fleet's components start, up to this long")

	var file, memberKubeconfig, state, emulator, endpoint string
	var wait time.Duration
	join := &cobra.Command{
		Use:   "join -f clusters/NAME.yaml --kubeconfig MEMBER [--state STORE]",
		Short: "Join a cluster to the fleet (push mode) under its definition's name, cloud, region and zones",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := definition.Load(file)
			if err != nil {
				return err
			}
			fcfg, err := kube.Config(fleetKubeconfig, userAgent)
			if err != nil {
				return err
			}
			mcfg, err := kube.Config(memberKubeconfig, userAgent)
			if err != nil {
				return err
			}
			m := fleet.Member{Definition: l.ClusterDefinition, Config: mcfg, StateStore: state, Endpoint: endpoint}
			if state != "" {
				// The member's identity from the store it was created
				// from: the kubeconfig only lends its credentials. An
				// s3:// store is read as `cluster create` writes it.
				if err := (bootstrap.Env{Emulator: emulator, Region: l.Region}).Setup(); err != nil {
					return err
				}
				if m.StateCA, err = statestore.ClusterCA(cmd.Context(), state, render.ClusterName(l.ClusterDefinition)); err != nil {
					return err
				}
			}
			if err := fleet.Join(cmd.Context(), fcfg, m, fleet.JoinOptions{Wait: wait, Log: logger(s)}); err != nil {
				return err
			}
			fmt.Fprintf(s.Out, "%s joined the fleet\n", l.Name)
			return nil
		},
	}
	join.Flags().StringVarP(&file, "file", "f", "", "cluster definition")
	join.Flags().StringVar(&memberKubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "admin kubeconfig of the member (default $KUBECONFIG)")
	join.Flags().StringVar(&state, "state", os.Getenv("KOPS_STATE_STORE"), "kops state store the member was created from: its apiserver must present a certificate of the cluster's CA there, and the fleet trusts that CA (default $KOPS_STATE_STORE; empty: the kubeconfig's CA)")
	join.Flags().StringVar(&emulator, "aws-emulator", os.Getenv(bootstrap.EmulatorEnv), "URL of an AWS API emulator on loopback: an s3:// --state is read there (default $"+bootstrap.EmulatorEnv+")")
	join.Flags().StringVar(&endpoint, "endpoint", "", "the member apiserver's URL as the fleet's controllers reach it (default: the kubeconfig's; https://kubernetes.default.svc for the management cluster itself)")
	join.Flags().DurationVar(&wait, "wait", 2*time.Minute, "how long to wait for the member to be Ready in the fleet (0: do not wait)")
	_ = join.MarkFlagRequired("file")

	var output string
	status := &cobra.Command{
		Use:   "status [-o json]",
		Short: "The members: Ready, version, nodes, allocated and allocatable capacity, taints",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return fmt.Errorf("unknown --output %q: use table or json", output)
			}
			cfg, err := kube.Config(fleetKubeconfig, userAgent)
			if err != nil {
				return err
			}
			members, err := fleet.Status(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			if output == "json" {
				enc := json.NewEncoder(s.Out)
				enc.SetIndent("", "  ")
				return enc.Encode(members)
			}
			return fleet.PrintStatus(s.Out, members)
		},
	}
	status.Flags().StringVarP(&output, "output", "o", "table", "table or json")

	var placements string
	var dryRun bool
	place := &cobra.Command{
		Use:   "place -f placements.yaml [--dry-run]",
		Short: "Render Trellis placements into Karmada PropagationPolicies and apply them (--dry-run prints them)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ps, err := fleet.LoadPlacements(placements)
			if err != nil {
				return err
			}
			if dryRun {
				for _, p := range ps {
					if err := kube.PrintYAML(s.Out, p.PropagationPolicy()); err != nil {
						return err
					}
				}
				return nil
			}
			cfg, err := kube.Config(fleetKubeconfig, userAgent)
			if err != nil {
				return err
			}
			applied, err := fleet.Place(cmd.Context(), cfg, ps)
			for _, name := range applied {
				fmt.Fprintf(s.Out, "propagationpolicy %s applied\n", name)
			}
			return err
		},
	}
	place.Flags().StringVarP(&placements, "file", "f", "", "placements file")
	place.Flags().BoolVar(&dryRun, "dry-run", false, "print the policies instead of applying them")
	_ = place.MarkFlagRequired("file")

	cmd.AddCommand(install, join, status, place, newLocalCommand(s))
	return cmd
}

func logger(s streams.Streams) *slog.Logger {
	return slog.New(slog.NewTextHandler(s.Err, nil))
}
