package cluster

import (
	"testing"

	"github.com/trellis-dev/trellis/internal/controlplane"
)

// KubernetesVersion is the version `make tools` builds.
var KubernetesVersion = controlplane.KubernetesVersion

// Options choose which components run beside etcd and the apiserver.
type Options = controlplane.Options

// ControlPlane is a running control plane.
type ControlPlane = controlplane.ControlPlane

// Start runs a control plane for the test and stops it, in order, when the
// test ends; a failing test gets the components' log tails. It fails the
// test (it never skips) when the binaries are missing: run `make tools`.
func Start(t testing.TB, opts Options) *ControlPlane {
	t.Helper()
	cp, err := controlplane.Start(t.TempDir(), opts)
	if err != nil {
		t.Fatalf("failed to start control plane: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(cp.Logs(15))
		}
		cp.Stop()
	})
	return cp
}
