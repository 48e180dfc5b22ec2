// Package nodeimage assembles a kind node image offline, for hosts where no
// node image can be pulled: a Debian rootfs made by debootstrap (systemd,
// containerd, runc, CNI plugins), kind's base files (entrypoint, units,
// containerd config, vendored from sigs.k8s.io/kind images/base/files),
// Kubernetes binaries built from modules (`make tools`), and the images
// kubeadm runs (kube-apiserver, kube-controller-manager, kube-scheduler,
// kube-proxy, etcd, coredns, pause) built from binaries with the local
// Docker engine and imported into the node's containerd. The image is named
// by a hash of all its inputs, so it is rebuilt only when one changes.
//
// The steps follow kind's own `kind build node-image` (pkg/build/nodeimage):
// a build container running sleep, containerd started in it, images imported
// with `ctr images import --no-unpack`, then `docker commit`.
package nodeimage

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/trellis-dev/trellis/bootstrap/render"
	"github.com/trellis-dev/trellis/local/rootfs"
)

// Repository is where the kubeadm images are named: kubeadm is pointed at
// it (ClusterConfiguration imageRepository), so no upstream name is reused
// for an image built here.
const Repository = render.KindImageRepository

// Packages are the Debian packages of the node rootfs (local/rootfs).
var Packages = rootfs.Node

//go:embed all:files/kindbase
var kindBase embed.FS

// Options are the inputs of a node image.
type Options struct {
	// KubernetesVersion, e.g. v1.36.3.
	KubernetesVersion string
	// KubeBin holds kubelet, kubeadm, kubectl, kube-apiserver,
	// kube-controller-manager, kube-scheduler, kube-proxy and etcd.
	KubeBin string
	// EtcdVersion is the version of KubeBin/etcd, e.g. v3.6.10.
	EtcdVersion string
	// CoreDNS is a static coredns binary of CoreDNSVersion (e.g. v1.14.2).
	CoreDNS, CoreDNSVersion string
	// Pause is a static pause binary (cmd/trellis-pause).
	Pause string
	// Cache holds the debootstrap rootfs between builds.
	Cache string
	// Suite and Mirror for debootstrap (default bookworm, deb.debian.org).
	Suite, Mirror string
	Log           *slog.Logger
}

// Images are the image names kubeadm and containerd will ask for.
type Images struct {
	APIServer, ControllerManager, Scheduler, Proxy, Etcd, CoreDNS, Pause string
}

// ImagesFor names the images of a node image made with o.
func ImagesFor(o Options) Images {
	k := o.KubernetesVersion
	return Images{
		APIServer:         Repository + "/kube-apiserver:" + k,
		ControllerManager: Repository + "/kube-controller-manager:" + k,
		Scheduler:         Repository + "/kube-scheduler:" + k,
		Proxy:             Repository + "/kube-proxy:" + k,
		Etcd:              Repository + "/etcd:" + EtcdTag(o.EtcdVersion),
		CoreDNS:           Repository + "/coredns:" + o.CoreDNSVersion,
		Pause:             Repository + "/pause:trellis",
	}
}

// EtcdTag is the tag kubeadm's etcd image carries for an etcd version
// (v3.6.10 -> 3.6.10-0).
func EtcdTag(v string) string { return render.EtcdImageTag(v) }

func (o *Options) defaults() {
	if o.Suite == "" {
		o.Suite = rootfs.DefaultSuite
	}
	if o.Mirror == "" {
		o.Mirror = rootfs.DefaultMirror
	}
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

// Name is the image name for o: kind-node:<k8s version>-<hash of inputs>.
func Name(o Options) (string, error) {
	o.defaults()
	h := sha256.New()
	fmt.Fprintf(h, "v3\n%s\n%s\n%s\n%s\n%s\n", o.KubernetesVersion, o.EtcdVersion, o.CoreDNSVersion, o.Suite, strings.Join(Packages, ","))
	for _, f := range append(binaries(o), o.CoreDNS, o.Pause) {
		if err := hashFile(h, f); err != nil {
			return "", err
		}
	}
	err := fs.WalkDir(kindBase, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := kindBase.ReadFile(p)
		if err != nil {
			return fmt.Errorf("failed to read embedded kind base file %s: %w", p, err)
		}
		fmt.Fprintf(h, "%s %x\n", p, sha256.Sum256(data))
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("failed to hash the embedded kind base files: %w", err)
	}
	return "trellis.local/kind-node:" + o.KubernetesVersion + "-" + hex.EncodeToString(h.Sum(nil))[:12], nil
}

func binaries(o Options) []string {
	var out []string
	for _, b := range []string{"kubelet", "kubeadm", "kubectl", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy", "etcd"} {
		out = append(out, filepath.Join(o.KubeBin, b))
	}
	return out
}

func hashFile(h io.Writer, p string) error {
	f, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("node image input: %w", err)
	}
	defer f.Close()
	fmt.Fprintf(h, "%s ", filepath.Base(p))
	if _, err := io.Copy(h, f); err != nil {
		return fmt.Errorf("failed to hash node image input %s: %w", p, err)
	}
	return nil
}

