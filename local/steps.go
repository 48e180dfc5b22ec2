package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/trellis-dev/trellis/addons"
	"github.com/trellis-dev/trellis/bootstrap/definition"
	karmadaaddon "github.com/trellis-dev/trellis/fleet/karmada/addon"
	"github.com/trellis-dev/trellis/internal/fsync"
	"github.com/trellis-dev/trellis/local/kindcluster"
	"github.com/trellis-dev/trellis/local/nodeimage"
)

// steps are Up's steps, in order.
func (u *up) steps() []Step {
	return []Step{
		{Name: "node image", Execute: u.nodeImage},
		{Name: "cluster", Execute: u.ensureCluster},
		{Name: "instance-group labels", Execute: u.labelInstanceGroups},
		{Name: "images", Execute: u.loadImages},
		{Name: "console", Execute: u.console},
		{Name: "addons", Execute: u.applyAddons},
		// The sign-in provider is a pod: on a new cluster it runs only
		// once the addons have brought the network up.
		{Name: "console sign-in", Execute: u.consoleSignIn},
		{Name: "fleet kubeconfig", Execute: u.fleetKubeconfig},
		{Name: "gateway context", Execute: u.gatewayContext},
	}
}

// lifecycles are the bundle's addon lifecycles, which Render and the
// applier call: the fleet control plane's.
func lifecycles() []addons.Lifecycle { return []addons.Lifecycle{karmadaaddon.Lifecycle{}} }

// FleetAddons are the addons of the fleet's control plane (Options.Fleet),
// at the bundle's versions.
func FleetAddons() []definition.Addon {
	return []definition.Addon{{Name: karmadaaddon.KarmadaAPIServerAddon}, {Name: karmadaaddon.KarmadaAddon}}
}

// fleetKubeconfig writes the fleet's admin kubeconfig (to the pod's
// loopback address, which a port-forward reaches) when Fleet is on.
func (u *up) fleetKubeconfig(ctx context.Context) error {
	if !u.o.Fleet {
		return nil
	}
	s, err := u.client.CoreV1().Secrets(addons.Namespace).Get(ctx, karmadaaddon.KarmadaSecret, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("the fleet's credentials: %w", err)
	}
	if err := fsync.WriteFile(u.o.FleetKubeconfig, s.Data[karmadaaddon.KarmadaLocalKubeconfig], 0o600); err != nil {
		return err
	}
	u.o.Log.Info("wrote the fleet's kubeconfig", "path", u.o.FleetKubeconfig, "reach", "kubectl -n "+addons.Namespace+" port-forward svc/"+karmadaaddon.KarmadaService+" 5443")
	return nil
}

// nodeImage assembles the kind node image (cached by content).
func (u *up) nodeImage(ctx context.Context) error {
	img, err := nodeimage.Build(ctx, u.o.Image)
	if err != nil {
		return err
	}
	u.image = img
	return nil
}

// ensureCluster creates the kind cluster, or reuses (or, with Recreate,
// replaces) an existing one.
func (u *up) ensureCluster(ctx context.Context) error {
	host := kindcluster.DetectHostQuirks()
	u.o.Log.Info("host", "cgroupV1", host.CgroupV1, "noNegativeOOMScoreAdj", host.NoNegativeOOMScoreAdj)
	cfg, err := kindcluster.Config(u.def, u.image, host, u.o.Image)
	if err != nil {
		return err
	}
	exists, err := u.cluster.Exists()
	if err != nil {
		return err
	}
	if exists && u.o.Recreate {
		if err := u.cluster.Delete(); err != nil {
			return err
		}
		exists = false
	}
	if exists {
		u.o.Log.Info("reusing the kind cluster", "name", u.def.Name)
		if err := u.cluster.StartStopped(ctx); err != nil {
			return err
		}
		// kind writes the kubeconfig only on create (and a restarted
		// control plane may publish its port anew).
		if err := u.cluster.WriteKubeconfig(); err != nil {
			return err
		}
		if err := u.connect(); err != nil {
			return err
		}
		return waitAPIServerReady(ctx, u.client, apiServerReadyTimeout)
	}
	u.o.Log.Info("creating the kind cluster", "name", u.def.Name, "nodes", len(cfg.Nodes), "image", u.image)
	if err := u.cluster.Create(cfg, u.image); err != nil {
		return err
	}
	u.created = true
	return u.connect()
}

// connect builds the clients of the cluster's kubeconfig.
func (u *up) connect() error {
	cfg, err := clientcmd.BuildConfigFromFlags("", u.o.Kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubeconfig %s: %w", u.o.Kubeconfig, err)
	}
	cfg.UserAgent = "trellis-local"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("failed to create a Kubernetes client from %s: %w", u.o.Kubeconfig, err)
	}
	u.rest, u.client = cfg, cs
	return nil
}

// loadImages builds the runtime and sample images from the static binaries
// and loads them into every node; pods on an image whose content changed
// are restarted onto it (before the addons, so their waits see new pods).
func (u *up) loadImages(ctx context.Context) error {
	bin := u.o.Bin
	if bin == "" {
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("failed to locate the trellis binary, whose directory holds the image binaries: %w", err)
		}
		bin = filepath.Dir(self)
	}
	images, err := kindcluster.BuildImages(ctx, append(kindcluster.RuntimeImages(u.rendered), SampleImage, OIDCImage), bin, u.o.Image)
	if err != nil {
		return err
	}
	u.o.Log.Info("loading the Trellis images into the nodes", "images", len(images))
	changed, err := u.cluster.Load(ctx, images)
	if err != nil {
		return err
	}
	if len(changed) == 0 {
		return nil
	}
	return restartPods(ctx, u.client, changed, u.o.Log)
}

// applyAddons applies the addon bundle, each addon waiting up to Wait.
func (u *up) applyAddons(ctx context.Context) error {
	res, err := addons.Apply(ctx, u.def, addons.ApplyOptions{Config: u.rest, Out: u.o.Out, Wait: u.o.Wait, Clock: u.o.Clock, Lifecycles: lifecycles()})
	if u.o.Out != nil {
		for _, r := range res {
			if r.Action == "unchanged" {
				fmt.Fprintf(u.o.Out, "unchanged %s %s\n", r.Addon, r.Version)
			}
		}
	}
	return err
}
