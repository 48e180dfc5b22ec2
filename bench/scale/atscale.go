package main

import (
	"context"
	"fmt"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/internal/controlplane"
	"github.com/trellis-dev/trellis/test/loadtest"
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
// cluster; with the flowcontrol addon, again without its tenants'
// FlowSchema and again with it.
func surgeAtScale(ctx context.Context, cp *controlplane.ControlPlane, flowcontrol bool) error {
	const planned, factor, clients = 300, 3, 20
	// The cluster's own mutating latency just before, for comparison: at
	// 2,500 nodes, node heartbeats alone keep a small control plane busy.
	sli0, err := loadtest.ScrapeSLI(ctx, cp.Config)
	if err != nil {
		return err
	}
	before := time.Now()
	time.Sleep(20 * time.Second)
	sli1, err := loadtest.ScrapeSLI(ctx, cp.Config)
	if err != nil {
		return err
	}
	end := time.Now()
	time.Sleep(2 * time.Second) // the audit log is written asynchronously
	evs, err := cp.ReadAudit("", before, end)
	if err != nil {
		return err
	}
	var base []time.Duration
	for _, e := range evs {
		if mutatingVerbs[e.Verb] {
			base = append(base, e.Completed.Sub(e.Received))
		}
	}
	fmt.Printf("\nbefore the surge (20 s, no surge): %d mutating calls (%.0f/s), latency p50 %s, p99 %s\n", len(base), float64(len(base))/20,
		percentile(base, 0.5).Round(time.Millisecond), percentile(base, 0.99).Round(time.Millisecond))
	fmt.Println("  slowest by client, verb and resource (audit log):")
	loadtest.PrintGroups(os.Stdout, loadtest.MutatingByClient(evs), 8, 10)
	w := loadtest.Window(sli0, sli1)
	fmt.Printf("  the SLO (p99 <= 1s per verb and resource, apiserver_request_sli_duration_seconds, >= 10 calls): met: %v; worst:\n", w.Met(10))
	w.Print(os.Stdout, 6, 10)
	r, err := loadtest.Surge(ctx, cp, "surge", planned, factor, clients)
	if err != nil {
		return err
	}
	fmt.Println("\nsurge at scale:")
	if err := r.Print(os.Stdout, planned, factor, clients); err != nil || !flowcontrol {
		return err
	}
	// The same surge on the same cluster without the tenants' FlowSchema
	// (tenants fall to the defaults' service-accounts schema, workload-low),
	// then with it again: what API Priority and Fairness itself does.
	fsc := cp.Client.FlowcontrolV1().FlowSchemas()
	fs, err := fsc.Get(ctx, "trellis-tenants", metav1.GetOptions{})
	if err != nil {
		return err
	}
	if err := fsc.Delete(ctx, fs.Name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	time.Sleep(5 * time.Second) // APF reloads its configuration from an informer
	r, err = loadtest.Surge(ctx, cp, "surge-b", planned, factor, clients)
	if err != nil {
		return err
	}
	fmt.Println("\nthe same surge into another namespace, without the trellis-tenants FlowSchema (Kubernetes' defaults):")
	if err := r.Print(os.Stdout, planned, factor, clients); err != nil {
		return err
	}
	fs.ResourceVersion, fs.UID, fs.ManagedFields = "", "", nil
	if _, err := fsc.Create(ctx, fs, metav1.CreateOptions{}); err != nil {
		return err
	}
	time.Sleep(5 * time.Second)
	r, err = loadtest.Surge(ctx, cp, "surge-c", planned, factor, clients)
	if err != nil {
		return err
	}
	fmt.Println("\nand into a third namespace with the FlowSchema back:")
	return r.Print(os.Stdout, planned, factor, clients)
}
