// Command reads serves the same read load two ways on the real control
// plane and counts the apiserver reads each costs (from the audit log):
// node agents that each need "the pods on my node" every second, either
// listing every time (a naive client) or reading a node-scoped informer
// cache (how every Trellis daemon reads). It prints both and the reduction.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/internal/controlplane"
	"github.com/trellis-dev/trellis/test/loadtest"
)

func main() {
	nodes := flag.Int("nodes", 50, "simulated nodes (one agent each)")
	pods := flag.Int("pods", 2000, "pods spread over the nodes")
	window := flag.Duration("window", 30*time.Second, "how long each way runs")
	flag.Parse()
	if err := run(*nodes, *pods, *window); err != nil {
		fmt.Fprintf(os.Stderr, "reads: %v\n", err)
		os.Exit(1)
	}
}

func run(nNodes, nPods int, window time.Duration) error {
	dir, err := os.MkdirTemp("", "trellis-reads-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cp, err := controlplane.Start(dir, controlplane.Options{AuditLog: true})
	if err != nil {
		return err
	}
	defer cp.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	loader := loadtest.Client(cp.Config, "loader", 1000)
	for i := range nPods {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%05d", i), Namespace: "default"},
			Spec: corev1.PodSpec{NodeName: fmt.Sprintf("node-%03d", i%nNodes), Containers: []corev1.Container{{Name: "c", Image: "c"}}}}
		if _, err := loader.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	fmt.Printf("%d node agents, each reading its node's pods once a second for %s; %d pods\n", nNodes, window, nPods)

	nodes := make([]string, nNodes)
	for n := range nNodes {
		nodes[n] = fmt.Sprintf("node-%03d", n)
	}
	return loadtest.CompareReads(ctx, os.Stdout, cp, nodes, window)
}
