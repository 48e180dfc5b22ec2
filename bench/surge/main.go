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
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/trellis-dev/trellis/governance/quota"
	"github.com/trellis-dev/trellis/internal/controlplane"
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
	ctx := context.Background()
	c := cp.Client
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	// The plan quota would make from a peak of `planned` pods (no headroom).
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}
	plan := quota.Plan{Quotas: map[string]map[corev1.ResourceName]resource.Quantity{"team-a": {
		corev1.ResourcePods:           *resource.NewQuantity(int64(planned), resource.DecimalSI),
		corev1.ResourceRequestsCPU:    *resource.NewMilliQuantity(int64(planned)*10, resource.DecimalSI),
		corev1.ResourceRequestsMemory: *resource.NewQuantity(int64(planned)*16<<20, resource.BinarySI),
	}}}
	if _, err := quota.Apply(ctx, c, plan); err != nil {
		return err
	}
	for {
		rq, err := c.CoreV1().ResourceQuotas("team-a").Get(ctx, quota.Name, metav1.GetOptions{})
		if err == nil && rq.Status.Used != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	cfg := rest.CopyConfig(cp.Config)
	cfg.UserAgent, cfg.QPS, cfg.Burst = "surge", 1000, 2000
	sc := kubernetes.NewForConfigOrDie(cfg)
	total := planned * factor
	var next, ok, refused, other atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range clients {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(total) {
					return
				}
				p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%05d", i), Namespace: "team-a"},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "c", Resources: corev1.ResourceRequirements{Requests: res, Limits: res}}}}}
				_, err := sc.CoreV1().Pods("team-a").Create(ctx, p, metav1.CreateOptions{})
				switch {
				case err == nil:
					ok.Add(1)
				case strings.Contains(err.Error(), "exceeded quota"):
					refused.Add(1)
				default:
					other.Add(1)
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	time.Sleep(2 * time.Second) // the audit log is written asynchronously
	evs, err := cp.ReadAudit("", start, time.Now())
	if err != nil {
		return err
	}
	var lat []time.Duration
	for _, e := range evs {
		switch e.Verb {
		case "create", "update", "patch", "delete":
			lat = append(lat, e.Completed.Sub(e.Received))
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(float64(len(lat))*p))]
	}
	fmt.Printf("surge: %d pod creates (%dx the %d planned) from %d clients in %.1fs: %d created, %d refused by the quota, %d other errors\n",
		total, factor, planned, clients, took.Seconds(), ok.Load(), refused.Load(), other.Load())
	fmt.Printf("mutating calls during the surge (all clients): %d; latency p50 %s, p99 %s, max %s (SLO: p99 < 1s)\n",
		len(lat), pct(0.5).Round(time.Millisecond), pct(0.99).Round(time.Millisecond), pct(1).Round(time.Millisecond))
	if ok.Load() > int64(planned) {
		return fmt.Errorf("the quota let %d pods through, planned %d", ok.Load(), planned)
	}
	return nil
}
