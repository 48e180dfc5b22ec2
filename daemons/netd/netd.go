// Package netd is the pod network daemon on every node (the trellis-netd
// addon): it writes the node's CNI configuration (a bridge with host-local
// IPAM over the node's pod CIDR), keeps one route per other node, its pod
// CIDR via its InternalIP, the way kindnetd wires kind clusters, masquerades
// traffic leaving the cluster CIDR, and keeps pods from the instance
// metadata address unless they are allowed. Routes are
// tagged with their own routing protocol number, so only netd's own routes
// are ever replaced or removed.
package netd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/daemons/netd/vpc"
	"github.com/trellis-dev/trellis/internal/fsync"
	"github.com/trellis-dev/trellis/internal/nodepods"
)

// RouteProtocol marks netd's routes (see /etc/iproute2/rt_protos).
const RouteProtocol netlink.RouteProtocol = 0x74

// Config configures the daemon.
type Config struct {
	NodeName string
	Client   kubernetes.Interface
	// CNIConfDir receives 10-trellis.conflist (default /etc/cni/net.d).
	CNIConfDir string
	// Bridge is the pods' bridge (default trellis0); MTU its MTU (1500).
	Bridge string
	MTU    int
	// Netlink is the namespace's handle (default: the current namespace).
	Netlink *netlink.Handle
	// Resync bounds how long a route lost to an outside change stays lost
	// (default 30s).
	Resync time.Duration
	// ClusterCIDR is the cluster's pod CIDR: traffic from it to outside it
	// is masqueraded. Empty: no masquerading.
	ClusterCIDR string
	// Firewall programs iptables (masquerade, metadata block); Exec
	// prefixes its commands (tests: "ip netns exec NS").
	Firewall bool
	Exec     []string
	// FirewallEvery is how often unchanged firewall rules are written
	// again, to repair what changed them behind netd's back (default
	// 30s); changed ones are written at once. Pods come and go far more
	// often than the rules change: a pod's start does not pay for
	// iptables-restore.
	FirewallEvery time.Duration
	// VPC switches to the AWS mode (nil: the bridge over the node's pod
	// CIDR, with routes to the other nodes').
	VPC    *VPC
	Logger *slog.Logger
}

// Daemon keeps the node's pod network.
type Daemon struct {
	cfg   Config
	log   *slog.Logger
	nodes cache.SharedIndexInformer
	pods  cache.SharedIndexInformer
	kick  chan struct{}
	ipt   iptables

	mu      sync.Mutex
	applied int

	// The firewall's inputs when last written, and when.
	firewallKey string
	firewallAt  time.Time
}

// firewallDue reports whether rules made from key need writing: they
// changed, or FirewallEvery passed. done records a successful write.
func (d *Daemon) firewallDue(key string) (due bool, done func()) {
	due = key != d.firewallKey || time.Since(d.firewallAt) >= d.cfg.FirewallEvery
	return due, func() { d.firewallKey, d.firewallAt = key, time.Now() }
}

// New returns a daemon; Run starts it.
func New(cfg Config) (*Daemon, error) {
	if cfg.NodeName == "" {
		return nil, errors.New("the node name is required")
	}
	if cfg.CNIConfDir == "" {
		cfg.CNIConfDir = "/etc/cni/net.d"
	}
	if cfg.Bridge == "" {
		cfg.Bridge = "trellis0"
	}
	if cfg.MTU == 0 {
		cfg.MTU = 1500
	}
	if cfg.Resync == 0 {
		cfg.Resync = 30 * time.Second
	}
	if cfg.FirewallEvery == 0 {
		cfg.FirewallEvery = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.VPC != nil {
		if cfg.VPC.Pool == nil {
			return nil, errors.New("the AWS mode needs an address pool")
		}
		cfg.VPC.defaults()
	}
	if cfg.Netlink == nil {
		h, err := netlink.NewHandle()
		if err != nil {
			return nil, fmt.Errorf("open a netlink handle: %w", err)
		}
		cfg.Netlink = h
	}
	d := &Daemon{cfg: cfg, log: cfg.Logger, kick: make(chan struct{}, 1), ipt: iptables{prefix: cfg.Exec}}
	f := informers.NewSharedInformerFactory(cfg.Client, 0)
	d.nodes = f.Core().V1().Nodes().Informer()
	// This node's pods: which may reach the metadata address.
	d.pods = nodepods.NewInformer(cfg.Client, cfg.NodeName)
	poke := func(any) {
		select {
		case d.kick <- struct{}{}:
		default:
		}
	}
	for _, inf := range []cache.SharedIndexInformer{d.nodes, d.pods} {
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: poke, UpdateFunc: func(_, n any) { poke(n) }, DeleteFunc: poke}); err != nil {
			return nil, fmt.Errorf("watch nodes and pods: %w", err)
		}
	}
	return d, nil
}

