// Command awsnodes rolls the same instance group of the local AWS loop
// (`trellis local aws`: clusters/local-aws.yaml in the AWS API emulator,
// its instances kind nodes of the local cluster) with the Trellis rollout
// engine and with kops's own instancegroups.RollingUpdateCluster, one after
// the other, onto a new node image each time, draining real kubelets. It
// prints for each tool and setting the wall time, the AWS and Kubernetes
// API calls per replaced node, and how long each old node spent between
// its cordon and leaving the cluster. It needs the local kind cluster
// (`make local`); `make bench-aws-nodes` runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/trellis-dev/trellis/internal/logs"
)

func main() {
	o := options{}
	flag.StringVar(&o.file, "f", "clusters/local-aws.yaml", "cluster definition of the local AWS loop")
	flag.StringVar(&o.group, "group", "general", "instance group to roll")
	flag.StringVar(&o.trellis, "trellis", "bin/trellis", "the trellis binary that runs `local aws`")
	flag.StringVar(&o.kubeconfig, "kubeconfig", os.ExpandEnv("$HOME/.kube/trellis-local.kubeconfig"), "kubeconfig of the local kind cluster")
	flag.StringVar(&o.tools, "tools", "trellis,kops", "the tools to roll with, in order")
	verbosity := flag.Int("v", 0, "log kops and client-go (klog) at this verbosity to stderr")
	flag.BoolVar(&o.defaults, "defaults", true, "also roll at each tool's defaults (kops: two validations 10 s apart every 30 s, 5 s after each drain, 15 s after each node)")
	flag.Parse()
	if err := logs.Setup(*verbosity, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "awsnodes: %v\n", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	if err := run(ctx, o); err != nil {
		fmt.Fprintf(os.Stderr, "awsnodes: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("done in %s\n", time.Since(start).Round(time.Second))
}
