package kindcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"

	"github.com/trellis-dev/trellis/fleet/karmada"
	"github.com/trellis-dev/trellis/local/nodeimage"
	"github.com/trellis-dev/trellis/local/rootfs"
)

// binaries maps a runtime image's name (its last path element, without the
// tag) to the static binary it carries, at /<binary>, as its entrypoint.
var binaries = map[string]string{
	"netd":         "trellis-netd",
	"cert-issuer":  "trellis-cert-issuer",
	"cert-agent":   "trellis-cert-agent",
	"zk-registrar": "trellis-zk-registrar",
	"log-shipper":  "trellis-log-shipper",
	"controller":   "trellis-controller",
	"gateway":      "trellis-gateway",
	"traffic":      "trellis-traffic",
	"cert-sidecar": "trellis-cert",
	"config-init":  "trellis-config-init",
	"hello":        "trellis-hello",
	"oidc-dev":     "trellis-oidc-dev",
	"quota":        "trellis",
	// The fleet's control plane (addons karmada-apiserver and karmada):
	// Karmada's own binaries, from where `make tools` builds them, and
	// the trellis CLI that installs Karmada's API, with its manifests.
	"karmada-aggregated-apiserver": karmada.AggregatedAPIServer,
	"karmada-webhook":              karmada.Webhook,
	"karmada-scheduler":            karmada.Scheduler,
	"karmada-controller-manager":   karmada.ControllerManager,
	"fleet-install":                "trellis",
}

// fromKarmada are the images whose binary is Karmada's (in karmada.BinDir()).
var fromKarmada = map[string]bool{
	"karmada-aggregated-apiserver": true, "karmada-webhook": true,
	"karmada-scheduler": true, "karmada-controller-manager": true,
}

// karmadaManifests are images that carry Karmada's manifests at
// /karmada/manifests (what `trellis fleet install --karmada /karmada` reads).
var karmadaManifests = map[string]bool{"fleet-install": true}

// extras are binaries an image carries beside its entrypoint, at
// /<binary>: netd's image carries the trellis-cni plugin of its AWS mode,
// which an init container copies onto the node.
var extras = map[string][]string{"netd": {"trellis-cni"}}

// needsTools are the images whose binary runs host tools (netd runs
// iptables-restore): they are built on the node's rootfs, not scratch.
var needsTools = map[string]bool{"netd": true}

// runtimeLabel marks the images BuildImages builds, so the builds a
// rebuild replaced (left dangling) can be pruned without touching others.
const runtimeLabel = "dev.trellis.runtime-image=true"

// ZooKeeperPackages make the local ZooKeeper image's rootfs
// (local/rootfs).
var ZooKeeperPackages = rootfs.ZooKeeper

// zooCfg is the local single-server ensemble's configuration.
const zooCfg = `tickTime=1000
initLimit=10
syncLimit=5
dataDir=/data
clientPort=2181
admin.enableServer=false
4lw.commands.whitelist=srvr,ruok,mntr,cons
`

// BuildImages builds the runtime images with the local Docker engine:
// scratch images holding one static Go binary from binDir each, and the
// ZooKeeper image from a debootstrap rootfs (cached under the node image
// options' cache). It returns the images built.
func BuildImages(ctx context.Context, images []string, binDir string, o nodeimage.Options) ([]string, error) {
	work, err := os.MkdirTemp("", "trellis-images-")
	if err != nil {
		return nil, fmt.Errorf("failed to make a directory for the image builds: %w", err)
	}
	defer os.RemoveAll(work)
	for _, img := range images {
		base := path.Base(strings.SplitN(img, ":", 2)[0])
		if base == "zookeeper" {
			if err := buildZooKeeper(ctx, img, work, o); err != nil {
				return nil, err
			}
			continue
		}
		bin, ok := binaries[base]
		if !ok {
			return nil, fmt.Errorf("image %s: no Trellis binary makes it", img)
		}
		dir := filepath.Join(work, base)
		if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o1777); err != nil {
			return nil, fmt.Errorf("failed to create the build context of image %s: %w", img, err)
		}
		copies, src, build := "", binDir, "make build"
		if fromKarmada[base] {
			src, build = karmada.BinDir(), "make tools"
		}
		for _, b := range append([]string{bin}, extras[base]...) {
			if err := link(filepath.Join(src, b), filepath.Join(dir, b)); err != nil {
				return nil, fmt.Errorf("image %s: %w (%s)", img, err, build)
			}
			copies += fmt.Sprintf("COPY %s /%s\n", b, b)
		}
		if karmadaManifests[base] {
			if err := os.CopyFS(filepath.Join(dir, "karmada", "manifests"), os.DirFS(filepath.Join(karmada.BinDir(), "manifests"))); err != nil {
				return nil, fmt.Errorf("image %s: Karmada's manifests: %w (make tools)", img, err)
			}
			copies += "COPY karmada/manifests /karmada/manifests\n"
		}
		from := "scratch"
		if needsTools[base] {
			if from, err = nodeimage.ToolsImage(ctx, o); err != nil {
				return nil, err
			}
		}
		dockerfile := fmt.Sprintf("FROM %s\nLABEL %s\nCOPY tmp /tmp\n%sENTRYPOINT [\"/%s\"]\n", from, runtimeLabel, copies, bin)
		if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
			return nil, fmt.Errorf("failed to write the Dockerfile of image %s: %w", img, err)
		}
		if err := docker(ctx, "build", "-q", "-t", img, dir); err != nil {
			return nil, err
		}
	}
	// The builds these replaced: a GiB or more per rebuild otherwise.
	if err := docker(ctx, "image", "prune", "-f", "--filter", "label="+runtimeLabel); err != nil {
		return nil, err
	}
	return images, nil
}

func buildZooKeeper(ctx context.Context, img, work string, o nodeimage.Options) error {
	root, err := nodeimage.Rootfs(ctx, o, ZooKeeperPackages)
	if err != nil {
		return err
	}
	base := "trellis.local/zookeeper-rootfs:" + filepath.Base(root)
	if exec.CommandContext(ctx, "docker", "image", "inspect", base).Run() != nil {
		if err := nodeimage.ImportDir(ctx, root, base); err != nil {
			return err
		}
	}
	dir := filepath.Join(work, "zookeeper")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("failed to create the build context of image %s: %w", img, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "zoo.cfg"), []byte(zooCfg), 0o644); err != nil {
		return fmt.Errorf("failed to write zoo.cfg for image %s: %w", img, err)
	}
	// Debian's /var/lib/zookeeper/myid holds placeholder text: a fresh
	// data directory instead.
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return fmt.Errorf("failed to create the data directory for image %s: %w", img, err)
	}
	dockerfile := fmt.Sprintf(`FROM %s
LABEL %s
COPY zoo.cfg /etc/zookeeper/trellis/zoo.cfg
COPY data /data
ENTRYPOINT ["java", "-Xmx256m", "-cp", "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-api.jar:/usr/share/java/slf4j-simple.jar", "org.apache.zookeeper.server.quorum.QuorumPeerMain", "/etc/zookeeper/trellis/zoo.cfg"]
`, base, runtimeLabel)
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		return fmt.Errorf("failed to write the Dockerfile of image %s: %w", img, err)
	}
	return docker(ctx, "build", "-q", "-t", img, dir)
}

// link hard-links (or copies) a file into a build context.
func link(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("failed to read %s to copy it: %w", src, err)
	}
	if err := os.WriteFile(dst, data, 0o755); err != nil {
		return fmt.Errorf("failed to copy %s into the build context: %w", src, err)
	}
	return nil

}

func docker(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}
