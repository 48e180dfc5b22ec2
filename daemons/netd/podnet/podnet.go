// Package podnet wires pods that hold VPC addresses, the AWS VPC CNI's
// way: a veth per pod, the address as a /32 on the pod's side with a
// link-local gateway answered by a static neighbour entry, a /32 route to
// the pod on the host, and policy rules so a pod whose address belongs to
// a secondary ENI sends through that ENI (the VPC drops a packet leaving
// an ENI that does not own its source address). The trellis-cni plugin
// wires pods; netd wires the secondary ENIs' route tables.
package podnet

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

const (
	// Gateway is the pod's default gateway: the host's veth answers for
	// it through a permanent neighbour entry in the pod.
	Gateway = "169.254.1.1"
	// VethPrefix starts every host-side pod interface (netd's firewall
	// matches pods by it).
	VethPrefix = "trl"
	// Rule priorities, as the AWS VPC CNI's: traffic to a pod takes the
	// main table before any ENI's table; a pod's own traffic takes its
	// ENI's.
	RuleToPod   = 512
	RuleOutMark = 1024
	RuleFromPod = 1536
	// OutboundMark marks pods' connections that leave the VPC: they
	// take the main table, and so the primary ENI, whose address they
	// are masqueraded to.
	OutboundMark = 0x80
)

// EnsureOutboundRule adds the rule that routes OutboundMark traffic by the
// main table (once).
func EnsureOutboundRule(h *netlink.Handle) error {
	r := netlink.NewRule()
	r.Mark, r.Mask, r.Table, r.Priority = OutboundMark, new(uint32(OutboundMark)), syscall.RT_TABLE_MAIN, RuleOutMark
	if err := h.RuleAdd(r); err != nil && !errors.Is(err, syscall.EEXIST) {
		return fmt.Errorf("outbound mark rule: %w", err)
	}
	return nil
}

// HostVeth names the host side of a pod interface (at most 15 bytes).
func HostVeth(container, iface string) string {
	h := sha256.Sum256([]byte(container + "/" + iface))
	return VethPrefix + hex.EncodeToString(h[:])[:11]
}

// Pod is one pod interface to wire.
type Pod struct {
	// Netns is the pod's network namespace (a path); Iface its interface.
	Netns string
	Iface string
	// HostVeth is the host side's name (HostVeth).
	HostVeth string
	IP       netip.Addr
	// Table is its ENI's route table; 0: the main table (primary ENI).
	Table int
	MTU   int
}

// Setup wires p, replacing what a failed earlier attempt left. host is the
// node's namespace.
func Setup(host *netlink.Handle, p Pod) error {
	if !p.IP.Is4() {
		return fmt.Errorf("pod address %s: only IPv4 is supported", p.IP)
	}
	ns, err := netns.GetFromPath(p.Netns)
	if err != nil {
		return fmt.Errorf("pod network namespace %s: %w", p.Netns, err)
	}
	defer ns.Close()
	in, err := netlink.NewHandleAt(ns)
	if err != nil {
		return fmt.Errorf("pod network namespace %s: %w", p.Netns, err)
	}
	defer in.Close()
	if err := deleteLink(host, p.HostVeth); err != nil {
		return err
	}
	if err := deleteLink(in, p.Iface); err != nil {
		return err
	}
	mtu := p.MTU
	if mtu == 0 {
		mtu = 9001
	}
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: p.HostVeth, MTU: mtu}, PeerName: p.Iface, PeerNamespace: netlink.NsFd(int(ns))}
	if err := host.LinkAdd(veth); err != nil {
		return fmt.Errorf("failed to create veth %s: %w", p.HostVeth, err)
	}
	hostLink, err := host.LinkByName(p.HostVeth)
	if err != nil {
		return fmt.Errorf("find veth %s: %w", p.HostVeth, err)
	}
	if err := host.LinkSetUp(hostLink); err != nil {
		return fmt.Errorf("failed to bring %s up: %w", p.HostVeth, err)
	}
	if err := wirePodSide(in, p, hostLink.Attrs().HardwareAddr); err != nil {
		return err
	}
	return wireHostSide(host, p, hostLink)
}

