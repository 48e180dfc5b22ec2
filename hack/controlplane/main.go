// Command controlplane runs the real control plane from `make tools`
// (etcd, kube-apiserver, kube-controller-manager, kube-scheduler) on
// loopback until it gets SIGINT or SIGTERM. `make local` uses it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/trellis-dev/trellis/internal/controlplane"
)

func main() {
	dir := flag.String("dir", "_output/controlplane", "directory for certificates, data and logs")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cp, err := controlplane.Start(*dir, controlplane.Options{ControllerManager: true, Scheduler: true,
		// The addon bundle's node daemons run privileged, as on kops and kind.
		APIServerFlags: []string{"--allow-privileged=true"}})
	if err != nil {
		fmt.Fprintf(os.Stderr, "controlplane: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("control plane ready: KUBECONFIG=%s\n", cp.Kubeconfig)
	if err := os.WriteFile(*dir+"/ready", []byte(cp.Kubeconfig+"\n"), 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "controlplane: %v\n", err)
	}
	<-ctx.Done()
	cp.Stop()
	_ = os.Remove(*dir + "/ready")
}