// Exists reports whether the local Docker engine has the image.
func Exists(ctx context.Context, image string) bool {
	return exec.CommandContext(ctx, "docker", "image", "inspect", image).Run() == nil
}

// Build makes the node image for o unless Docker already has it, and
// returns its name.
func Build(ctx context.Context, o Options) (string, error) {
	o.defaults()
	name, err := Name(o)
	if err != nil {
		return "", err
	}
	if Exists(ctx, name) {
		o.Log.Info("node image is up to date", "image", name)
		return name, nil
	}
	b := &builder{o: o, name: name}
	if err := b.build(ctx); err != nil {
		return "", fmt.Errorf("build node image %s: %w", name, err)
	}
	prune(ctx, name)
	return name, nil
}

// prune removes the node images other builds left (1.6 GB each); Docker
// keeps any that a container still uses.
func prune(ctx context.Context, keep string) {
	var out bytes.Buffer
	if run(ctx, &out, "docker", "images", "--format", "{{.Repository}}:{{.Tag}}", "trellis.local/kind-node") != nil {
		return
	}
	for _, img := range strings.Fields(out.String()) {
		if img != keep {
			_ = exec.CommandContext(ctx, "docker", "rmi", img).Run()
		}
	}
}

type builder struct {
	o    Options
	name string
	work string
}

func (b *builder) build(ctx context.Context) error {
	rootfs, err := Rootfs(ctx, b.o, Packages)
	if err != nil {
		return err
	}
	b.work, err = os.MkdirTemp(b.o.Cache, "node-image-")
	if err != nil {
		return fmt.Errorf("failed to make a work directory under %s: %w", b.o.Cache, err)
	}
	defer os.RemoveAll(b.work)
	stage := filepath.Join(b.work, "rootfs")
	b.o.Log.Info("staging the node rootfs", "from", rootfs)
	if err := run(ctx, nil, "cp", "-a", rootfs, stage); err != nil {
		return err
	}
	if err := b.configure(ctx, stage); err != nil {
		return err
	}
	base := b.name + "-base"
	b.o.Log.Info("importing the rootfs into Docker", "image", base)
	if err := ImportDir(ctx, stage, base,
		`ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]`, `ENV container=docker`); err != nil {
		return err
	}
	defer exec.Command("docker", "rmi", base).Run() //nolint:errcheck // a leftover base image only costs space
	archive, err := b.images(ctx)
	if err != nil {
		return err
	}
	return b.commit(ctx, base, archive)
}

// ToolsImage is the node's Debian rootfs as a Docker image, for images whose
// binary runs host tools (iptables-restore): kube-proxy, trellis-netd. The
// same iptables as the node's, so both program the same backend.
func ToolsImage(ctx context.Context, o Options) (string, error) {
	o.defaults()
	root, err := Rootfs(ctx, o, Packages)
	if err != nil {
		return "", err
	}
	name := "trellis.local/node-tools:" + filepath.Base(root)
	if Exists(ctx, name) {
		return name, nil
	}
	o.Log.Info("importing the node rootfs as the tools image", "image", name)
	return name, ImportDir(ctx, root, name)
}

// Rootfs makes, once per package set, a debootstrap rootfs (minbase plus
// packages) under o.Cache and returns its directory (rootfs.Build).
func Rootfs(ctx context.Context, o Options, packages []string) (string, error) {
	o.defaults()
	return rootfs.Build(ctx, rootfs.Options{Cache: o.Cache, Suite: o.Suite, Mirror: o.Mirror, Log: o.Log}, packages)
}