func wirePodSide(in *netlink.Handle, p Pod, gwMAC net.HardwareAddr) error {
	if lo, err := in.LinkByName("lo"); err == nil {
		_ = in.LinkSetUp(lo)
	}
	link, err := in.LinkByName(p.Iface)
	if err != nil {
		return fmt.Errorf("pod interface %s: %w", p.Iface, err)
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: p.IP.AsSlice(), Mask: net.CIDRMask(32, 32)}}
	if err := in.AddrAdd(link, addr); err != nil {
		return fmt.Errorf("failed to give %s to the pod: %w", p.IP, err)
	}
	if err := in.LinkSetUp(link); err != nil {
		return fmt.Errorf("bring up pod interface %s: %w", p.Iface, err)
	}
	gw := net.ParseIP(Gateway)
	idx := link.Attrs().Index
	if err := in.RouteReplace(&netlink.Route{LinkIndex: idx, Dst: &net.IPNet{IP: gw, Mask: net.CIDRMask(32, 32)}, Scope: netlink.SCOPE_LINK}); err != nil {
		return fmt.Errorf("pod route to its gateway: %w", err)
	}
	if err := in.RouteReplace(&netlink.Route{LinkIndex: idx, Gw: gw}); err != nil {
		return fmt.Errorf("pod default route: %w", err)
	}
	if err := in.NeighSet(&netlink.Neigh{LinkIndex: idx, State: netlink.NUD_PERMANENT, IP: gw, HardwareAddr: gwMAC, Family: netlink.FAMILY_V4}); err != nil {
		return fmt.Errorf("pod gateway neighbour: %w", err)
	}
	return nil
}

func wireHostSide(host *netlink.Handle, p Pod, link netlink.Link) error {
	dst := &net.IPNet{IP: p.IP.AsSlice(), Mask: net.CIDRMask(32, 32)}
	if err := host.RouteReplace(&netlink.Route{LinkIndex: link.Attrs().Index, Dst: dst, Scope: netlink.SCOPE_LINK}); err != nil {
		return fmt.Errorf("host route to %s: %w", p.IP, err)
	}
	for _, r := range rules(p) {
		if err := host.RuleAdd(r); err != nil && !errors.Is(err, syscall.EEXIST) {
			return fmt.Errorf("policy rule for %s: %w", p.IP, err)
		}
	}
	return nil
}

// rules are the pod's policy rules: to it via main; from it via its ENI's
// table (primary ENI: none, the main table serves).
func rules(p Pod) []*netlink.Rule {
	dst := &net.IPNet{IP: p.IP.AsSlice(), Mask: net.CIDRMask(32, 32)}
	to := netlink.NewRule()
	to.Dst, to.Table, to.Priority = dst, syscall.RT_TABLE_MAIN, RuleToPod
	out := []*netlink.Rule{to}
	if p.Table > 0 {
		from := netlink.NewRule()
		from.Src, from.Table, from.Priority = dst, p.Table, RuleFromPod
		out = append(out, from)
	}
	return out
}

// Teardown unwires p; what is already gone is fine (CNI DEL repeats).
func Teardown(host *netlink.Handle, p Pod) error {
	var errs []error
	if p.IP.IsValid() {
		for _, r := range rules(p) {
			if err := host.RuleDel(r); err != nil && !isGone(err) {
				errs = append(errs, fmt.Errorf("policy rule for %s: %w", p.IP, err))
			}
		}
	}
	// Deleting the host side takes the pod side and the /32 route along.
	if err := deleteLink(host, p.HostVeth); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func deleteLink(h *netlink.Handle, name string) error {
	l, err := h.LinkByName(name)
	var nf netlink.LinkNotFoundError
	if errors.As(err, &nf) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("find link %s: %w", name, err)
	}
	if err := h.LinkDel(l); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("failed to delete %s: %w", name, err)
	}
	return nil
}
