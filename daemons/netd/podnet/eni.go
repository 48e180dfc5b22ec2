package podnet

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"github.com/vishvananda/netlink"
)

// ENI is a secondary ENI as the node sees it: an interface found by its
// MAC address.
type ENI struct {
	MAC     net.HardwareAddr
	Primary netip.Addr
	Subnet  netip.Prefix
	// Table is the ENI's route table (device index plus one).
	Table int
}

// Gateway is the VPC router's address in a subnet (its first host).
func SubnetGateway(subnet netip.Prefix) netip.Addr { return subnet.Masked().Addr().Next() }

// SetupENI brings a secondary ENI's interface up with its primary address
// and fills its table: the subnet's gateway on the link and the default
// route through it. The connected route the address adds to the main
// table is removed, so the main table reaches the subnet through the
// primary ENI only. It returns the interface's name.
func SetupENI(h *netlink.Handle, e ENI) (string, error) {
	link, err := linkByMAC(h, e.MAC)
	if err != nil {
		return "", err
	}
	name, idx := link.Attrs().Name, link.Attrs().Index
	if err := h.LinkSetUp(link); err != nil {
		return name, fmt.Errorf("failed to bring %s up: %w", name, err)
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: e.Primary.AsSlice(), Mask: net.CIDRMask(e.Subnet.Bits(), 32)}}
	if err := h.AddrReplace(link, addr); err != nil {
		return name, fmt.Errorf("failed to address %s: %w", name, err)
	}
	subnet := &net.IPNet{IP: e.Subnet.Masked().Addr().AsSlice(), Mask: net.CIDRMask(e.Subnet.Bits(), 32)}
	if err := h.RouteDel(&netlink.Route{LinkIndex: idx, Dst: subnet, Table: syscall.RT_TABLE_MAIN, Scope: netlink.SCOPE_LINK, Src: e.Primary.AsSlice(), Protocol: netlink.RouteProtocol(syscall.RTPROT_KERNEL)}); err != nil &&
		!isGone(err) {
		return name, fmt.Errorf("failed to remove %s's subnet route from the main table: %w", name, err)
	}
	gw := SubnetGateway(e.Subnet).AsSlice()
	if err := h.RouteReplace(&netlink.Route{LinkIndex: idx, Dst: &net.IPNet{IP: gw, Mask: net.CIDRMask(32, 32)}, Scope: netlink.SCOPE_LINK, Table: e.Table}); err != nil {
		return name, fmt.Errorf("table %d: gateway route: %w", e.Table, err)
	}
	if err := h.RouteReplace(&netlink.Route{LinkIndex: idx, Gw: gw, Table: e.Table}); err != nil {
		return name, fmt.Errorf("table %d: default route: %w", e.Table, err)
	}
	return name, nil
}

func linkByMAC(h *netlink.Handle, mac net.HardwareAddr) (netlink.Link, error) {
	links, err := h.LinkList()
	if err != nil {
		return nil, fmt.Errorf("list the interfaces to find MAC %s: %w", mac, err)
	}
	for _, l := range links {
		if bytes.Equal(l.Attrs().HardwareAddr, mac) {
			return l, nil
		}
	}
	return nil, fmt.Errorf("no interface with MAC %s on the node (the ENI is not attached yet)", mac)
}

func isGone(err error) bool {
	return errors.Is(err, syscall.ESRCH) || errors.Is(err, syscall.ENOENT)
}