// configure does what kind's base and node image Dockerfiles do, on the
// staged rootfs.
func (b *builder) configure(ctx context.Context, root string) error {
	o := b.o
	// kind's base files.
	err := fs.WalkDir(kindBase, "files/kindbase", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(p, "files/kindbase")
		dst := filepath.Join(root, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		data, err := kindBase.ReadFile(p)
		if err != nil {
			return fmt.Errorf("failed to read embedded kind base file %s: %w", p, err)
		}
		mode := os.FileMode(0o644)
		if strings.HasPrefix(rel, "/usr/local/bin/") || strings.HasPrefix(rel, "/kind/bin/") {
			mode = 0o755
		}
		if rel == "/etc/containerd/config.toml" {
			// The sandbox (pause) image built here.
			data = bytes.Replace(data, []byte(`sandbox_image = "registry.k8s.io/pause:3.10"`), []byte(`sandbox_image = "`+ImagesFor(o).Pause+`"`), 1)
		}
		return os.WriteFile(dst, data, mode)
	})
	if err != nil {
		return fmt.Errorf("failed to copy kind's base files into rootfs %s: %w", root, err)
	}
	for _, bin := range []string{"kubelet", "kubeadm", "kubectl"} {
		if err := copyFile(filepath.Join(o.KubeBin, bin), filepath.Join(root, "usr/bin", bin), 0o755); err != nil {
			return err
		}
	}
	// kind's units and containerd config expect /usr/local/bin/containerd
	// and CNI plugins in /opt/cni/bin; Debian installs them elsewhere.
	links := map[string]string{"usr/local/bin/containerd": "/usr/bin/containerd", "usr/local/bin/ctr": "/usr/bin/ctr", "usr/local/bin/containerd-shim-runc-v2": "/usr/bin/containerd-shim-runc-v2"}
	plugins, err := os.ReadDir(filepath.Join(root, "usr/lib/cni"))
	if err != nil {
		return fmt.Errorf("CNI plugins: %w", err)
	}
	for _, p := range plugins {
		links["opt/cni/bin/"+p.Name()] = "/usr/lib/cni/" + p.Name()
	}
	for l, target := range links {
		dst := filepath.Join(root, l)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fmt.Errorf("failed to create directory for link %s: %w", dst, err)
		}
		_ = os.Remove(dst)
		if err := os.Symlink(target, dst); err != nil {
			return fmt.Errorf("failed to link %s to %s: %w", dst, target, err)
		}
	}
	files := map[string]string{
		"kind/version": o.KubernetesVersion,
		// No dynamic provisioner on local clusters: kind applies this in
		// place of its local-path provisioner, whose image is not here.
		"kind/manifests/default-storage.yaml": defaultStorage,
		"etc/kubernetes/manifests/.keep":      "",
	}
	for p, content := range files {
		dst := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fmt.Errorf("failed to create directory for node file %s: %w", dst, err)
		}
		if err := os.WriteFile(dst, []byte(content), 0o644); err != nil {
			return fmt.Errorf("failed to write node file %s: %w", dst, err)
		}
	}
	if err := appendFile(filepath.Join(root, "etc/systemd/journald.conf"), "ReadKMsg=no\n"); err != nil {
		return err
	}
	// kind's base Dockerfile: no units but ours start at boot.
	for _, glob := range []string{
		"lib/systemd/system/multi-user.target.wants/*", "etc/systemd/system/*.wants/*", "lib/systemd/system/local-fs.target.wants/*",
		"lib/systemd/system/sockets.target.wants/*udev*", "lib/systemd/system/sockets.target.wants/*initctl*", "lib/systemd/system/basic.target.wants/*",
		"lib/systemd/system/sysinit.target.wants/systemd-tmpfiles-setup.service",
	} {
		matches, _ := filepath.Glob(filepath.Join(root, glob))
		for _, m := range matches {
			if err := os.RemoveAll(m); err != nil {
				return fmt.Errorf("failed to disable systemd unit %s: %w", m, err)
			}
		}
	}
	if err := run(ctx, nil, "chroot", root, "systemctl", "enable", "kubelet.service", "containerd.service", "undo-mount-hacks.service"); err != nil {
		return err
	}
	if err := run(ctx, nil, "chroot", root, "systemctl", "mask", "systemd-binfmt.service"); err != nil {
		return err
	}
	return criBaseSpec(ctx, root)
}

const defaultStorage = `apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
  annotations:
    storageclass.kubernetes.io/is-default-class: "true"
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
`

