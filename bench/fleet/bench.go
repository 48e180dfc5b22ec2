package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/controller"
	"github.com/trellis-dev/trellis/fleet"
	"github.com/trellis-dev/trellis/fleet/localfleet"
	"github.com/trellis-dev/trellis/internal/procstat"
	"github.com/trellis-dev/trellis/internal/testutil/gen"
)

type bench struct {
	f      *localfleet.Fleet
	direct *localfleet.Member
}

type row struct {
	mode       string
	n          int
	p50, p99   time.Duration
	max        time.Duration
	requests   map[string]float64 // per workload, by apiserver
	aggregated time.Duration      // fleet only: p99 until the fleet object's aggregated status is Ready
}

func newClient(cfg *rest.Config) (client.Client, error) {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = 500, 1000
	return client.New(c, client.Options{Scheme: controller.Scheme()})
}

// compare applies n services straight to the standalone member, then n at
// the fleet (divided 1:1 over east and west), and times each to Ready.
func (b *bench) compare(ctx context.Context, n int) ([]row, error) {
	dc, err := newClient(b.direct.Config)
	if err != nil {
		return nil, err
	}
	ns := fmt.Sprintf("direct-%d", n)
	if err := dc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return nil, err
	}
	servers := map[string]*rest.Config{"direct": b.direct.Config}
	before, err := requests(ctx, servers)
	if err != nil {
		return nil, err
	}
	created, err := create(ctx, dc, ns, n)
	if err != nil {
		return nil, err
	}
	readyAt, err := waitReady(ctx, map[string]client.Client{"direct": dc}, ns, n, 2)
	if err != nil {
		return nil, fmt.Errorf("direct: %w", err)
	}
	after, err := requests(ctx, servers)
	if err != nil {
		return nil, err
	}
	direct := summarize("direct", n, created, readyAt, before, after)

	fc, err := newClient(b.f.Karmada.Config)
	if err != nil {
		return nil, err
	}
	ns = fmt.Sprintf("fleet-%d", n)
	ps, err := fleet.DecodePlacements("bench", fmt.Appendf(nil, `apiVersion: fleet.trellis.dev/v1alpha1
kind: Placement
metadata: {name: bench, namespace: %s}
spec:
  spread: weighted
  weights: {east: 1, west: 1}
`, ns))
	if err != nil {
		return nil, err
	}
	if _, err := fleet.Place(ctx, b.f.Karmada.Config, ps); err != nil {
		return nil, err
	}
	servers = map[string]*rest.Config{"karmada": b.f.Karmada.Config}
	members := map[string]client.Client{}
	for _, m := range b.f.Members {
		servers[m.Name] = m.Config
		if members[m.Name], err = newClient(m.Config); err != nil {
			return nil, err
		}
	}
	before, err = requests(ctx, servers)
	if err != nil {
		return nil, err
	}
	sched, err := schedulerStats(ctx, b.f.Karmada.SchedulerMetricsURL())
	if err != nil {
		return nil, err
	}
	began := time.Now()
	created, err = create(ctx, fc, ns, n)
	if err != nil {
		return nil, err
	}
	readyAt, err = waitReady(ctx, members, ns, n, 1)
	if err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	aggAt, err := waitReady(ctx, map[string]client.Client{"fleet": fc}, ns, n, 2)
	if err != nil {
		return nil, fmt.Errorf("fleet aggregated status: %w", err)
	}
	after, err = requests(ctx, servers)
	if err != nil {
		return nil, err
	}
	if now, err := schedulerStats(ctx, b.f.Karmada.SchedulerMetricsURL()); err == nil {
		fmt.Printf("%d services: %s\n", n, now.since(sched, time.Since(began)))
	}
	fr := summarize("fleet", n, created, readyAt, before, after)
	agg := latencies(created, aggAt)
	fr.aggregated = agg[len(agg)*99/100]
	return []row{direct, fr}, nil
}

// create makes n TrellisServices of 2 replicas, 8 at a time, and returns
// when each create was sent.
func create(ctx context.Context, c client.Client, ns string, n int) (map[string]time.Time, error) {
	out := make(map[string]time.Time, n)
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				s := gen.Service(fmt.Sprintf("svc-%04d", i), gen.WithNamespace(ns), gen.WithReplicas(2))
				s.UID = ""
				at := time.Now()
				err := c.Create(ctx, s)
				mu.Lock()
				out[s.Name] = at
				if err != nil && first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return out, first
}

