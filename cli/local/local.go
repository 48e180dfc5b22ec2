// Package local holds `trellis local`: a kind cluster with the production
// wiring, built offline.
package local

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/cli/internal/streams"
	"github.com/trellis-dev/trellis/gateway/client"
	"github.com/trellis-dev/trellis/internal/versions"
	trellislocal "github.com/trellis-dev/trellis/local"
	"github.com/trellis-dev/trellis/local/kindcluster"
	"github.com/trellis-dev/trellis/local/nodeimage"
)

// imageFlags are the inputs of the node image.
type imageFlags struct {
	cache, kubeBin, coredns, pause string
}

func (f *imageFlags) register(cmd *cobra.Command) {
	cache := os.Getenv("TRELLIS_CACHE")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache", "trellis")
	}
	self, _ := os.Executable()
	cmd.Flags().StringVar(&f.cache, "cache", cache, "cache directory (the debootstrap rootfs; $TRELLIS_CACHE)")
	cmd.Flags().StringVar(&f.kubeBin, "kube-bin", filepath.Join(cache, "k8s", versions.Kubernetes), "Kubernetes and etcd binaries (`make tools`)")
	cmd.Flags().StringVar(&f.coredns, "coredns", filepath.Join(cache, "coredns", versions.CoreDNS, "coredns"), "static coredns binary (hack/build-coredns.sh)")
	cmd.Flags().StringVar(&f.pause, "pause", filepath.Join(filepath.Dir(self), "trellis-pause"), "static pause binary (cmd/trellis-pause)")
}

func (f *imageFlags) options(log *slog.Logger) nodeimage.Options {
	return nodeimage.Options{
		KubernetesVersion: versions.Kubernetes, KubeBin: f.kubeBin, EtcdVersion: versions.Etcd,
		CoreDNS: f.coredns, CoreDNSVersion: versions.CoreDNS, Pause: f.pause, Cache: f.cache, Log: log,
	}
}

// NewCommand returns `trellis local`.
func NewCommand(s streams.Streams) *cobra.Command {
	cmd := &cobra.Command{Use: "local", Short: "A local kind cluster with the production wiring"}
	var img imageFlags
	nodeImage := &cobra.Command{
		Use:   "node-image",
		Short: "Assemble the kind node image offline (debootstrap, Kubernetes from modules, kubeadm's images); cached by content",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			name, err := nodeimage.Build(cmd.Context(), img.options(logger(s)))
			if err != nil {
				return err
			}
			fmt.Fprintln(s.Out, name)
			return nil
		},
	}
	img.register(nodeImage)

	var up upOptions
	upCmd := &cobra.Command{
		Use:   "up -f clusters/local.yaml",
		Short: "Create (or reuse) the kind cluster of a local definition, load the Trellis images and apply the addon bundle",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			up.image = img
			return runUp(cmd.Context(), s, up)
		},
	}
	img.register(upCmd)
	clusterFlags(upCmd, &up.file, &up.kubeconfig, "where to write the cluster's kubeconfig")
	upCmd.Flags().StringVar(&up.bin, "bin", "", "directory of the static Trellis binaries (default: beside this trellis)")
	upCmd.Flags().BoolVar(&up.recreate, "recreate", false, "delete an existing cluster of that name first")
	upCmd.Flags().BoolVar(&up.retain, "retain", false, "keep the nodes of a failed create, to debug it")
	upCmd.Flags().DurationVar(&up.wait, "wait", 5*time.Minute, "how long each addon may take to become ready")
	upCmd.Flags().BoolVar(&up.fleet, "fleet", false, "make it the fleet's management cluster too: Karmada's addons (karmada-apiserver, karmada); up without --fleet removes them")
	upCmd.Flags().StringVar(&up.gatewayContext, "gateway-context", client.DefaultContextPath(), "where to write the context file of trellis submit/workloads (empty: none)")
	upCmd.Flags().StringVar(&up.fleetKubeconfig, "fleet-kubeconfig", "", "with --fleet, where to write the fleet's kubeconfig (default: beside --kubeconfig)")

	var file, kubeconfig string
	down := &cobra.Command{
		Use:   "down -f clusters/local.yaml",
		Short: "Delete the kind cluster of a local definition",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := definition.Load(file)
			if err != nil {
				return err
			}
			return kindcluster.New(l.ClusterDefinition.Name, kubeconfig, logger(s)).Delete()
		},
	}
	clusterFlags(down, &file, &kubeconfig, "the cluster's kubeconfig (its entry is removed)")

	load := &cobra.Command{
		Use:   "load -f clusters/local.yaml IMAGE...",
		Short: "Load Docker images into every node of the local cluster",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := definition.Load(file)
			if err != nil {
				return err
			}
			_, err = kindcluster.New(l.ClusterDefinition.Name, kubeconfig, logger(s)).Load(cmd.Context(), args)
			return err
		},
	}
	clusterFlags(load, &file, &kubeconfig, "the cluster's kubeconfig")
	cmd.AddCommand(nodeImage, upCmd, down, load, newAWSCommand(s))
	return cmd
}

