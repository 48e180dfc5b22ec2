// Command trellis-netd is the pod network daemon (a DaemonSet on the host
// network). Bridge mode (kind): CNI configuration for the node's pod CIDR,
// routes to every other node's pod CIDR, masquerading, and the metadata
// block. AWS mode: pods take VPC addresses from the node's ENIs through
// the trellis-cni plugin. `trellis-netd install-cni SRC DST` installs the
// plugin on the node.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/daemons/netd"
	"github.com/trellis-dev/trellis/internal/daemon"
)

func main() {
	if len(os.Args) == 4 && os.Args[1] == "install-cni" {
		if err := netd.InstallPlugin(os.Args[2], os.Args[3]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	daemon.Main("trellis-netd", run)
}

func run(ctx context.Context) error {
	node := flag.String("node-name", os.Getenv("NODE_NAME"), "this node")
	mode := flag.String("mode", "bridge", "bridge (a bridge over the node's pod CIDR) or aws (VPC addresses from the node's ENIs)")
	confDir := flag.String("cni-conf-dir", "/etc/cni/net.d", "where the CNI configuration goes")
	bridge := flag.String("bridge", "trellis0", "bridge mode: the pods' bridge")
	mtu := flag.Int("mtu", 0, "MTU of pod interfaces (default: 1500 in bridge mode, 9001 in aws mode)")
	clusterCIDR := flag.String("cluster-cidr", "", "bridge mode: the cluster's pod CIDR: traffic from it to outside it is masqueraded")
	cluster := flag.String("cluster", "", "aws mode: the cluster's name, tagged on the ENIs netd creates")
	stateDir := flag.String("state-dir", "/run/trellis-netd", "aws mode: the address checkpoint and the plugin's socket (tmpfs)")
	firewall := flag.Bool("firewall", true, "program iptables: masquerade, and keep pods from the metadata address unless annotated "+wellknown.AnnotationMetadataAccess+"=allow")
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig (default: in-cluster)")
	listen := flag.String("listen", ":9106", "address of /healthz, /readyz and /metrics")
	flag.Parse()
	log := daemon.Logger("netd", "node", *node)
	client, _, err := daemon.Client(*kubeconfig, "trellis-netd")
	if err != nil {
		return err
	}
	cfg := netd.Config{NodeName: *node, Client: client, CNIConfDir: *confDir, Bridge: *bridge, MTU: *mtu,
		ClusterCIDR: *clusterCIDR, Firewall: *firewall, Logger: log}
	reg := prometheus.NewRegistry()
	switch *mode {
	case "bridge":
	case "aws":
		v, err := netd.OpenVPC(ctx, netd.VPCOptions{Client: client, NodeName: *node, Cluster: *cluster, StateDir: *stateDir, Log: log})
		if err != nil {
			return err
		}
		v.MTU = *mtu
		if err := v.Pool.Register(reg); err != nil {
			return err
		}
		cfg.VPC = v
	default:
		return fmt.Errorf("--mode %q: bridge or aws", *mode)
	}
	d, err := netd.New(cfg)
	if err != nil {
		return err
	}
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return d.Run(ctx) })
	daemon.Serve(ctx, g, *listen, daemon.Endpoints(reg, func() error {
		if d.Applied() == 0 {
			return errors.New("not reconciled yet")
		}
		return nil
	}))
	return g.Wait()
}
