// Command zkregistrar measures the ZooKeeper registrar end to end on a real
// control plane and a real ZooKeeper: pods on one node flap Ready and
// NotReady (the bench plays the kubelet), and a separate ZooKeeper client
// watching the serverset times each change from the pod status update to
// the member appearing or disappearing. Prints p50/p99 and ZooKeeper writes
// per pod lifecycle (goal: p99 under 200 ms, exactly 2 writes).
//
// It runs twice: pods without the trellis.dev/registered readiness gate
// (the kubelet's Ready is the signal), then with it (ContainersReady is the
// signal, and a pod watch also times the gate condition turning True or
// False: the latency the gate adds to Ready), and prints both side by side
// with the readiness-gate writes to the apiserver per transition.
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
	"k8s.io/client-go/util/retry"

	"github.com/trellis-dev/trellis/api/wellknown"
	"github.com/trellis-dev/trellis/daemons/zkregistrar"
	"github.com/trellis-dev/trellis/internal/controlplane"
	"github.com/trellis-dev/trellis/internal/serverset"
	zktest "github.com/trellis-dev/trellis/internal/testutil/zookeeper"
)

func main() {
	pods := flag.Int("pods", 110, "pods on the node")
	flips := flag.Int("flips", 400, "Ready/NotReady transitions to time")
	modes := flag.String("gate", "both", "run without the readiness gate (off), with it (on), or both")
	flag.Parse()
	runs := map[string][]bool{"both": {false, true}, "off": {false}, "on": {true}}[*modes]
	if runs == nil {
		fmt.Fprintf(os.Stderr, "bench: -gate %q: want both, off or on\n", *modes)
		os.Exit(2)
	}
	var res []result
	for _, gated := range runs {
		r, err := run(*pods, *flips, gated)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench (gate %v): %v\n", gated, err)
			os.Exit(1)
		}
		res = append(res, r)
	}
	report(*pods, *flips, res)
}

// result is one run's figures.
type result struct {
	gated             bool
	appear, disappear []time.Duration
	// gateOpen and gateClose: the signal to the gate condition True or
	// False, seen by a pod watch (gated runs only).
	gateOpen, gateClose []time.Duration
	// statusWrite is the signal's own status write, sent to answered:
	// the part of every figure above that is the apiserver's.
	statusWrite []time.Duration
	// fromAnswer: the write's answer to the znode visible or gone (0 when
	// the registrar was faster than the answer): the figure as measured
	// before the bench timed from the sending.
	fromAnswer []time.Duration
	zkWrites   int64
	gateWrites int64
}

func report(nPods, flips int, res []result) {
	fmt.Printf("pods on the node: %d, transitions timed per run: %d\n", nPods, flips)
	fmt.Printf("%-44s", "")
	for _, r := range res {
		name := "no gate (signal: Ready)"
		if r.gated {
			name = "gate (signal: ContainersReady)"
		}
		fmt.Printf(" %-26s", name)
	}
	fmt.Println()
	row := func(what string, f func(r result) []time.Duration) {
		fmt.Printf("%-44s", what)
		for _, r := range res {
			d := f(r)
			if len(d) == 0 {
				fmt.Printf(" %-26s", "-")
				continue
			}
			fmt.Printf(" %-26s", fmt.Sprintf("p50 %5.1f  p99 %6.1f ms", pct(d, 50), pct(d, 99)))
		}
		fmt.Println()
	}
	row("signal -> znode visible (Ready-to-znode)", func(r result) []time.Duration { return r.appear })
	row("signal -> znode gone", func(r result) []time.Duration { return r.disappear })
	row("signal -> gate True (Ready-gate; Ready)", func(r result) []time.Duration { return r.gateOpen })
	row("signal -> gate False", func(r result) []time.Duration { return r.gateClose })
	row("(of which the signal's status write)", func(r result) []time.Duration { return r.statusWrite })
	row("status answered -> znode visible or gone", func(r result) []time.Duration { return r.fromAnswer })
	for _, r := range res {
		fmt.Printf("gate %-5v ZooKeeper writes %d for %d transitions = %.2f per transition; apiserver gate writes %d = %.2f per transition (%.2f per pod lifecycle)\n",
			r.gated, r.zkWrites, flips, float64(r.zkWrites)/float64(flips), r.gateWrites, float64(r.gateWrites)/float64(flips), 2*float64(r.gateWrites)/float64(flips))
	}
}

