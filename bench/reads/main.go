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
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/trellis-dev/trellis/internal/controlplane"
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
	loader := client(cp.Config, "loader", 1000)
	for i := range nPods {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%05d", i), Namespace: "default"},
			Spec: corev1.PodSpec{NodeName: fmt.Sprintf("node-%03d", i%nNodes), Containers: []corev1.Container{{Name: "c", Image: "c"}}}}
		if _, err := loader.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	fmt.Printf("%d node agents, each reading its node's pods once a second for %s; %d pods\n", nNodes, window, nPods)

	measure := func(name string, agent func(ctx context.Context, node string, c kubernetes.Interface) error) (reads, watches int, err error) {
		actx, acancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var firstErr error
		start := time.Now()
		for n := range nNodes {
			c := client(cp.Config, name, 5) // client-go's default QPS
			wg.Go(func() {
				if err := agent(actx, fmt.Sprintf("node-%03d", n), c); err != nil && actx.Err() == nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
				}
			})
		}
		time.Sleep(window)
		acancel()
		wg.Wait()
		time.Sleep(2 * time.Second) // the audit log is written asynchronously
		evs, err := cp.ReadAudit(name, start, time.Now())
		if err != nil {
			return 0, 0, err
		}
		for _, e := range evs {
			switch e.Verb {
			case "get", "list":
				reads++
			case "watch":
				watches++
			}
		}
		return reads, watches, firstErr
	}

	naiveReads, naiveWatches, err := measure("naive-agent", func(ctx context.Context, node string, c kubernetes.Interface) error {
		sel := fields.OneTermEqualSelector("spec.nodeName", node).String()
		for ctx.Err() == nil {
			if _, err := c.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: sel}); err != nil {
				return err
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	cachedReads, cachedWatches, err := measure("trellis-agent", func(ctx context.Context, node string, c kubernetes.Interface) error {
		f := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", node).String()
		}))
		lister := f.Core().V1().Pods().Lister()
		f.Start(ctx.Done())
		if !cache.WaitForCacheSync(ctx.Done(), f.Core().V1().Pods().Informer().HasSynced) {
			return ctx.Err()
		}
		for ctx.Err() == nil {
			if _, err := lister.List(labels.Everything()); err != nil {
				return err
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	secs := window.Seconds()
	fmt.Printf("naive (list every read):   %5d reads (%.1f/s), %d watches\n", naiveReads, float64(naiveReads)/secs, naiveWatches)
	fmt.Printf("trellis (informer cache):  %5d reads (%.1f/s), %d watches\n", cachedReads, float64(cachedReads)/secs, cachedWatches)
	fmt.Println("(client-go's informers make their initial list through a streaming watch, so each agent's sync shows as one watch)")
	if naiveReads > 0 {
		fmt.Printf("apiserver read QPS reduction: %.1f%%\n", 100*(1-float64(cachedReads)/float64(naiveReads)))
	}
	return nil
}

func client(cfg *rest.Config, ua string, qps float32) kubernetes.Interface {
	c := rest.CopyConfig(cfg)
	c.UserAgent, c.QPS, c.Burst = ua, qps, int(2*qps)
	return kubernetes.NewForConfigOrDie(c)
}
