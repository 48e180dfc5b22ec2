package main

import (
	"context"
	"fmt"
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
	naive, err := loadtest.MeasureReads(ctx, cp, "naive-agent", nodes, window, loadtest.NaiveAgent)
	if err != nil {
		return err
	}
	cached, err := loadtest.MeasureReads(ctx, cp, "trellis-agent", nodes, window, loadtest.CachedAgent)
	if err != nil {
		return err
	}
	secs := window.Seconds()
	fmt.Printf("\nread load at scale: %d node agents reading their node's pods every second for %s\n", agents, window)
	fmt.Printf("  naive (list every read):  %5d reads (%.1f/s), %d watches\n", naive.Reads, float64(naive.Reads)/secs, naive.Watches)
	fmt.Printf("  trellis (informer cache): %5d reads (%.1f/s), %d watches\n", cached.Reads, float64(cached.Reads)/secs, cached.Watches)
	if naive.Reads > 0 {
		fmt.Printf("  apiserver read QPS reduction: %.1f%%\n", 100*(1-float64(cached.Reads)/float64(naive.Reads)))
	}
	return nil
}

// surgeAtScale creates 3x a namespace's planned pods at once on the full
// cluster.
func surgeAtScale(ctx context.Context, cp *controlplane.ControlPlane) error {
	const planned, factor, clients = 300, 3, 20
	r, err := loadtest.Surge(ctx, cp, "surge", planned, factor, clients)
	if err != nil {
		return err
	}
	fmt.Printf("\nsurge at scale: %d pod creates (%dx the %d planned) from %d clients in %.1fs: %d created, %d refused by the quota, %d other errors\n",
		r.Total, factor, planned, clients, r.Took.Seconds(), r.Created, r.Refused, r.Other)
	fmt.Printf("  mutating calls during the surge (all clients): %d; latency p50 %s, p99 %s, max %s (SLO: p99 <= 1s)\n",
		len(r.Mutating), r.Percentile(0.5).Round(time.Millisecond), r.Percentile(0.99).Round(time.Millisecond), r.Percentile(1).Round(time.Millisecond))
	if r.Created > planned {
		return fmt.Errorf("the quota let %d pods through, planned %d", r.Created, planned)
	}
	return nil
}
