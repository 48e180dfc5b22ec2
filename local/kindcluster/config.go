// Package kindcluster renders and runs the kind cluster of a local cluster
// definition (cloud: kind) with kind as a library: one node per instance
// group carrying the group's labels and taints (the first group's node is
// the control plane), netd as the CNI, and the host quirks detected rather
// than assumed.
package kindcluster

import (
	"fmt"
	"os"
	"strings"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"

	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/local/nodeimage"
	"github.com/trellis-dev/trellis/local/runcshim"
)

// Host are the quirks of the machine kind runs on.
type Host struct {
	// CgroupV1: the host has cgroup v1; kubelet >= 1.35 refuses it unless
	// failCgroupV1 is false.
	CgroupV1 bool
	// NoNegativeOOMScore: the host lacks CAP_SYS_RESOURCE, so containerd
	// must not give containers a negative OOM score adjustment.
	NoNegativeOOMScore bool
}

// DetectHost reads the quirks of this machine.
func DetectHost() (Host, error) {
	var h Host
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); os.IsNotExist(err) {
		h.CgroupV1 = true
	}
	noCap, err := runcshim.Needed()
	if err != nil {
		return h, err
	}
	h.NoNegativeOOMScore = noCap
	return h, nil
}

// Config renders the kind configuration of a local cluster definition.
func Config(def *definition.ClusterDefinition, host Host, images nodeimage.Images, etcdTag, corednsTag string) (*v1alpha4.Cluster, error) {
	if def.Cloud != "kind" {
		return nil, fmt.Errorf("cluster %s: cloud is %q; `trellis local` runs definitions with cloud: kind", def.Name, def.Cloud)
	}
	if len(def.InstanceGroups) == 0 {
		return nil, fmt.Errorf("cluster %s: no instance groups", def.Name)
	}
	c := &v1alpha4.Cluster{
		TypeMeta: v1alpha4.TypeMeta{Kind: "Cluster", APIVersion: "kind.x-k8s.io/v1alpha4"},
		Name:     def.Name,
		Networking: v1alpha4.Networking{
			PodSubnet: def.Network.PodCIDR, ServiceSubnet: def.Network.ServiceCIDR,
			// trellis-netd is the CNI, as in production.
			DisableDefaultCNI: true,
		},
	}
	// kubeadm runs the images built into the node image.
	c.KubeadmConfigPatches = append(c.KubeadmConfigPatches, fmt.Sprintf(`kind: ClusterConfiguration
imageRepository: %s
etcd:
  local:
    imageTag: %q
dns:
  imageTag: %q
`, nodeimage.Repository, etcdTag, corednsTag))
	if host.CgroupV1 {
		c.KubeadmConfigPatches = append(c.KubeadmConfigPatches, "kind: KubeletConfiguration\nfailCgroupV1: false\n")
	}
	if host.NoNegativeOOMScore {
		c.ContainerdConfigPatches = append(c.ContainerdConfigPatches, "[plugins.\"io.containerd.grpc.v1.cri\"]\n  restrict_oom_score_adj = true\n")
	}
	for i, ig := range def.InstanceGroups {
		n := v1alpha4.Node{Role: v1alpha4.WorkerRole, Labels: map[string]string{"trellis.dev/instance-group": ig.Name}}
		for k, v := range ig.Labels {
			n.Labels[k] = v
		}
		taints, err := taintsYAML(ig.Taints)
		if err != nil {
			return nil, fmt.Errorf("instance group %s: %w", ig.Name, err)
		}
		if i == 0 {
			// The control plane stands for the first group: it runs that
			// group's workloads, so it carries only the group's taints.
			n.Role = v1alpha4.ControlPlaneRole
			n.KubeadmConfigPatches = []string{"kind: InitConfiguration\nnodeRegistration:\n  taints: " + taints + "\n"}
		} else {
			n.KubeadmConfigPatches = []string{"kind: JoinConfiguration\nnodeRegistration:\n  taints: " + taints + "\n"}
		}
		c.Nodes = append(c.Nodes, n)
	}
	return c, nil
}

// taintsYAML renders key=value:Effect taints as a YAML flow list.
func taintsYAML(taints []string) (string, error) {
	items := []string{}
	for _, t := range taints {
		kv, effect, ok := strings.Cut(t, ":")
		if !ok {
			return "", fmt.Errorf("taint %q: want key=value:Effect", t)
		}
		k, v, _ := strings.Cut(kv, "=")
		items = append(items, fmt.Sprintf("{key: %q, value: %q, effect: %q}", k, v, effect))
	}
	return "[" + strings.Join(items, ", ") + "]", nil
}
