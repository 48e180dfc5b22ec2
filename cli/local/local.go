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

	"github.com/trellis-dev/trellis/addons"
	"github.com/trellis-dev/trellis/bootstrap/definition"
	addonscmd "github.com/trellis-dev/trellis/cli/addons"
	"github.com/trellis-dev/trellis/cli/internal/streams"
	"github.com/trellis-dev/trellis/local/kindcluster"
	"github.com/trellis-dev/trellis/local/nodeimage"
)

// Versions of what a local node runs, aligned with `make tools`.
const (
	KubernetesVersion = "v1.36.3"
	EtcdVersion       = "v3.6.10"
	CoreDNSVersion    = "v1.14.2"
)

// SampleImage is the image of config/samples' workload (cmd/trellis-hello).
const SampleImage = "trellis/hello:0.1.0"

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
	cmd.Flags().StringVar(&f.kubeBin, "kube-bin", filepath.Join(cache, "k8s", KubernetesVersion), "Kubernetes and etcd binaries (`make tools`)")
	cmd.Flags().StringVar(&f.coredns, "coredns", filepath.Join(cache, "coredns", CoreDNSVersion, "coredns"), "static coredns binary (hack/build-coredns.sh)")
	cmd.Flags().StringVar(&f.pause, "pause", filepath.Join(filepath.Dir(self), "trellis-pause"), "static pause binary (cmd/trellis-pause)")
}

func (f *imageFlags) options(log *slog.Logger) nodeimage.Options {
	return nodeimage.Options{
		KubernetesVersion: KubernetesVersion, KubeBin: f.kubeBin, EtcdVersion: EtcdVersion,
		CoreDNS: f.coredns, CoreDNSVersion: CoreDNSVersion, Pause: f.pause, Cache: f.cache, Log: log,
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
	upCmd.Flags().StringVarP(&up.file, "file", "f", "clusters/local.yaml", "local cluster definition (cloud: kind)")
	upCmd.Flags().StringVar(&up.kubeconfig, "kubeconfig", defaultKubeconfig(), "where to write the cluster's kubeconfig")
	upCmd.Flags().StringVar(&up.bin, "bin", "", "directory of the static Trellis binaries (default: beside this trellis)")
	upCmd.Flags().BoolVar(&up.recreate, "recreate", false, "delete an existing cluster of that name first")
	upCmd.Flags().BoolVar(&up.retain, "retain", false, "keep the nodes of a failed create, to debug it")
	upCmd.Flags().DurationVar(&up.wait, "wait", 5*time.Minute, "how long each addon may take to become ready")

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
	down.Flags().StringVarP(&file, "file", "f", "clusters/local.yaml", "local cluster definition")
	down.Flags().StringVar(&kubeconfig, "kubeconfig", defaultKubeconfig(), "the cluster's kubeconfig (its entry is removed)")

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
	load.Flags().StringVarP(&file, "file", "f", "clusters/local.yaml", "local cluster definition")
	load.Flags().StringVar(&kubeconfig, "kubeconfig", defaultKubeconfig(), "the cluster's kubeconfig")
	cmd.AddCommand(nodeImage, upCmd, down, load)
	return cmd
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
}

func runUp(ctx context.Context, s streams.Streams, o upOptions) error {
	start := time.Now()
	log := logger(s)
	l, err := definition.Load(o.file)
	if err != nil {
		return err
	}
	def := l.ClusterDefinition
	rendered, err := addons.Render(def)
	if err != nil {
		return err
	}
	host := kindcluster.DetectHostQuirks()
	log.Info("host", "cgroupV1", host.CgroupV1, "noNegativeOOMScoreAdj", host.NoNegativeOOMScoreAdj)
	iopts := o.image.options(log)
	image, err := nodeimage.Build(ctx, iopts)
	if err != nil {
		return err
	}
	cfg, err := kindcluster.Config(def, image, host, iopts)
	if err != nil {
		return err
	}
	c := kindcluster.New(def.Name, o.kubeconfig, log)
	c.Retain = o.retain
	exists, err := c.Exists()
	if err != nil {
		return err
	}
	if exists && o.recreate {
		if err := c.Delete(); err != nil {
			return err
		}
		exists = false
	}
	if exists {
		log.Info("reusing the kind cluster", "name", def.Name)
		// kind writes the kubeconfig only on create.
		if err := c.WriteKubeconfig(); err != nil {
			return err
		}
	} else {
		log.Info("creating the kind cluster", "name", def.Name, "nodes", len(cfg.Nodes), "image", image)
		if err := c.Create(cfg, image); err != nil {
			return err
		}
	}
	if err := labelInstanceGroups(ctx, o.kubeconfig); err != nil {
		return err
	}
	bin := o.bin
	if bin == "" {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		bin = filepath.Dir(self)
	}
	images, err := kindcluster.BuildImages(ctx, append(kindcluster.RuntimeImages(rendered), SampleImage), bin, iopts)
	if err != nil {
		return err
	}
	log.Info("loading the Trellis images into the nodes", "images", len(images))
	changed, err := c.Load(ctx, images)
	if err != nil {
		return err
	}
	if len(changed) > 0 {
		// Pods on a changed image restart onto it (their controllers make
		// new ones); before the apply, so it waits for the new ones.
		if err := restartPods(ctx, o.kubeconfig, changed, log); err != nil {
			return err
		}
	}
	log.Info("applying the addon bundle", "addons", len(rendered))
	if err := addonscmd.Apply(ctx, s, o.file, o.kubeconfig, o.wait.String(), "", false); err != nil {
		return err
	}
	fmt.Fprintf(s.Out, "\nLocal cluster %s is up in %s, wired like production.\n", def.Name, time.Since(start).Round(time.Second))
	fmt.Fprintf(s.Out, "  export KUBECONFIG=%s\n  kubectl get nodes -o wide\n  kubectl apply -f config/samples/\n  kubectl get trellisservices\n", o.kubeconfig)
	fmt.Fprintf(s.Out, "Delete it with: trellis local down -f %s\n", o.file)
	return nil
}

func logger(s streams.Streams) *slog.Logger {
	return slog.New(slog.NewTextHandler(s.Err, nil))
}
