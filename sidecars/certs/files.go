package certs

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/trellis-dev/trellis/internal/fsync"
)

// dataLink names the current version of the identity directory.
const dataLink = "..data"

// WriteAtomic replaces the files of dir as one: readers see either the old
// set or the new one, never a key of one with the certificate of the other.
// It writes a new versioned directory, swaps the "..data" symlink to it with
// a rename, and points each file name at "..data/<name>" (the kubelet's
// atomic-writer layout for projected volumes, which it cannot share because
// it lives in k8s.io/kubernetes).
func WriteAtomic(dir string, files map[string][]byte, modes map[string]os.FileMode) error {
	ver, err := os.MkdirTemp(dir, "..v-")
	if err != nil {
		return fmt.Errorf("failed to create a version dir in %s: %w", dir, err)
	}
	if err := os.Chmod(ver, 0o755); err != nil {
		return fmt.Errorf("failed to make version dir %s readable: %w", ver, err)
	}
	for name, data := range files {
		mode := modes[name]
		if mode == 0 {
			mode = 0o644
		}
		if err := fsync.WriteFile(filepath.Join(ver, name), data, mode); err != nil {
			_ = os.RemoveAll(ver)
			return err
		}
	}
	tmpLink := filepath.Join(dir, "..data_tmp")
	_ = os.Remove(tmpLink)
	if err := os.Symlink(filepath.Base(ver), tmpLink); err != nil {
		_ = os.RemoveAll(ver)
		return fmt.Errorf("failed to link %s to %s: %w", tmpLink, filepath.Base(ver), err)
	}
	old, _ := os.Readlink(filepath.Join(dir, dataLink))
	if err := os.Rename(tmpLink, filepath.Join(dir, dataLink)); err != nil {
		_ = os.RemoveAll(ver)
		return fmt.Errorf("failed to swap %s: %w", dataLink, err)
	}
	for name := range files {
		link := filepath.Join(dir, name)
		if target, err := os.Readlink(link); err == nil && target == filepath.Join(dataLink, name) {
			continue
		}
		_ = os.Remove(link)
		if err := os.Symlink(filepath.Join(dataLink, name), link); err != nil {
			return fmt.Errorf("failed to link %s into %s: %w", name, dir, err)
		}

	}
	if old != "" && old != filepath.Base(ver) && strings.HasPrefix(old, "..v-") {
		_ = os.RemoveAll(filepath.Join(dir, old))
	}
	return fsync.Dir(dir)
}

// Version identifies the current file set (changes on every write).
func Version(dir string) string {
	v, _ := os.Readlink(filepath.Join(dir, dataLink))
	return v
}

// Check reports whether dir holds a key, a certificate valid at now and a
// bundle: the startup probe of the certificate sidecar.
func Check(dir string, now time.Time) error {
	id, err := Load(dir)
	if err != nil {
		return err
	}
	leaf := id.Chain[0]
	if now.Before(leaf.NotBefore) || now.After(leaf.NotAfter) {
		return fmt.Errorf("certificate valid from %s to %s, not now (%s)", leaf.NotBefore, leaf.NotAfter, now)
	}
	return nil
}
