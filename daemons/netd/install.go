package netd

import (
	"fmt"
	"io"
	"os"
)

// InstallPlugin copies the CNI plugin binary src to dst on the node
// atomically (a temporary file renamed over dst): the runtime may be
// running the old one, and must never run half a binary.
func InstallPlugin(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("install-cni: %w", err)
	}
	defer in.Close()
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		return fmt.Errorf("install-cni: %w", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		os.Remove(tmp)
		return fmt.Errorf("install-cni: %w", err)
	}
	if err := out.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("install-cni: %w", err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("install-cni: %w", err)
	}
	return nil
}
