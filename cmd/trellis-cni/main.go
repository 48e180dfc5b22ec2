// Command trellis-cni is the CNI plugin of netd's AWS mode: pods get VPC
// addresses from netd's pool and are wired by the plugin.
package main

import (
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/trellis-dev/trellis/daemons/netd/cniplugin"
)

func main() {
	skel.PluginMainFuncs(skel.CNIFuncs{Add: cniplugin.Add, Del: cniplugin.Del, Check: cniplugin.Check},
		version.PluginSupports("0.4.0", "1.0.0", "1.1.0"), "trellis-cni: VPC addresses from trellis-netd")
}
