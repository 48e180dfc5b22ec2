package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/trellis-dev/trellis/governance/loadtest"
	"github.com/trellis-dev/trellis/internal/controlplane"
)

// readsAtScale serves the same node-agent read load (100 agents, each
// reading its node's pods every second) with a naive lister and with
// informer caches, on the full cluster.
func readsAtScale(ctx context.Context, cp *controlplane.ControlPlane, o options) error {
	const agents, window = 100, 30 * time.Second
	step := max(1, o.nodes/agents)
	var nodes []string
	for i := range agents {
		nodes = append(nodes, fmt.Sprintf("kwok-node-%04d", i*step))
	}
	fmt.Printf("\nread load at scale: %d node agents reading their node's pods every second for %s\n", agents, window)
	return loadtest.CompareReads(ctx, os.Stdout, cp, nodes, window)
}

// surgeAtScale creates 3x a namespace's planned pods at once on the full
// cluster.
func surgeAtScale(ctx context.Context, cp *controlplane.ControlPlane) error {
	const planned, factor, clients = 300, 3, 20
	r, err := loadtest.Surge(ctx, cp, "surge", planned, factor, clients)
	if err != nil {
		return err
	}
	fmt.Println("\nsurge at scale:")
	return r.Print(os.Stdout, planned, factor, clients)
}