// Run reconciles until ctx ends.
func (d *Daemon) Run(ctx context.Context) error {
	go d.nodes.Run(ctx.Done())
	go d.pods.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), d.nodes.HasSynced, d.pods.HasSynced) {
		return ctx.Err()
	}
	if v := d.cfg.VPC; v != nil {
		go v.Pool.Run(ctx, v.Sync)
		go func() {
			if err := vpc.ServeSocket(ctx, v.Socket, v.Pool.Handler(v.MTU), d.log); err != nil {
				d.log.Error("the CNI plugin's socket failed", "socket", v.Socket, "err", err)
			}
		}()
	}
	t := time.NewTicker(d.cfg.Resync)
	defer t.Stop()
	for {
		if err := d.Reconcile(); err != nil {
			d.log.Warn("reconcile failed; will retry", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-d.kick:
		case <-t.C:
		}
	}
}

// Applied is the number of successful reconciles (tests wait on it).
func (d *Daemon) Applied() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.applied
}

// Reconcile writes the CNI config and makes netd's routes equal to the
// other nodes' pod CIDRs.
func (d *Daemon) Reconcile() error {
	if d.cfg.VPC != nil {
		if err := d.reconcileVPC(); err != nil {
			return err
		}
		d.mu.Lock()
		d.applied++
		d.mu.Unlock()
		return nil
	}
	var errs []error
	want := map[string]net.IP{} // pod CIDR -> next hop
	ownCIDR := ""
	for _, obj := range d.nodes.GetStore().List() {
		n := obj.(*corev1.Node)
		cidr := n.Spec.PodCIDR
		if n.Name == d.cfg.NodeName {
			ownCIDR = cidr
			if cidr != "" {
				if err := d.writeCNI(cidr); err != nil {
					errs = append(errs, err)
				}
			}
			continue
		}
		ip := internalIP(n)
		if cidr == "" || ip == nil {
			continue
		}
		want[cidr] = ip
	}
	h := d.cfg.Netlink
	have, err := h.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Protocol: RouteProtocol}, netlink.RT_FILTER_PROTOCOL)
	if err != nil {
		return fmt.Errorf("failed to list routes: %w", err)
	}
	for _, r := range have {
		if r.Dst == nil {
			continue
		}
		if gw, ok := want[r.Dst.String()]; !ok || !gw.Equal(r.Gw) {
			if err := h.RouteDel(&r); err != nil {
				errs = append(errs, fmt.Errorf("failed to remove route %s: %w", r.Dst, err))
			}
		}
	}
	for cidr, gw := range want {
		_, dst, err := net.ParseCIDR(cidr)
		if err != nil {
			errs = append(errs, fmt.Errorf("node pod CIDR %q: %w", cidr, err))
			continue
		}
		if err := h.RouteReplace(&netlink.Route{Dst: dst, Gw: gw, Protocol: RouteProtocol}); err != nil {
			errs = append(errs, fmt.Errorf("failed to route %s via %s: %w", cidr, gw, err))
		}
	}
	if d.cfg.Firewall {
		var allowed []string
		for _, obj := range d.pods.GetStore().List() {
			p := obj.(*corev1.Pod)
			if p.Annotations[wellknown.AnnotationMetadataAccess] == "allow" && p.Status.PodIP != "" && !p.Spec.HostNetwork {
				allowed = append(allowed, p.Status.PodIP)
			}
		}
		sort.Strings(allowed)
		if due, done := d.firewallDue(fmt.Sprint(ownCIDR, d.cfg.ClusterCIDR, allowed)); due {
			if err := d.ipt.sync(ownCIDR, d.cfg.ClusterCIDR, allowed); err != nil {
				errs = append(errs, fmt.Errorf("iptables: %w", err))
			} else {
				done()
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	d.mu.Lock()
	d.applied++
	d.mu.Unlock()
	return nil
}

func internalIP(n *corev1.Node) net.IP {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return net.ParseIP(a.Address)
		}
	}
	return nil
}

// ConfList is the CNI configuration for a pod CIDR: the reference bridge,
// host-local and portmap plugins (containernetworking/plugins).
func ConfList(bridge string, mtu int, podCIDR string) ([]byte, error) {
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "trellis",
		"plugins": []any{
			map[string]any{
				"type": "bridge", "bridge": bridge, "isGateway": true, "ipMasq": false, "hairpinMode": true, "mtu": mtu,
				"ipam": map[string]any{"type": "host-local", "ranges": []any{[]any{map[string]any{"subnet": podCIDR}}}, "routes": []any{map[string]any{"dst": "0.0.0.0/0"}}},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	return json.MarshalIndent(conf, "", "  ")
}

// writeCNI writes the bridge mode's conflist.
func (d *Daemon) writeCNI(podCIDR string) error {
	b, err := ConfList(d.cfg.Bridge, d.cfg.MTU, podCIDR)
	if err != nil {
		return err
	}
	return d.writeConf(b, "podCIDR "+podCIDR)
}

// writeConf writes the conflist atomically, only when it changed.
func (d *Daemon) writeConf(b []byte, what string) error {
	path := filepath.Join(d.cfg.CNIConfDir, "10-trellis.conflist")
	if cur, err := os.ReadFile(path); err == nil && bytes.Equal(cur, b) {
		return nil
	}
	if err := os.MkdirAll(d.cfg.CNIConfDir, 0o755); err != nil {
		return fmt.Errorf("make the CNI configuration directory: %w", err)
	}
	if err := fsync.Replace(path, b, 0o644); err != nil {
		return err
	}
	d.log.Info("wrote the CNI configuration", "path", path, "for", what)
	return nil
}
