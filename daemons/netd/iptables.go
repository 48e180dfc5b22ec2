package netd

import (
	"bytes"
	"fmt"
	"net/netip"
	"os/exec"
	"sort"
	"strings"

	"github.com/trellis-dev/trellis/daemons/netd/podnet"
)

// Chains netd owns; each is rewritten whole on every sync.
const (
	chainForward = "TRELLIS-FORWARD"
	chainMasq    = "TRELLIS-MASQ"
	chainMark    = "TRELLIS-MARK"
	chainMarkOut = "TRELLIS-MARK-OUT"
	// MetadataIP is the cloud instance-metadata address pods may not reach
	// unless allowed (wellknown.AnnotationMetadataAccess).
	MetadataIP = "169.254.169.254"
)

// iptables runs the iptables tools (through Config.Exec, e.g. "ip netns
// exec NS" in tests). netd uses the iptables binaries, as kindnetd does
// (go-iptables shells out to them too); the chains it owns are written with
// one iptables-restore per table, which applies atomically.
type iptables struct {
	prefix []string
}

func (t iptables) run(stdin []byte, args ...string) error {
	argv := append(append([]string{}, t.prefix...), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// ensureJump makes chain's parent jump to it (once).
func (t iptables) ensureJump(table, parent, chain string) error {
	if err := t.run(nil, "iptables", "-w", "-t", table, "-C", parent, "-j", chain); err == nil {
		return nil
	}
	return t.run(nil, "iptables", "-w", "-t", table, "-I", parent, "1", "-j", chain)
}

// syncVPC writes netd's chains in the AWS mode: in filter, pods (their
// host interfaces start with podnet.VethPrefix) may not reach the metadata
// address except the allowed pod IPs; in nat, traffic leaving the VPC takes
// the node's primary address, and traffic within it keeps the pod's.
func (t iptables) syncVPC(vpcCIDRs []netip.Prefix, primary netip.Addr, allowed []string) error {
	sort.Strings(allowed)
	var filter bytes.Buffer
	fmt.Fprintf(&filter, "*filter\n:%s - [0:0]\n", chainForward)
	for _, ip := range allowed {
		fmt.Fprintf(&filter, "-A %s -i %s+ -s %s/32 -d %s/32 -j ACCEPT\n", chainForward, podnet.VethPrefix, ip, MetadataIP)
	}
	fmt.Fprintf(&filter, "-A %s -i %s+ -d %s/32 -j DROP\n", chainForward, podnet.VethPrefix, MetadataIP)
	filter.WriteString("COMMIT\n")
	var nat bytes.Buffer
	fmt.Fprintf(&nat, "*nat\n:%s - [0:0]\n", chainMasq)
	for _, c := range vpcCIDRs {
		fmt.Fprintf(&nat, "-A %s -d %s -j RETURN\n", chainMasq, c)
	}
	fmt.Fprintf(&nat, "-A %s -m addrtype ! --dst-type LOCAL -j SNAT --to-source %s\n", chainMasq, primary)
	nat.WriteString("COMMIT\n")
	// A pod on a secondary ENI routes by its ENI's table, but traffic that
	// leaves the VPC takes the primary address, which only the primary ENI
	// may send from: its connections are marked (podnet.OutboundMark) and
	// routed by the main table, as the AWS VPC CNI's connmark does.
	var mangle bytes.Buffer
	fmt.Fprintf(&mangle, "*mangle\n:%s - [0:0]\n:%s - [0:0]\n", chainMark, chainMarkOut)
	fmt.Fprintf(&mangle, "-A %s -i %s+ -m conntrack --ctstate NEW -j %s\n", chainMark, podnet.VethPrefix, chainMarkOut)
	fmt.Fprintf(&mangle, "-A %s -i %s+ -j CONNMARK --restore-mark --mask %#x\n", chainMark, podnet.VethPrefix, podnet.OutboundMark)
	for _, c := range vpcCIDRs {
		fmt.Fprintf(&mangle, "-A %s -d %s -j RETURN\n", chainMarkOut, c)
	}
	fmt.Fprintf(&mangle, "-A %s -j CONNMARK --set-xmark %#x/%#x\n", chainMarkOut, podnet.OutboundMark, podnet.OutboundMark)
	mangle.WriteString("COMMIT\n")
	return t.restore([]hooked{{"filter", filter.Bytes(), "FORWARD", chainForward}, {"nat", nat.Bytes(), "POSTROUTING", chainMasq},
		{"mangle", mangle.Bytes(), "PREROUTING", chainMark}})
}

// sync writes netd's chains: in filter, pods of this node's CIDR may not
// reach the metadata address except the allowed pod IPs; in nat, traffic
// from the cluster CIDR to outside it is masqueraded.
func (t iptables) sync(podCIDR, clusterCIDR string, allowed []string) error {
	sort.Strings(allowed)
	var filter bytes.Buffer
	fmt.Fprintf(&filter, "*filter\n:%s - [0:0]\n", chainForward)
	for _, ip := range allowed {
		fmt.Fprintf(&filter, "-A %s -s %s/32 -d %s/32 -j ACCEPT\n", chainForward, ip, MetadataIP)
	}
	if podCIDR != "" {
		fmt.Fprintf(&filter, "-A %s -s %s -d %s/32 -j DROP\n", chainForward, podCIDR, MetadataIP)
	}
	filter.WriteString("COMMIT\n")
	var nat bytes.Buffer
	fmt.Fprintf(&nat, "*nat\n:%s - [0:0]\n", chainMasq)
	if clusterCIDR != "" {
		fmt.Fprintf(&nat, "-A %s -s %s -d %s -j RETURN\n", chainMasq, clusterCIDR, clusterCIDR)
		fmt.Fprintf(&nat, "-A %s -s %s -j MASQUERADE\n", chainMasq, clusterCIDR)
	}
	nat.WriteString("COMMIT\n")
	return t.apply(filter.Bytes(), nat.Bytes())
}

// apply restores the filter and nat chains and hooks them in.
func (t iptables) apply(filter, nat []byte) error {
	return t.restore([]hooked{{"filter", filter, "FORWARD", chainForward}, {"nat", nat, "POSTROUTING", chainMasq}})
}

// hooked is a chain restored whole and jumped to from a built-in one.
type hooked struct {
	table  string
	rules  []byte
	parent string
	chain  string
}

func (t iptables) restore(chains []hooked) error {
	for _, x := range chains {
		if err := t.run(x.rules, "iptables-restore", "-w", "--noflush"); err != nil {
			return err
		}
		if err := t.ensureJump(x.table, x.parent, x.chain); err != nil {
			return err
		}
	}
	return nil
}
