package render

import (
	"fmt"
	"net/netip"
	"sort"
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/kops/pkg/apis/kops"

	"github.com/trellis-dev/trellis/bootstrap/definition"
)

// Annotations Trellis puts on the kops objects it renders.
const (
	AnnotationDefinition = "trellis.dev/definition"
	AnnotationManagedBy  = "trellis.dev/managed-by"
)

// ControlPlaneGroupPrefix names the per-zone control-plane instance groups.
const ControlPlaneGroupPrefix = "control-plane-"

// Spec is a cluster in kops terms.
type Spec struct {
	Cluster        *kops.Cluster
	InstanceGroups []*kops.InstanceGroup
}

// ClusterName is the kops cluster name: <name>.<dnsZone>, or <name>.k8s.local
// when no zone is set.
func ClusterName(d *definition.ClusterDefinition) string {
	zone := d.DNSZone
	if zone == "" {
		zone = "k8s.local"
	}
	return d.Name + "." + zone
}

// ToKops renders an AWS definition. Kind definitions have no kops form.
func ToKops(d *definition.ClusterDefinition) (*Spec, error) {
	if d.Cloud != definition.CloudAWS {
		return nil, fmt.Errorf("cluster %q runs on %q: only aws clusters render to kops", d.Name, d.Cloud)
	}
	name := ClusterName(d)
	c := &kops.Cluster{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Annotations: map[string]string{
				AnnotationDefinition: d.Name,
				AnnotationManagedBy:  "trellis",
			},
		},
	}
	s := &c.Spec
	s.Channel = kops.DefaultChannel
	s.CloudProvider.AWS = &kops.AWSSpec{}
	s.KubernetesVersion = "v" + trimV(d.KubernetesVersion)
	s.Authorization = &kops.AuthorizationSpec{RBAC: &kops.RBACAuthorizationSpec{}}
	s.IAM = &kops.IAMSpec{AllowContainerRegistry: true, Legacy: false}
	s.Kubelet = &kops.KubeletConfigSpec{AnonymousAuth: new(false)}
	s.API.LoadBalancer = &kops.LoadBalancerAccessSpec{Class: kops.LoadBalancerClassNetwork, Type: kops.LoadBalancerTypePublic}
	s.API.Access = []string{"0.0.0.0/0", "::/0"}
	s.SSHAccess = []string{d.Network.VPCCIDR}
	s.CloudLabels = copyMap(d.CloudLabels)
	if s.CloudLabels == nil {
		s.CloudLabels = map[string]string{}
	}
	s.CloudLabels["trellis.dev/cluster"] = d.Name

	n := &s.Networking
	n.NetworkCIDR = d.Network.VPCCIDR
	n.PodCIDR = d.Network.PodCIDR
	n.ServiceClusterIPRange = d.Network.ServiceCIDR
	n.NonMasqueradeCIDR = covering(d.Network.PodCIDR, d.Network.ServiceCIDR)
	// Pod networking is Trellis's own daemon, installed as an addon; on
	// AWS it gives pods VPC addresses, which nodes may ask EC2 for.
	n.CNI = &kops.CNINetworkingSpec{}
	s.AdditionalPolicies = map[string]string{"node": netdPolicy()}
	// The API is reached through its load balancer; no Route53 records.
	n.Topology = &kops.TopologySpec{DNS: kops.DNSTypeNone}
	for _, sub := range d.Network.Subnets {
		if sub.Private != "" {
			n.Subnets = append(n.Subnets, kops.ClusterSubnetSpec{Name: sub.Zone, CIDR: sub.Private, Zone: sub.Zone, Type: kops.SubnetTypePrivate})
		}
		if sub.Public != "" {
			n.Subnets = append(n.Subnets, kops.ClusterSubnetSpec{Name: "utility-" + sub.Zone, CIDR: sub.Public, Zone: sub.Zone, Type: kops.SubnetTypeUtility})
		}
	}

	cp := d.ControlPlane
	s.KubeAPIServer = &kops.KubeAPIServerConfig{
		MaxRequestsInflight:         cp.APIServer.MaxRequestsInflight,
		MaxMutatingRequestsInflight: cp.APIServer.MaxMutatingRequestsInflight,
		WatchCacheSizes:             append([]string(nil), cp.APIServer.WatchCacheSizes...),
	}
	s.KubeControllerManager = &kops.KubeControllerManagerConfig{
		KubeAPIQPS:   quantity(cp.ControllerManager.QPS),
		KubeAPIBurst: new(cp.ControllerManager.Burst),
	}
	s.KubeScheduler = &kops.KubeSchedulerConfig{
		KubeAPIQPS:   quantity(cp.Scheduler.QPS),
		KubeAPIBurst: new(cp.Scheduler.Burst),
	}

	spec := &Spec{Cluster: c}
	var members []kops.EtcdMemberSpec
	for _, zone := range cp.Zones {
		igName := ControlPlaneGroupPrefix + zone
		members = append(members, kops.EtcdMemberSpec{Name: zoneSuffix(zone), InstanceGroup: new(igName), EncryptedVolume: new(true)})
		cpg := instanceGroup(name, igName, kops.InstanceGroupRoleControlPlane, kops.InstanceGroupSpec{
			Image:       cp.Image,
			MachineType: cp.MachineType,
			MinSize:     new(int32(1)),
			MaxSize:     new(int32(1)),
			Subnets:     []string{zone},
		})
		instanceSettings(d, &cpg.Spec, cp.InstanceMetadata, cp.RootVolume)
		if err := podCapacity(&cpg.Spec, cp.MachineType, definition.MachineArchitecture(cp.MachineType), nil); err != nil {
			return nil, fmt.Errorf("controlPlane: %w", err)
		}
		spec.InstanceGroups = append(spec.InstanceGroups, cpg)
	}
	etcdEnv := []kops.EnvVar{
		{Name: "ETCD_QUOTA_BACKEND_BYTES", Value: strconv.FormatInt(cp.Etcd.QuotaBackendBytes, 10)},
		{Name: "ETCD_AUTO_COMPACTION_MODE", Value: cp.Etcd.AutoCompactionMode},
		{Name: "ETCD_AUTO_COMPACTION_RETENTION", Value: cp.Etcd.AutoCompactionRetention},
	}
	for _, ec := range []struct {
		name string
		cpu  string
		mem  string
	}{{"main", "200m", "100Mi"}, {"events", "100m", "100Mi"}} {
		s.EtcdClusters = append(s.EtcdClusters, kops.EtcdClusterSpec{
			Name:          ec.name,
			Members:       append([]kops.EtcdMemberSpec(nil), members...),
			CPURequest:    new(resource.MustParse(ec.cpu)),
			MemoryRequest: new(resource.MustParse(ec.mem)),
			Manager: &kops.EtcdManagerSpec{
				BackupRetentionDays: new(uint32(90)),
				Env:                 append([]kops.EnvVar(nil), etcdEnv...),
			},
		})
	}

	for _, g := range d.InstanceGroups {
		ig := instanceGroup(name, g.Name, kops.InstanceGroupRoleNode, kops.InstanceGroupSpec{
			Image:       g.Image,
			MachineType: g.MachineType,
			MinSize:     g.MinSize,
			MaxSize:     g.MaxSize,
			Subnets:     append([]string(nil), g.Zones...),
			Taints:      append([]string(nil), g.Taints...),
			RollingUpdate: &kops.RollingUpdate{
				MaxSurge:       new(intstr.Parse(g.MaxSurge)),
				MaxUnavailable: new(intstr.Parse(g.MaxUnavailable)),
			},
		})
		for k, v := range g.Labels {
			ig.Spec.NodeLabels[k] = v
		}
		instanceSettings(d, &ig.Spec, g.InstanceMetadata, g.RootVolume)
		nodeGroupSettings(&ig.Spec, &g)
		if err := podCapacity(&ig.Spec, g.MachineType, g.Architecture, g.MixedInstances); err != nil {
			return nil, fmt.Errorf("instance group %s: %w", g.Name, err)
		}
		spec.InstanceGroups = append(spec.InstanceGroups, ig)
	}
	sort.SliceStable(spec.InstanceGroups, func(i, j int) bool { return spec.InstanceGroups[i].Name < spec.InstanceGroups[j].Name })
	return spec, nil
}