func run(nPods, flips int, gated bool) (result, error) {
	res := result{gated: gated}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir, err := os.MkdirTemp("", "trellis-zkbench-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	cp, err := controlplane.Start(dir, controlplane.Options{})
	if err != nil {
		return res, err
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
		if gated {
			p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: wellknown.ConditionRegistered}}
		}
		if _, err := c.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return res, err
		}
	}
	reg := serverset.New(serverset.Config{Servers: zks.Addrs(), SessionTimeout: 10 * time.Second, VerifyInterval: 5 * time.Second})
	d, err := zkregistrar.New(zkregistrar.Config{NodeName: "node-a", Client: c, Registrar: reg})
	if err != nil {
		return res, err
	}
	go func() { _ = reg.Run(ctx) }()
	go func() { _ = d.Run(ctx) }()

	// The observer: a separate client watching the serverset.
	obs, _, err := zk.Connect(zks.Addrs(), 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		return res, err
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

	// The gate observer: a pod watch timing the condition's changes.
	gateAt := map[string]gateSeen{} // pod -> last status seen and when
	if gated {
		w, err := c.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{})
		if err != nil {
			return res, err
		}
		go func() {
			for ev := range w.ResultChan() {
				p, ok := ev.Object.(*corev1.Pod)
				if !ok {
					continue
				}
				now := time.Now()
				for _, cd := range p.Status.Conditions {
					if cd.Type == wellknown.ConditionRegistered {
						mu.Lock()
						if gateAt[p.Name].status != cd.Status {
							gateAt[p.Name] = gateSeen{status: cd.Status, at: now}
						}
						mu.Unlock()
					}
				}
			}
		}()
	}
	var setStatus func(i int, ready bool) error
	setReady := func(i int, ready bool) error {
		// The registrar patches the gate condition concurrently: retry on
		// a conflict, as the kubelet's status manager does.
		return retry.RetryOnConflict(retry.DefaultRetry, func() error { return setStatus(i, ready) })
	}
	setStatus = func(i int, ready bool) error {
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
		signal := corev1.PodReady
		if gated {
			signal = corev1.ContainersReady
		}
		var conds []corev1.PodCondition
		for _, cd := range p.Status.Conditions {
			if cd.Type == wellknown.ConditionRegistered {
				conds = append(conds, cd) // the registrar's
			}
		}
		p.Status.Conditions = append(conds, corev1.PodCondition{Type: signal, Status: st})
		_, err = c.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err
	}
	// Start with every pod NotReady and running.
	for i := range nPods {
		if err := setReady(i, false); err != nil {
			return res, err
		}
	}
	ready := make([]bool, nPods)
	var appear, disappear []time.Duration
	rng := rand.New(rand.NewPCG(1, 2))
	startWrites, startGate := reg.Writes(), d.GateWrites()
	for range flips {
		i := rng.IntN(nPods)
		want := !ready[i]
		// Timed from the moment the status write is sent: the registrar
		// may act on its watch event before the write's answer is back
		// here (taken after it, a fast registration read as never seen).
		sent := time.Now()
		if err := setReady(i, want); err != nil {
			return res, err
		}
		answered := time.Now()
		res.statusWrite = append(res.statusWrite, answered.Sub(sent))
		h := ip(i)
		deadline := sent.Add(10 * time.Second)
		zkSeen := false
		for {
			mu.Lock()
			tp, isPresent := present[h]
			ta, isAbsent := absent[h]
			g := gateAt[fmt.Sprintf("p%03d", i)]
			mu.Unlock()
			if !zkSeen && want && isPresent && !tp.Before(sent) {
				appear = append(appear, tp.Sub(sent))
				res.fromAnswer = append(res.fromAnswer, max(0, tp.Sub(answered)))
				zkSeen = true
			}
			if !zkSeen && !want && isAbsent && !ta.Before(sent) {
				disappear = append(disappear, ta.Sub(sent))
				res.fromAnswer = append(res.fromAnswer, max(0, ta.Sub(answered)))
				zkSeen = true
			}
			gateDone := !gated
			if gated && !g.at.Before(sent) && (g.status == corev1.ConditionTrue) == want {
				if want {
					res.gateOpen = append(res.gateOpen, g.at.Sub(sent))
				} else {
					res.gateClose = append(res.gateClose, g.at.Sub(sent))
				}
				gateDone = true
			}
			if zkSeen && gateDone {
				break
			}
			if time.Now().After(deadline) {
				return res, fmt.Errorf("pod %d: change to ready=%v not seen in 10s (znode %v)", i, want, zkSeen)
			}
			time.Sleep(time.Millisecond)
		}
		ready[i] = want
		time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
	}
	res.appear, res.disappear = appear, disappear
	res.zkWrites, res.gateWrites = reg.Writes()-startWrites, d.GateWrites()-startGate
	return res, nil
}

type gateSeen struct {
	status corev1.ConditionStatus
	at     time.Time
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
