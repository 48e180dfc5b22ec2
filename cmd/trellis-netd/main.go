// Command trellis-netd is the pod network daemon (a DaemonSet on the host
// network): CNI configuration for the node's pod CIDR, routes to every other
// node's pod CIDR, masquerading, and the metadata block.
package main

import (
	"context"
	"errors"
	"flag"
	"os"

	"golang.org/x/sync/errgroup"

	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/daemons/netd"
	"github.com/trellis-dev/trellis/internal/daemon"
)

func main() { daemon.Main("trellis-netd", run) }

func run(ctx context.Context) error {
	node := flag.String("node-name", os.Getenv("NODE_NAME"), "this node")
	confDir := flag.String("cni-conf-dir", "/etc/cni/net.d", "where the CNI configuration goes")
	bridge := flag.String("bridge", "trellis0", "the pods' bridge")
	mtu := flag.Int("mtu", 1500, "MTU of pod interfaces")
	clusterCIDR := flag.String("cluster-cidr", "", "the cluster's pod CIDR: traffic from it to outside it is masqueraded")
	firewall := flag.Bool("firewall", true, "program iptables: masquerade, and keep pods from the metadata address unless annotated "+wellknown.AnnotationMetadataAccess+"=allow")
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig (default: in-cluster)")
	listen := flag.String("listen", ":9106", "address of /healthz and /readyz")
	flag.Parse()
	log := daemon.Logger("netd", "node", *node)
	client, _, err := daemon.Client(*kubeconfig, "trellis-netd")
	if err != nil {
		return err
	}
	d, err := netd.New(netd.Config{NodeName: *node, Client: client, CNIConfDir: *confDir, Bridge: *bridge, MTU: *mtu,
		ClusterCIDR: *clusterCIDR, Firewall: *firewall, Logger: log})
	if err != nil {
		return err
	}
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return d.Run(ctx) })
	daemon.Serve(ctx, g, *listen, daemon.Endpoints(nil, func() error {
		if d.Applied() == 0 {
			return errors.New("not reconciled yet")
		}
		return nil
	}))
	return g.Wait()
}
