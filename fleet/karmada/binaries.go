package karmada

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/trellis-dev/trellis/internal/controlplane"
	"github.com/trellis-dev/trellis/internal/versions"
)

// Version is the Karmada version `make tools` builds (versions.Karmada).
var Version = versions.Karmada

// Binaries are the Karmada components the control plane runs.
var Binaries = []string{AggregatedAPIServer, Webhook, Scheduler, ControllerManager}

// The components' binary and process names.
const (
	AggregatedAPIServer = "karmada-aggregated-apiserver"
	Webhook             = "karmada-webhook"
	Scheduler           = "karmada-scheduler"
	ControllerManager   = "karmada-controller-manager"
)

// BinDir is where the Karmada binaries and manifests are:
// $TRELLIS_CACHE/karmada/<version> (default ~/.cache/trellis), unless
// TRELLIS_KARMADA_BIN names another folder.
func BinDir() string {
	if d := os.Getenv("TRELLIS_KARMADA_BIN"); d != "" {
		return d
	}
	return filepath.Join(controlplane.CacheDir(), "karmada", Version)
}

// checkInstalled fails, naming the build, when a binary or the manifests
// are missing.
func checkInstalled(dir string) error {
	for _, b := range Binaries {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return fmt.Errorf("karmada binary %s missing in %s: run `make tools` (hack/build-karmada.sh): %w", b, dir, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "manifests", webhookConfigFile)); err != nil {
		return fmt.Errorf("karmada manifests missing in %s: run `make tools` (hack/build-karmada.sh): %w", dir, err)
	}
	return nil
}