func instanceGroup(cluster, name string, role kops.InstanceGroupRole, spec kops.InstanceGroupSpec) *kops.InstanceGroup {
	spec.Role = role
	spec.NodeLabels = map[string]string{kops.NodeLabelInstanceGroup: name}
	return &kops.InstanceGroup{
		ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: map[string]string{kops.LabelClusterName: cluster},
		},
		Spec: spec,
	}
}

// zoneSuffix is the etcd member name for a zone: us-east-1a -> a.
func zoneSuffix(zone string) string {
	if zone == "" {
		return zone
	}
	return zone[len(zone)-1:]
}

func trimV(v string) string {
	if len(v) > 0 && v[0] == 'v' {
		return v[1:]
	}
	return v
}

func quantity(n int32) *resource.Quantity {
	return resource.NewQuantity(int64(n), resource.DecimalSI)
}

func copyMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// covering returns the smallest prefix that contains both CIDRs: kops wants
// pod and service ranges inside one non-masquerade range.
func covering(a, b string) string {
	pa, err1 := netip.ParsePrefix(a)
	pb, err2 := netip.ParsePrefix(b)
	if err1 != nil || err2 != nil {
		return ""
	}
	bits := min(pa.Bits(), pb.Bits())
	for ; bits > 0; bits-- {
		p, _ := pa.Addr().Prefix(bits)
		if p.Contains(pb.Addr()) {
			return p.String()
		}
	}
	return "0.0.0.0/0"
}