// clusterFlags are the flags naming a local cluster: its definition
// (-f, default clusters/local.yaml) and its kubeconfig.
func clusterFlags(c *cobra.Command, file, kubeconfig *string, kubeconfigUsage string) {
	c.Flags().StringVarP(file, "file", "f", "clusters/local.yaml", "local cluster definition (cloud: kind)")
	c.Flags().StringVar(kubeconfig, "kubeconfig", defaultKubeconfig(), kubeconfigUsage)
}

func defaultKubeconfig() string {
	if k := os.Getenv("KUBECONFIG"); k != "" && !strings.Contains(k, string(os.PathListSeparator)) {
		return k
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".kube", "config")
}

type upOptions struct {
	image                 imageFlags
	file, kubeconfig, bin string
	recreate, retain      bool
	wait                  time.Duration
	fleet                 bool
	fleetKubeconfig       string
	gatewayContext        string
}

func runUp(ctx context.Context, s streams.Streams, o upOptions) error {
	l, err := definition.Load(o.file)
	if err != nil {
		return err
	}
	log := logger(s)
	res, err := trellislocal.Up(ctx, l.ClusterDefinition, trellislocal.Options{
		Kubeconfig: o.kubeconfig, Bin: o.bin, Image: o.image.options(log),
		Recreate: o.recreate, Retain: o.retain, Wait: o.wait, Log: log, Out: s.Out,
		Progress: s.Out, Fleet: o.fleet, FleetKubeconfig: o.fleetKubeconfig,
		GatewayContext: o.gatewayContext,
	})
	if err != nil {
		return err
	}
	var took time.Duration
	for _, st := range res.Steps {
		took += st.Duration
	}
	fmt.Fprintf(s.Out, "\nLocal cluster %s is up in %s, wired like production.\n", res.Cluster, took.Round(time.Second))
	fmt.Fprintf(s.Out, "  export KUBECONFIG=%s\n  kubectl get nodes -o wide\n  kubectl apply -f config/samples/\n  kubectl get trellisservices\n", res.Kubeconfig)
	if res.FleetKubeconfig != "" {
		fmt.Fprintf(s.Out, "The fleet's control plane (Karmada) runs in it:\n  kubectl -n trellis-system port-forward svc/karmada-apiserver 5443 &\n  trellis fleet status --fleet-kubeconfig %s\n", res.FleetKubeconfig)
	}
	if res.Gateway != nil {
		printGateway(s.Out, *res.Gateway)
	}
	if res.Console != nil {
		printConsole(s.Out, *res.Console)
	}
	fmt.Fprintf(s.Out, "Delete it with: trellis local down -f %s\n", o.file)
	return nil
}

func logger(s streams.Streams) *slog.Logger {
	return slog.New(slog.NewTextHandler(s.Err, nil))
}
