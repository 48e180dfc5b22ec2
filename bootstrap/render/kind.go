package render

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	kindv1alpha4 "sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"

	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/internal/versions"
)

// HostQuirks are properties of the machine a local cluster runs on that its
// nodes must be configured around (local/kindcluster.DetectHostQuirks reads
// them on this machine).
type HostQuirks struct {
	// CgroupV1: Kubernetes 1.35+ kubelets refuse cgroup v1 unless told
	// failCgroupV1: false.
	CgroupV1 bool
	// NoNegativeOOMScoreAdj: the host forbids negative OOM score
	// adjustments, so containerd must not set them (restrict_oom_score_adj).
	NoNegativeOOMScoreAdj bool
}

// DefaultNodeImage is the kind node image `trellis local node-image` builds.
var DefaultNodeImage = "trellis/kind-node:" + versions.Kubernetes

// KindImageRepository names the control-plane images (kube-apiserver,
// etcd, ...) of the local node image: kubeadm is pointed at it, and addons
// that run a control plane of their own (the fleet's) use the same images.
// ProductionImageRepository is where AWS clusters take them.
const (
	KindImageRepository       = "trellis.local/k8s"
	ProductionImageRepository = "registry.k8s.io"
)

// ImageRepository is where a cluster's nodes find the Kubernetes
// control-plane images.
func ImageRepository(d *definition.ClusterDefinition) string {
	if d.Cloud == definition.CloudKind {
		return KindImageRepository
	}
	return ProductionImageRepository
}

// EtcdImageTag is the tag kubeadm's etcd image carries for an etcd version
// (v3.6.10 -> 3.6.10-0).
func EtcdImageTag(v string) string { return strings.TrimPrefix(v, "v") + "-0" }

// LabelInstanceGroup is the node label naming the instance group a node
// belongs to: kops sets it on AWS (kops-controller), `trellis local up` on
// the kind nodes once they have joined, from LabelKindInstanceGroup (a
// kubelet may not label its own node in the k8s.io namespace).
const LabelInstanceGroup = "kops.k8s.io/instancegroup"

// LabelKindInstanceGroup is the instance-group label kind nodes register
// with.
const LabelKindInstanceGroup = "trellis.dev/instance-group"

// ToKind renders a kind definition as a kind cluster configuration: minSize
// nodes (at least one) per instance group carrying the group's labels and
// taints, the first of them the control plane (which then carries only the
// group's taints, not the control-plane one); the default CNI off
// (trellis-netd is the CNI); the definition's control-plane tuning applied
// through kubeadm, as kops applies it on AWS.
func ToKind(d *definition.ClusterDefinition, image string, q HostQuirks) (*kindv1alpha4.Cluster, error) {
	if d.Cloud != definition.CloudKind {
		return nil, fmt.Errorf("cluster %q runs on %q: only kind clusters render to a kind configuration", d.Name, d.Cloud)
	}
	if len(d.InstanceGroups) == 0 {
		return nil, fmt.Errorf("cluster %q: a kind cluster needs at least one instance group", d.Name)
	}
	c := &kindv1alpha4.Cluster{
		TypeMeta: kindv1alpha4.TypeMeta{Kind: "Cluster", APIVersion: "kind.x-k8s.io/v1alpha4"},
		Name:     d.Name,
		Networking: kindv1alpha4.Networking{
			PodSubnet:         d.Network.PodCIDR,
			ServiceSubnet:     d.Network.ServiceCIDR,
			DisableDefaultCNI: true,
		},
	}
	c.KubeadmConfigPatches = append(c.KubeadmConfigPatches, clusterConfigurationPatch(d), kubeletConfigurationPatch(q))
	if q.NoNegativeOOMScoreAdj {
		// The node image's containerd (Debian's 1.6) reads config version 2.
		c.ContainerdConfigPatches = append(c.ContainerdConfigPatches,
			"[plugins.\"io.containerd.grpc.v1.cri\"]\n  restrict_oom_score_adj = true\n")
	}
	for i, ig := range d.InstanceGroups {
		n := 1
		if ig.MinSize != nil && *ig.MinSize > 1 {
			n = int(*ig.MinSize)
		}
		labels := map[string]string{LabelKindInstanceGroup: ig.Name}
		for k, v := range ig.Labels {
			labels[k] = v
		}
		for j := range n {
			node := kindv1alpha4.Node{Role: kindv1alpha4.WorkerRole, Image: image, Labels: labels}
			if i == 0 && j == 0 {
				node.Role = kindv1alpha4.ControlPlaneRole
				node.KubeadmConfigPatches = []string{taintsPatch("InitConfiguration", ig.Taints)}
			} else if len(ig.Taints) > 0 {
				node.KubeadmConfigPatches = []string{taintsPatch("JoinConfiguration", ig.Taints)}
			}
			c.Nodes = append(c.Nodes, node)
		}
	}
	return c, nil
}

// KindYAML serialises a kind configuration.
func KindYAML(c *kindv1alpha4.Cluster) ([]byte, error) {
	b, err := yaml.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("failed to serialise kind config %s: %w", c.Name, err)
	}
	return b, nil
}

func clusterConfigurationPatch(d *definition.ClusterDefinition) string {
	cp := d.ControlPlane
	var b strings.Builder
	b.WriteString("kind: ClusterConfiguration\napiServer:\n  extraArgs:\n")
	arg(&b, "max-requests-inflight", strconv.Itoa(int(cp.APIServer.MaxRequestsInflight)))
	arg(&b, "max-mutating-requests-inflight", strconv.Itoa(int(cp.APIServer.MaxMutatingRequestsInflight)))
	if len(cp.APIServer.WatchCacheSizes) > 0 {
		arg(&b, "watch-cache-sizes", strings.Join(cp.APIServer.WatchCacheSizes, ","))
	}
	b.WriteString("controllerManager:\n  extraArgs:\n")
	arg(&b, "kube-api-qps", strconv.Itoa(int(cp.ControllerManager.QPS)))
	arg(&b, "kube-api-burst", strconv.Itoa(int(cp.ControllerManager.Burst)))
	b.WriteString("etcd:\n  local:\n    extraArgs:\n")
	etcd := map[string]string{
		"quota-backend-bytes":       strconv.FormatInt(cp.Etcd.QuotaBackendBytes, 10),
		"auto-compaction-mode":      cp.Etcd.AutoCompactionMode,
		"auto-compaction-retention": cp.Etcd.AutoCompactionRetention,
	}
	keys := make([]string, 0, len(etcd))
	for k := range etcd {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "    - name: %s\n      value: %q\n", k, etcd[k])
	}
	return b.String()
}

func arg(b *strings.Builder, name, value string) {
	fmt.Fprintf(b, "  - name: %s\n    value: %q\n", name, value)
}

func kubeletConfigurationPatch(q HostQuirks) string {
	s := "kind: KubeletConfiguration\nserializeImagePulls: false\n"
	if q.CgroupV1 {
		s += "failCgroupV1: false\n"
	}
	return s
}

// taintsPatch sets a node's taints through kubeadm; an empty list drops
// the control-plane taint kubeadm would otherwise add.
func taintsPatch(kind string, taints []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "kind: %s\nnodeRegistration:\n  taints:", kind)
	if len(taints) == 0 {
		b.WriteString(" []\n")
		return b.String()
	}
	b.WriteString("\n")
	for _, t := range taints {
		key, effect, _ := strings.Cut(t, ":")
		key, value, _ := strings.Cut(key, "=")
		fmt.Fprintf(&b, "  - key: %s\n    value: %q\n    effect: %s\n", key, value, effect)
	}
	return b.String()
}
