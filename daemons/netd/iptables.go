package netd

import (
	"bytes"
	"fmt"
	"os/exec"
	"sort"
	"strings"
)

// Chains netd owns; each is rewritten whole on every sync.
const (
	chainForward = "TRELLIS-FORWARD"
	chainMasq    = "TRELLIS-MASQ"
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
	for _, x := range []struct {
		table  string
		rules  []byte
		parent string
		chain  string
	}{{"filter", filter.Bytes(), "FORWARD", chainForward}, {"nat", nat.Bytes(), "POSTROUTING", chainMasq}} {
		if err := t.run(x.rules, "iptables-restore", "-w", "--noflush"); err != nil {
			return err
		}
		if err := t.ensureJump(x.table, x.parent, x.chain); err != nil {
			return err
		}
	}
	return nil
}
