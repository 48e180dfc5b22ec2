// Package kopsenv prepares the process-wide settings kops needs when it is
// used as a library: a pinned channel (no fetch from the network), no
// registry lookups for image digests, and, for offline plans against kops's
// cloud fake, a local folder of asset hashes.
package kopsenv

import (
	"crypto/sha256"
	"embed"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	kopsroot "k8s.io/kops"
	"k8s.io/kops/pkg/apis/kops"
	"k8s.io/kops/pkg/featureflag"
)

// channels is kops's stable channel as of the pinned kops release, so
// rendering and planning never depend on fetching it.
//
//go:embed channels/stable
var channels embed.FS

var (
	once    sync.Once
	onceErr error
)

// Setup writes the pinned channel under cacheDir and points kops at it. It
// is idempotent; the first call's cacheDir wins.
func Setup(cacheDir string) error {
	once.Do(func() {
		dir := filepath.Join(cacheDir, "kops", kopsroot.Version, "channels")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			onceErr = fmt.Errorf("failed to create kops channel dir: %w", err)
			return
		}
		data, err := channels.ReadFile("channels/stable")
		if err != nil {
			onceErr = err
			return
		}
		if err := writeIfChanged(filepath.Join(dir, "stable"), data); err != nil {
			onceErr = err
			return
		}
		kops.DefaultChannelBase = "file://" + filepath.ToSlash(dir) + "/"
		// Image digests are resolved by asking registries; Trellis pins tags.
		featureflag.ParseFlags("-ImageDigest")
	})
	return onceErr
}

// OfflineAssetFiles are the kops artifacts whose hashes kops reads from
// KOPS_BASE_URL when it builds node bootstrap configuration.
var OfflineAssetFiles = func() []string {
	var files []string
	for _, arch := range []string{"amd64", "arm64"} {
		files = append(files, "linux/"+arch+"/nodeup", "linux/"+arch+"/protokube", "linux/"+arch+"/channels")
		for _, img := range []string{"kops-utils-cp", "kops-controller", "kops-channels", "dns-controller", "kube-apiserver-healthcheck"} {
			files = append(files, "images/"+img+"-"+arch+".tar.gz")
		}
	}
	return files
}()

// UseOfflineAssets points KOPS_BASE_URL at a local folder holding a .sha256
// for each kops artifact, so a plan against the cloud fake needs no network.
// The hashes are of placeholder content: such a plan can never boot a node,
// which is why only the fake cloud uses it.
func UseOfflineAssets(cacheDir string) error {
	dir := filepath.Join(cacheDir, "kops", "offline-assets", kopsroot.Version)
	for _, f := range OfflineAssetFiles {
		p := filepath.Join(dir, filepath.FromSlash(f)) + ".sha256"
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("failed to create offline asset dir: %w", err)
		}
		sum := sha256.Sum256([]byte("trellis offline placeholder for " + f))
		if err := writeIfChanged(p, fmt.Appendf(nil, "%x\n", sum)); err != nil {
			return err
		}
	}
	return os.Setenv("KOPS_BASE_URL", "file://"+filepath.ToSlash(dir)+"/")
}

func writeIfChanged(path string, data []byte) error {
	if old, err := os.ReadFile(path); err == nil && string(old) == string(data) {
		return nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("failed to write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("failed to write %s: %w", path, err)
	}
	return nil
}
