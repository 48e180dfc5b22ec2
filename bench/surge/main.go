// Command surge creates three times a namespace's planned pods at once
// against the real control plane (apiserver, etcd, controller-manager) with
// the namespace's Trellis quota in place, and prints what the quota let
// through and the latency of every mutating call from the audit log
// (Kubernetes' SLO for them is a p99 under 1 s).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/trellis-dev/trellis/internal/controlplane"
	"github.com/trellis-dev/trellis/test/loadtest"
)

func main() {
	planned := flag.Int("planned", 300, "pods the namespace's quota plans for")
	factor := flag.Int("factor", 3, "surge: this many times the planned pods, at once")
	clients := flag.Int("clients", 20, "concurrent creators")
	flag.Parse()
	if err := run(*planned, *factor, *clients); err != nil {
		fmt.Fprintf(os.Stderr, "surge: %v\n", err)
		os.Exit(1)
	}
}

func run(planned, factor, clients int) error {
	dir, err := os.MkdirTemp("", "trellis-surge-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cp, err := controlplane.Start(dir, controlplane.Options{ControllerManager: true, AuditLog: true})
	if err != nil {
		return err
	}
	defer cp.Stop()
	r, err := loadtest.Surge(context.Background(), cp, "team-a", planned, factor, clients)
	if err != nil {
		return err
	}
	fmt.Println("surge:")
	return r.Print(os.Stdout, planned, factor, clients)
}