// waitReady polls the clusters until each of the n services is Ready with
// want ready replicas in every one of them, and returns when each was.
func waitReady(ctx context.Context, clusters map[string]client.Client, ns string, n int, want int32) (map[string]time.Time, error) {
	readyIn := map[string]map[string]bool{}
	out := map[string]time.Time{}
	deadline := time.Now().Add(30 * time.Minute)
	for len(out) < n {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%d of %d services Ready after 30 minutes", len(out), n)
		}
		for name, c := range clusters {
			l := &v1alpha1.TrellisServiceList{}
			if err := c.List(ctx, l, client.InNamespace(ns)); err != nil {
				return nil, err
			}
			now := time.Now()
			for _, s := range l.Items {
				if meta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.ConditionReady) && s.Status.ReadyReplicas == want && s.Status.ObservedGeneration == s.Generation {
					if readyIn[s.Name] == nil {
						readyIn[s.Name] = map[string]bool{}
					}
					readyIn[s.Name][name] = true
					if _, done := out[s.Name]; !done && len(readyIn[s.Name]) == len(clusters) {
						out[s.Name] = now
					}
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return out, nil
}

func latencies(created, ready map[string]time.Time) []time.Duration {
	var out []time.Duration
	for name, at := range ready {
		out = append(out, at.Sub(created[name]))
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func summarize(mode string, n int, created, ready map[string]time.Time, before, after map[string]float64) row {
	l := latencies(created, ready)
	r := row{mode: mode, n: n, p50: l[len(l)/2], p99: l[len(l)*99/100], max: l[len(l)-1], requests: map[string]float64{}}
	for k, v := range after {
		r.requests[k] = (v - before[k]) / float64(n)
	}
	return r
}

// requests is apiserver_request_total summed, per apiserver.
func requests(ctx context.Context, servers map[string]*rest.Config) (map[string]float64, error) {
	out := map[string]float64{}
	for name, cfg := range servers {
		c, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		body, err := c.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s /metrics: %w", name, err)
		}
		for _, line := range strings.Split(string(body), "\n") {
			if !strings.HasPrefix(line, "apiserver_request_total{") {
				continue
			}
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err == nil {
				out[name] += v
			}
		}
	}
	return out, nil
}

// failover kills east's apiserver and times until west runs every
// service's two replicas.
func (b *bench) failover(ctx context.Context, ns string, n int) (time.Duration, error) {
	west, err := newClient(b.f.Member("west").Config)
	if err != nil {
		return 0, err
	}
	down := time.Now()
	b.f.Member("east").KillAPIServer()
	if _, err := waitReady(ctx, map[string]client.Client{"west": west}, ns, n, 2); err != nil {
		return 0, err
	}
	return time.Since(down), nil
}

// restore brings east back.
func (b *bench) restore(ctx context.Context) error {
	if err := b.f.Member("east").StartAPIServer(); err != nil {
		return err
	}
	return fleet.WaitReady(ctx, b.f.Karmada.Config, "east", 5*time.Minute)
}

// memory is the fleet control plane's processes' peak RSS.
func (b *bench) memory() (string, error) {
	var parts []string
	total := 0
	pids := b.f.Karmada.PIDs()
	names := make([]string, 0, len(pids))
	for name := range pids {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		kib, err := procstat.PeakRSS(pids[name])
		if err != nil {
			return "", err
		}
		total += kib
		parts = append(parts, fmt.Sprintf("%s %d MiB", name, kib/1024))
	}
	return fmt.Sprintf("%d MiB (%s)", total/1024, strings.Join(parts, ", ")), nil
}

func printRows(rows []row) {
	fmt.Println()
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "services\tapplied to\tapply->Ready p50\tp99\tmax\tfleet status Ready p99\trequests per workload")
	for _, r := range rows {
		agg := "-"
		if r.aggregated > 0 {
			agg = r.aggregated.Round(10 * time.Millisecond).String()
		}
		var reqs []string
		for _, k := range []string{"karmada", "east", "west", "direct"} {
			if v, ok := r.requests[k]; ok {
				reqs = append(reqs, fmt.Sprintf("%s %.1f", k, v))
			}
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.n, r.mode, r.p50.Round(10*time.Millisecond), r.p99.Round(10*time.Millisecond),
			r.max.Round(10*time.Millisecond), agg, strings.Join(reqs, ", "))
	}
	_ = tw.Flush()
	for i := 0; i+1 < len(rows); i += 2 {
		d, f := rows[i], rows[i+1]
		fmt.Printf("%d services: fleet p99 / direct p99 = %.2f (goal <= 2)\n", d.n, float64(f.p99)/float64(d.p99))
	}
}