// criBaseSpec writes /etc/containerd/cri-base.json as kind does: the
// default OCI spec of this containerd plus kind's createContainer hook that
// mounts per-container product_name and product_uuid files.
func criBaseSpec(ctx context.Context, root string) error {
	var out bytes.Buffer
	if err := run(ctx, &out, "chroot", root, "ctr", "oci", "spec"); err != nil {
		return err
	}
	var spec map[string]any
	if err := json.Unmarshal(out.Bytes(), &spec); err != nil {
		return fmt.Errorf("ctr oci spec: %w", err)
	}
	hooks, _ := spec["hooks"].(map[string]any)
	if hooks == nil {
		hooks = map[string]any{}
	}
	create, _ := hooks["createContainer"].([]any)
	hooks["createContainer"] = append(create, map[string]any{"path": "/kind/bin/mount-product-files.sh"})
	spec["hooks"] = hooks
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return fmt.Errorf("failed to encode containerd's cri-base spec: %w", err)
	}
	return os.WriteFile(filepath.Join(root, "etc/containerd/cri-base.json"), data, 0o644)
}

// images builds kubeadm's images with the local Docker engine and saves
// them into one archive. The control-plane components, etcd, coredns and
// pause are static binaries in scratch images; kube-proxy programs iptables,
// so its image is the tools image plus the binary.
func (b *builder) images(ctx context.Context) (string, error) {
	o := b.o
	tools, err := ToolsImage(ctx, o)
	if err != nil {
		return "", err
	}
	im := ImagesFor(o)
	type img struct {
		name, from, bin, entry string
	}
	list := []img{
		{im.APIServer, "scratch", filepath.Join(o.KubeBin, "kube-apiserver"), "/usr/local/bin/kube-apiserver"},
		{im.ControllerManager, "scratch", filepath.Join(o.KubeBin, "kube-controller-manager"), "/usr/local/bin/kube-controller-manager"},
		{im.Scheduler, "scratch", filepath.Join(o.KubeBin, "kube-scheduler"), "/usr/local/bin/kube-scheduler"},
		{im.Proxy, tools, filepath.Join(o.KubeBin, "kube-proxy"), "/usr/local/bin/kube-proxy"},
		{im.Etcd, "scratch", filepath.Join(o.KubeBin, "etcd"), "/usr/local/bin/etcd"},
		{im.CoreDNS, "scratch", o.CoreDNS, "/coredns"},
		{im.Pause, "scratch", o.Pause, "/pause"},
	}
	var names []string
	for _, i := range list {
		dir := filepath.Join(b.work, "img-"+path.Base(strings.Split(i.name, ":")[0]))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", fmt.Errorf("failed to create build context for image %s: %w", i.name, err)
		}
		if err := copyFile(i.bin, filepath.Join(dir, "bin"), 0o755); err != nil {
			return "", err
		}
		// etcd, kube-apiserver and coredns write to /tmp or need
		// /etc/nsswitch-free name resolution: scratch has no /tmp.
		dockerfile := fmt.Sprintf("FROM %s\nCOPY bin %s\nENTRYPOINT [%q]\n", i.from, i.entry, i.entry)
		if i.from == "scratch" {
			if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o1777); err != nil {
				return "", fmt.Errorf("failed to create /tmp for image %s: %w", i.name, err)
			}
			dockerfile = fmt.Sprintf("FROM scratch\nCOPY tmp /tmp\nCOPY bin %s\nENTRYPOINT [%q]\n", i.entry, i.entry)
		}
		if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
			return "", fmt.Errorf("failed to write the Dockerfile for image %s: %w", i.name, err)
		}
		b.o.Log.Info("building image", "image", i.name)
		if err := run(ctx, nil, "docker", "build", "-q", "-t", i.name, dir); err != nil {
			return "", err
		}
		names = append(names, i.name)
	}
	archive := filepath.Join(b.work, "images.tar")
	if err := run(ctx, nil, "docker", append([]string{"save", "-o", archive}, names...)...); err != nil {
		return "", err
	}
	_ = exec.Command("docker", append([]string{"rmi"}, names...)...).Run()
	return archive, nil
}

