// Command zkregistrar measures the ZooKeeper registrar end to end on a real
// control plane and a real ZooKeeper: pods on one node flap Ready and
// NotReady (the bench plays the kubelet), and a separate ZooKeeper client
// watching the serverset times each change from the pod status update to
// the member appearing or disappearing. Prints p50/p99 and ZooKeeper writes
// per pod lifecycle (goal: p99 under 200 ms, exactly 2 writes).
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path"
	"sort"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/daemons/zkregistrar"
	"github.com/trellis-dev/trellis/internal/controlplane"
	"github.com/trellis-dev/trellis/internal/serverset"
	zktest "github.com/trellis-dev/trellis/internal/testutil/zookeeper"
)

func main() {
	pods := flag.Int("pods", 110, "pods on the node")
	flips := flag.Int("flips", 400, "Ready/NotReady transitions to time")
	flag.Parse()
	if err := run(*pods, *flips); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

func run(nPods, flips int) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir, err := os.MkdirTemp("", "trellis-zkbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cp, err := controlplane.Start(dir, controlplane.Options{})
	if err != nil {
		return err
	}
	defer cp.Stop()
	h := &zktest.Standalone{}
	defer h.Close()
	zks := zktest.Start(h, 1)
	c := cp.Client
	for i := range nPods {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%03d", i), Namespace: "default", Annotations: map[string]string{
				wellknown.AnnotationDiscoveryService: "bench", wellknown.AnnotationDiscoveryEnv: "prod", wellknown.AnnotationDiscoveryPorts: "http:8080",
			}},
			Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "app", Image: "app"}}},
		}
		if _, err := c.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	reg := serverset.New(serverset.Config{Servers: zks.Addrs(), SessionTimeout: 10 * time.Second, VerifyInterval: 5 * time.Second})
	d, err := zkregistrar.New(zkregistrar.Config{NodeName: "node-a", Client: c, Registrar: reg})
	if err != nil {
		return err
	}
	go func() { _ = reg.Run(ctx) }()
	go func() { _ = d.Run(ctx) }()

	// The observer: a separate client watching the serverset.
	obs, _, err := zk.Connect(zks.Addrs(), 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		return err
	}
	defer obs.Close()
	setDir := "/discovery/bench/prod"
	var mu sync.Mutex
	present := map[string]time.Time{} // host -> when seen present
	absent := map[string]time.Time{}
	go func() {
		for ctx.Err() == nil {
			names, _, ch, err := obs.ChildrenW(setDir)
			if err != nil {
				_, _, ch2, _ := obs.ExistsW(setDir)
				select {
				case <-ctx.Done():
					return
				case <-ch2:
				case <-time.After(100 * time.Millisecond):
				}
				continue
			}
			now := time.Now()
			hosts := map[string]bool{}
			for _, n := range names {
				data, _, err := obs.Get(path.Join(setDir, n))
				if err != nil {
					continue
				}
				m, err := serverset.ParseMember(data)
				if err == nil {
					hosts[m.ServiceEndpoint.Host] = true
				}
			}
			mu.Lock()
			for h := range hosts {
				if _, ok := present[h]; !ok {
					present[h] = now
				}
				delete(absent, h)
			}
			for h := range present {
				if !hosts[h] {
					delete(present, h)
					absent[h] = now
				}
			}
			mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-ch:
			}
		}
	}()

	setReady := func(i int, ready bool) error {
		name := fmt.Sprintf("p%03d", i)
		p, err := c.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		p.Status.Phase = corev1.PodRunning
		p.Status.PodIP = ip(i)
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
		_, err = c.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err
	}
	// Start with every pod NotReady and running.
	for i := range nPods {
		if err := setReady(i, false); err != nil {
			return err
		}
	}
	ready := make([]bool, nPods)
	var appear, disappear []time.Duration
	rng := rand.New(rand.NewPCG(1, 2))
	startWrites := reg.Writes()
	for range flips {
		i := rng.IntN(nPods)
		want := !ready[i]
		if err := setReady(i, want); err != nil {
			return err
		}
		sent := time.Now()
		h := ip(i)
		deadline := sent.Add(10 * time.Second)
		for {
			mu.Lock()
			tp, isPresent := present[h]
			ta, isAbsent := absent[h]
			mu.Unlock()
			if want && isPresent && !tp.Before(sent) {
				appear = append(appear, tp.Sub(sent))
				break
			}
			if !want && isAbsent && !ta.Before(sent) {
				disappear = append(disappear, ta.Sub(sent))
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("pod %d: change to ready=%v not seen in 10s", i, want)
			}
			time.Sleep(time.Millisecond)
		}
		ready[i] = want
		time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
	}
	writes := reg.Writes() - startWrites
	fmt.Printf("pods on the node: %d, transitions timed: %d (Ready: %d, NotReady: %d)\n", nPods, flips, len(appear), len(disappear))
	fmt.Printf("Ready -> znode visible:    p50 %6.1f ms  p99 %6.1f ms  max %6.1f ms\n", pct(appear, 50), pct(appear, 99), pct(appear, 100))
	fmt.Printf("NotReady -> znode gone:    p50 %6.1f ms  p99 %6.1f ms  max %6.1f ms\n", pct(disappear, 50), pct(disappear, 99), pct(disappear, 100))
	fmt.Printf("ZooKeeper writes: %d for %d transitions = %.2f per transition (%.2f per Ready->NotReady lifecycle; goal 2)\n",
		writes, flips, float64(writes)/float64(flips), 2*float64(writes)/float64(flips))
	return nil
}

func ip(i int) string { return fmt.Sprintf("10.44.%d.%d", i/250, i%250+1) }

func pct(ds []time.Duration, p int) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (len(s)*p + 99) / 100
	if i > 0 {
		i--
	}
	if i >= len(s) {
		i = len(s) - 1
	}
	return float64(s[i].Microseconds()) / 1000
}
