package netd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/daemons/netd/podnet"
	"github.com/trellis-dev/trellis/daemons/netd/vpc"
)

// VPC is netd's AWS mode: pods take VPC addresses from the pool, through
// the trellis-cni plugin, instead of a bridge over the node's pod CIDR.
type VPC struct {
	Pool *vpc.Pool
	// Socket is where the plugin reaches netd (netdapi.DefaultSocket).
	Socket string
	// MTU of pod interfaces (default 9001, the VPC's jumbo frames).
	MTU int
	// Collect is how long a pod's address outlives the pod before it is
	// collected (default 1m); Sync how often the pool syncs (30s).
	Collect time.Duration
	Sync    time.Duration
}

func (v *VPC) defaults() {
	if v.MTU == 0 {
		v.MTU = 9001
	}
	if v.Collect == 0 {
		v.Collect = time.Minute
	}
	if v.Sync == 0 {
		v.Sync = 30 * time.Second
	}
}

// WireENI is the pool's Config.Wire for netd: it readies a secondary
// ENI's interface and route table in the node's namespace (h; exec
// prefixes the commands run there, as Config.Exec).
func WireENI(h *netlink.Handle, exec []string) func(context.Context, vpc.ENI) error {
	return func(_ context.Context, e vpc.ENI) error {
		mac, err := net.ParseMAC(e.MAC)
		if err != nil {
			return fmt.Errorf("ENI %s: %w", e.ID, err)
		}
		name, err := podnet.SetupENI(h, podnet.ENI{MAC: mac, Primary: e.Primary, Subnet: e.CIDR, Table: e.Device + 1})
		if err != nil {
			return err
		}
		// Replies to a pod on this ENI arrive on it, though the main
		// table reaches the subnet through the primary ENI: loose
		// reverse-path filtering on it.
		return setSysctl(exec, "/proc/sys/net/ipv4/conf/"+name+"/rp_filter", "2")
	}
}

// setSysctl writes a /proc/sys file in the node's namespace: directly, or
// through the exec prefix (tests: "ip netns exec NS"), whose namespace a
// shell sees in its /proc/sys/net.
func setSysctl(exec []string, path, value string) error {
	if len(exec) == 0 {
		if err := os.WriteFile(path, []byte(value), 0o644); err != nil {
			return fmt.Errorf("sysctl %s: %w", path, err)
		}
		return nil
	}
	return iptables{prefix: exec}.run(nil, "sh", "-c", fmt.Sprintf("echo %s > %s", value, path))
}

// ConfListVPC is the CNI configuration of the AWS mode: trellis-cni, then
// portmap.
func ConfListVPC(socket string) ([]byte, error) {
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "trellis",
		"plugins": []any{
			map[string]any{"type": "trellis-cni", "socket": socket},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	return json.MarshalIndent(conf, "", "  ")
}

// reconcileVPC writes the CNI configuration, programs the firewall and
// collects the addresses of pods that are gone.
func (d *Daemon) reconcileVPC() error {
	v := d.cfg.VPC
	var errs []error
	b, err := ConfListVPC(v.Socket)
	if err != nil {
		return err
	}
	if err := d.writeConf(b, "AWS mode"); err != nil {
		errs = append(errs, err)
	}
	pods := map[string]*corev1.Pod{}
	var allowed []string
	for _, obj := range d.pods.GetStore().List() {
		p := obj.(*corev1.Pod)
		pods[p.Namespace+"/"+p.Name] = p
		if p.Annotations[wellknown.AnnotationMetadataAccess] == "allow" && p.Status.PodIP != "" && !p.Spec.HostNetwork {
			allowed = append(allowed, p.Status.PodIP)
		}
	}
	if err := podnet.EnsureOutboundRule(d.cfg.Netlink); err != nil {
		errs = append(errs, err)
	}
	if d.cfg.Firewall {
		sort.Strings(allowed)
		cidrs, primary := v.Pool.VPCCIDRs(), v.Pool.Primary()
		if due, done := d.firewallDue(fmt.Sprint(cidrs, primary, allowed)); due {
			if err := d.ipt.syncVPC(cidrs, primary, allowed); err != nil {
				errs = append(errs, fmt.Errorf("iptables: %w", err))
			} else {
				done()
			}
		}
	}
	if _, err := v.Pool.Collect(func(a vpc.Assignment) bool { return holds(pods[a.Pod], a.IP) }, v.Collect); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// holds reports whether pod still runs with ip: it exists on the node and
// its status shows no other address (a new sandbox's address replaces an
// old one's).
func holds(p *corev1.Pod, ip netip.Addr) bool {
	if p == nil {
		return false
	}
	if len(p.Status.PodIPs) == 0 {
		return true
	}
	for _, pip := range p.Status.PodIPs {
		if pip.IP == ip.String() {
			return true
		}
	}
	return false
}

// VPCOptions open the AWS mode for a node.
type VPCOptions struct {
	Client   kubernetes.Interface
	NodeName string
	// Cluster tags the ENIs netd creates.
	Cluster string
	// StateDir holds the address checkpoint and the plugin's socket; on
	// tmpfs (/run/trellis-netd), so it outlives netd and not the pods.
	StateDir string
	// EC2 is the client (nil: the default AWS configuration, in the node's
	// region; AWS_ENDPOINT_URL reaches an emulator).
	EC2 vpc.EC2
	// Netlink and Exec reach the node's namespace (nil: the current one).
	Netlink *netlink.Handle
	Exec    []string
	// Pool tunes the address pool (its EC2, InstanceID, StateFile, Wire
	// and Log are filled in).
	Pool vpc.Config
	Log  *slog.Logger
}

// OpenVPC finds the node's instance from its providerID
// (aws:///<zone>/<instance>) and opens its address pool.
func OpenVPC(ctx context.Context, o VPCOptions) (*VPC, error) {
	n, err := o.Client.CoreV1().Nodes().Get(ctx, o.NodeName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", o.NodeName, err)
	}
	zone, id, err := ParseProviderID(n.Spec.ProviderID)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", o.NodeName, err)
	}
	if o.EC2 == nil {
		cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion(zone[:len(zone)-1]))
		if err != nil {
			return nil, fmt.Errorf("AWS configuration: %w", err)
		}
		o.EC2 = vpc.NewClient(cfg)
	}
	if o.Netlink == nil {
		if o.Netlink, err = netlink.NewHandle(); err != nil {
			return nil, fmt.Errorf("open a netlink handle: %w", err)
		}
	}
	pc := o.Pool
	pc.EC2, pc.InstanceID, pc.Cluster, pc.Log = o.EC2, id, o.Cluster, o.Log
	pc.StateFile = filepath.Join(o.StateDir, "addresses.json")
	pc.Wire = WireENI(o.Netlink, o.Exec)
	pool, err := vpc.Open(ctx, pc)
	if err != nil {
		return nil, err
	}
	return &VPC{Pool: pool, Socket: filepath.Join(o.StateDir, "cni.sock")}, nil
}

// ParseProviderID splits an AWS node's providerID into its zone and
// instance id.
func ParseProviderID(s string) (zone, instance string, err error) {
	rest, ok := strings.CutPrefix(s, "aws:///")
	zone, instance, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 || len(zone) < 2 || !strings.HasPrefix(instance, "i-") {
		return "", "", fmt.Errorf("providerID %q is not aws:///<zone>/<instance id>", s)
	}
	return zone, instance, nil
}