// commit imports the images into containerd inside a build container and
// commits it as the node image.
func (b *builder) commit(ctx context.Context, base, archive string) error {
	id := "trellis-node-build-" + filepath.Base(b.work)
	if err := run(ctx, nil, "docker", "run", "-d", "--entrypoint=sleep", "--name="+id, "--security-opt", "seccomp=unconfined", base, "infinity"); err != nil {
		return err
	}
	defer exec.Command("docker", "rm", "-f", "-v", id).Run() //nolint:errcheck // best effort
	if err := run(ctx, nil, "docker", "exec", id, "bash", "-c", "nohup containerd > /var/log/containerd-build.log 2>&1 &"); err != nil {
		return err
	}
	wait := `for i in $(seq 1 50); do [ -S /run/containerd/containerd.sock ] && ctr version >/dev/null 2>&1 && exit 0; sleep 0.2; done; cat /var/log/containerd-build.log; exit 1`
	if err := run(ctx, nil, "docker", "exec", id, "bash", "-c", wait); err != nil {
		return fmt.Errorf("containerd in the build container: %w", err)
	}
	f, err := os.Open(archive)
	if err != nil {
		return fmt.Errorf("failed to open image archive %s: %w", archive, err)
	}
	defer f.Close()
	b.o.Log.Info("importing the images into the node's containerd")
	cmd := exec.CommandContext(ctx, "docker", "exec", "-i", id, "ctr", "--namespace=k8s.io", "images", "import",
		"--label=io.cri-containerd.pinned=pinned", "--all-platforms", "--no-unpack", "--digests", "-")
	cmd.Stdin = f
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ctr images import: %w: %s", err, out)
	}
	var listed bytes.Buffer
	if err := run(ctx, &listed, "docker", "exec", id, "ctr", "--namespace=k8s.io", "images", "list", "-q"); err != nil {
		return err
	}
	im := ImagesFor(b.o)
	want := []string{im.APIServer, im.ControllerManager, im.Scheduler, im.Proxy, im.Etcd, im.CoreDNS, im.Pause}
	have := strings.Fields(listed.String())
	for _, w := range want {
		if !slices.Contains(have, w) && !slices.Contains(have, "docker.io/"+w) {
			sort.Strings(have)
			return fmt.Errorf("image %s missing from the node's containerd after import; it has %v", w, have)
		}
	}
	if err := run(ctx, nil, "docker", "exec", id, "pkill", "containerd"); err != nil {
		return err
	}
	b.o.Log.Info("committing the node image", "image", b.name)
	committed := b.name + "-committed"
	if err := run(ctx, nil, "docker", "commit", "--change", `ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]`, id, committed); err != nil {
		return err
	}
	defer exec.Command("docker", "rmi", committed).Run() //nolint:errcheck // the final image keeps the layers
	// systemd stops on SIGRTMIN+3; import and commit cannot set STOPSIGNAL
	// on Docker 20.10, a build can.
	dir := filepath.Join(b.work, "final")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("failed to create the final build context %s: %w", dir, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM "+committed+"\nSTOPSIGNAL SIGRTMIN+3\n"), 0o644); err != nil {
		return fmt.Errorf("failed to write the final Dockerfile in %s: %w", dir, err)
	}
	return run(ctx, nil, "docker", "build", "-q", "-t", b.name, dir)
}

// ImportDir makes a Docker image of a directory tree.
func ImportDir(ctx context.Context, dir, image string, changes ...string) error {
	script := `set -o pipefail; tar -C "$1" --numeric-owner -cf - . | docker import "${@:3}" - "$2"`
	args := []string{"-c", script, "import", dir, image}
	for _, c := range changes {
		args = append(args, "--change", c)
	}
	return run(ctx, nil, "bash", args...)
}

// run runs a command; its error carries the command's stderr.
func run(ctx context.Context, stdout io.Writer, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = stdout, &stderr
	if stdout == nil {
		// Some tools (debootstrap) say why they failed on stdout.
		cmd.Stdout = &stderr
	}
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 2000 {
			msg = "…" + msg[len(msg)-2000:]
		}
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, msg)
	}
	return nil
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("failed to open %s to copy it: %w", src, err)
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("failed to create directory for %s: %w", dst, err)
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, mode)
	if err != nil {
		return fmt.Errorf("failed to create %s: %w", dst, err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("failed to copy %s to %s: %w", src, dst, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("failed to close %s: %w", dst, err)
	}
	return nil
}

func appendFile(p, s string) error {
	f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("failed to open %s to append: %w", p, err)
	}
	if _, err := f.WriteString(s); err != nil {
		f.Close()
		return fmt.Errorf("failed to append to %s: %w", p, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("failed to close %s: %w", p, err)
	}
	return nil
}
