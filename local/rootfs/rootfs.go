// Package rootfs makes the Debian root filesystems of a local cluster's
// images with debootstrap, once per package set, in the Trellis cache: the
// kind node's and ZooKeeper's. It imports only the standard library, so
// that `make local` can make them (hack/rootfs) while the Go binaries
// compile: debootstrap waits on the mirror and the disk, the compiler on
// the CPU.
package rootfs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Node are the Debian packages of the kind node's rootfs (kind's base
// image list, less what a local cluster does not use: NFS, iSCSI, fuse).
var Node = []string{
	"systemd", "systemd-sysv", "dbus", "containerd", "runc", "containernetworking-plugins",
	"conntrack", "iptables", "nftables", "iproute2", "ethtool", "util-linux", "mount", "kmod",
	"libseccomp2", "pigz", "e2fsprogs", "bash", "ca-certificates", "curl", "jq", "procps", "socat",
}

// ZooKeeper are the packages of the local ZooKeeper image's rootfs
// (Debian's zookeeper runs without systemd).
var ZooKeeper = []string{"zookeeper", "default-jre-headless", "libslf4j-java"}

// Options say where and from what a rootfs is made.
type Options struct {
	// Cache holds the rootfs directories between builds.
	Cache string
	// Suite and Mirror for debootstrap (default bookworm, deb.debian.org).
	Suite, Mirror string
	Log           *slog.Logger
}

// DefaultSuite and DefaultMirror are debootstrap's defaults here.
const (
	DefaultSuite  = "bookworm"
	DefaultMirror = "http://deb.debian.org/debian"
)

func (o *Options) defaults() {
	if o.Suite == "" {
		o.Suite = DefaultSuite
	}
	if o.Mirror == "" {
		o.Mirror = DefaultMirror
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
}

// Dir is where the rootfs of packages is kept: named by a hash of the
// suite, the mirror and the package set, so a changed set is made anew.
func Dir(o Options, packages []string) string {
	o.defaults()
	key := sha256.Sum256([]byte(o.Suite + "\n" + o.Mirror + "\n" + strings.Join(packages, ",")))
	return filepath.Join(o.Cache, "node-rootfs", o.Suite+"-"+hex.EncodeToString(key[:])[:12])
}

// Build makes, once per package set, a debootstrap rootfs (minbase plus
// packages) under o.Cache and returns its directory. A build that fails or
// is killed leaves no directory that counts as made: only a complete one
// carries the marker, and it is renamed into place.
func Build(ctx context.Context, o Options, packages []string) (string, error) {
	o.defaults()
	dir := Dir(o, packages)
	if _, err := os.Stat(filepath.Join(dir, ".trellis-complete")); err == nil {
		return dir, nil
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		return "", fmt.Errorf("debootstrap is not installed (apt-get install debootstrap): %w", err)
	}
	tmp := dir + ".tmp"
	_ = os.RemoveAll(tmp)
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", fmt.Errorf("create the rootfs cache %s: %w", filepath.Dir(dir), err)
	}
	o.Log.Info("debootstrap: building a rootfs (once)", "suite", o.Suite, "packages", strings.Join(packages, ","), "dir", dir)
	if err := run(ctx, "debootstrap", "--variant=minbase", "--include="+strings.Join(packages, ","), o.Suite, tmp, o.Mirror); err != nil {
		return "", err
	}
	// Package caches are not part of an image.
	_ = os.RemoveAll(filepath.Join(tmp, "var/cache/apt/archives"))
	if err := os.WriteFile(filepath.Join(tmp, ".trellis-complete"), nil, 0o644); err != nil {
		return "", fmt.Errorf("mark rootfs %s complete: %w", tmp, err)
	}
	_ = os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		return "", fmt.Errorf("move the rootfs into place: %w", err)
	}
	return dir, nil
}

// run runs a command; its error carries the end of what the command
// printed (debootstrap says why it failed on stdout).
func run(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(out.String())
		if len(msg) > 2000 {
			msg = "…" + msg[len(msg)-2000:]
		}
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, msg)
	}
	return nil
}
