// Package kwok runs kwok, the simulated kubelets, beside a loopback control
// plane: nodes it manages turn Ready and their pods Running and Ready
// without containers. The binary and its stages come from
// hack/build-kwok.sh (`make tools`).
package kwok

import (
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/internal/controlplane"
	"github.com/trellis-dev/trellis/internal/versions"
)

// NodeAnnotation marks the nodes kwok manages.
const NodeAnnotation = "kwok.x-k8s.io/node"

// Dir is where kwok and its stages.yaml are: $TRELLIS_CACHE/kwok/<version>
// (default ~/.cache/trellis), unless TRELLIS_KWOK_DIR names another.
func Dir() string {
	if d := os.Getenv("TRELLIS_KWOK_DIR"); d != "" {
		return d
	}
	return filepath.Join(controlplane.CacheDir(), "kwok", versions.Kwok)
}

// config: pod and node stages in parallel, and node leases renewed as
// kubelets do (without them the lease-based heartbeat lets nodes go
// NotReady).
const config = `apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  podPlayStageParallelism: 16
  nodePlayStageParallelism: 4
  nodeLeaseDurationSeconds: 40
  nodeLeaseParallelism: 16
`

// Start runs kwok as a process of the control plane (named "kwok"), for
// the nodes annotated NodeAnnotation=fake, giving pods addresses from
// podCIDR (clusters that share a discovery view need distinct ones).
func Start(cp *controlplane.ControlPlane, podCIDR string) error {
	dir := Dir()
	bin := filepath.Join(dir, "kwok")
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("kwok missing in %s: run `make tools` (hack/build-kwok.sh): %w", dir, err)
	}
	cfg := filepath.Join(cp.Dir, "kwok-config.yaml")
	if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
		return fmt.Errorf("write the kwok config: %w", err)
	}
	return cp.StartProcess("kwok", bin, "--config="+filepath.Join(dir, "stages.yaml"), "--config="+cfg,
		"--kubeconfig="+cp.Kubeconfig, "--manage-nodes-with-annotation-selector="+NodeAnnotation+"=fake",
		"--cidr="+podCIDR, "--node-ip=10.255.255.1", "--server-address=127.0.0.1:0", "--v=WARN")
}

// Node is a kwok node with the given allocatable CPU, memory and pods.
func Node(name, cpu, memory string, pods int64, labels map[string]string) *corev1.Node {
	l := map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "type": "kwok"}
	for k, v := range labels {
		l[k] = v
	}
	alloc := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(cpu),
		corev1.ResourceMemory: resource.MustParse(memory),
		corev1.ResourcePods:   *resource.NewQuantity(pods, resource.DecimalSI),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l, Annotations: map[string]string{NodeAnnotation: "fake"}},
		Status:     corev1.NodeStatus{Allocatable: alloc, Capacity: alloc},
	}
}
