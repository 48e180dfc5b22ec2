package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
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
	"github.com/trellis-dev/trellis/internal/controlplane"
	"github.com/trellis-dev/trellis/internal/procstat"
	"github.com/trellis-dev/trellis/internal/testutil/gen"
)

type bench struct {
	f        *localfleet.Fleet
	direct   *localfleet.Member
	profiles string
	// cpus, with -pin, is where pin puts each plane's processes.
	cpus cpuSplit
}

type row struct {
	mode       string
	n          int
	p50, p99   time.Duration
	max        time.Duration
	requests   map[string]float64 // per workload, by apiserver
	aggregated time.Duration      // fleet only: p99 until the fleet object's aggregated status is Ready
}

func newClient(cfg *rest.Config) (client.WithWatch, error) {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = 500, 1000
	return client.NewWithWatch(c, client.Options{Scheme: controller.Scheme()})
}

// compare applies n services straight to the standalone member, then n at
// the fleet placed on east alone (the same work in one member as the
// direct run: what the fleet's layer adds), then n at the fleet divided
// 1:1 over east and west (every member runs every service), and times
// each to Ready.
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
	if err := b.pin(); err != nil {
		return nil, err
	}
	directBegan, cpu0 := time.Now(), procstat.SampleCPU(b.pids())
	profiled := b.profile(ctx, fmt.Sprintf("direct-%d", n), map[string]*controlplane.ControlPlane{"direct": b.direct.ControlPlane})
	wait := watchReady(ctx, map[string]client.WithWatch{"direct": dc}, ns, n, 2)
	created, err := create(ctx, dc, ns, n, 2)
	if err != nil {
		return nil, err
	}
	readyAt, err := wait()
	if err != nil {
		return nil, fmt.Errorf("direct: %w", err)
	}
	after, err := requests(ctx, servers)
	if err != nil {
		return nil, err
	}
	direct := summarize("direct", n, created, readyAt, before, after)
	printTopRequests(fmt.Sprintf("%d services direct:", n), before, after, n, 8)
	cpuDirect := procstat.SampleCPU(b.pids())
	profiled()
	procstat.PrintCPU(os.Stdout, fmt.Sprintf("%d services direct:", n), cpu0, cpuDirect, time.Since(directBegan), time.Second)

	one, err := b.viaFleet(ctx, n, "fleet, east only", "fleet-east", []string{"east"}, `
  clusters: [east]
  spread: weighted
  weights: {east: 1}
`)
	if err != nil {
		return nil, err
	}
	divided, err := b.viaFleet(ctx, n, "fleet, divided", "fleet", []string{"east", "west"}, `
  spread: weighted
  weights: {east: 1, west: 1}
`)
	if err != nil {
		return nil, err
	}
	both, err := b.membersDirect(ctx, n)
	if err != nil {
		return nil, err
	}
	return []row{direct, one, divided, both}, nil
}

// bothDirectly is the mode of membersDirect's row.
const bothDirectly = "east and west directly"

// membersDirect applies n services of one replica straight to east and to
// west at once (spreading a service over two clusters without a fleet: an
// apply to each), and times each from its first create to Ready in both.
// Both members then do the divided run's work on the same CPUs, without
// the fleet's layer: the divided row's anchor in its own topology.
func (b *bench) membersDirect(ctx context.Context, n int) (row, error) {
	ns := fmt.Sprintf("members-direct-%d", n)
	servers := map[string]*rest.Config{}
	members := map[string]client.WithWatch{}
	for _, m := range b.f.Members {
		c, err := newClient(m.Config)
		if err != nil {
			return row{}, err
		}
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return row{}, err
		}
		servers[m.Name], members[m.Name] = m.Config, c
	}
	before, err := requests(ctx, servers)
	if err != nil {
		return row{}, err
	}
	if err := b.pin(); err != nil {
		return row{}, err
	}
	title := fmt.Sprintf("%d services to east and west directly:", n)
	began, cpu := time.Now(), procstat.SampleCPU(b.pids())
	wait := watchReady(ctx, members, ns, n, 1)
	var mu sync.Mutex
	created := map[string]time.Time{}
	var first error
	var wg sync.WaitGroup
	for _, c := range members {
		wg.Go(func() {
			at, err := create(ctx, c, ns, n, 1)
			mu.Lock()
			defer mu.Unlock()
			for name, t := range at {
				if was, ok := created[name]; !ok || t.Before(was) {
					created[name] = t
				}
			}
			if err != nil && first == nil {
				first = err
			}
		})
	}
	wg.Wait()
	if first != nil {
		return row{}, first
	}
	readyAt, err := wait()
	if err != nil {
		return row{}, fmt.Errorf("%s: %w", bothDirectly, err)
	}
	procstat.PrintCPU(os.Stdout, title, cpu, procstat.SampleCPU(b.pids()), time.Since(began), time.Second)
	after, err := requests(ctx, servers)
	if err != nil {
		return row{}, err
	}
	printTopRequests(title, before, after, n, 8)
	return summarize(bothDirectly, n, created, readyAt, before, after), nil
}

// viaFleet applies n services at the fleet in namespace prefix-n, placed
// on clusters by spec (a Placement's spec), and times each to Ready in
// the members (2 replicas in all) and in the fleet's aggregated status.
func (b *bench) viaFleet(ctx context.Context, n int, mode, prefix string, clusters []string, spec string) (row, error) {
	fc, err := newClient(b.f.Karmada.Config)
	if err != nil {
		return row{}, err
	}
	ns := fmt.Sprintf("%s-%d", prefix, n)
	ps, err := fleet.DecodePlacements("bench", fmt.Appendf(nil, "apiVersion: fleet.trellis.dev/v1alpha1\nkind: Placement\nmetadata: {name: bench, namespace: %s}\nspec:%s", ns, spec))
	if err != nil {
		return row{}, err
	}
	if _, err := fleet.Place(ctx, b.f.Karmada.Config, ps); err != nil {
		return row{}, err
	}
	servers := map[string]*rest.Config{"karmada": b.f.Karmada.Config}
	members := map[string]client.WithWatch{}
	for _, name := range clusters {
		m := b.f.Member(name)
		servers[m.Name] = m.Config
		if members[m.Name], err = newClient(m.Config); err != nil {
			return row{}, err
		}
	}
	before, err := requests(ctx, servers)
	if err != nil {
		return row{}, err
	}
	sched, err := schedulerStats(ctx, b.f.Karmada.SchedulerMetricsURL())
	if err != nil {
		return row{}, err
	}
	title := fmt.Sprintf("%d services at the fleet (%s):", n, strings.Join(clusters, ", "))
	if err := b.pin(); err != nil {
		return row{}, err
	}
	began, cpu := time.Now(), procstat.SampleCPU(b.pids())
	profiled := b.profile(ctx, ns, map[string]*controlplane.ControlPlane{
		"karmada": b.f.Karmada.ControlPlane, "east": b.f.Member("east").ControlPlane})
	waitMembers := watchReady(ctx, members, ns, n, int32(2/len(clusters)))
	waitFleet := watchReady(ctx, map[string]client.WithWatch{"fleet": fc}, ns, n, 2)
	created, err := create(ctx, fc, ns, n, 2)
	if err != nil {
		return row{}, err
	}
	readyAt, err := waitMembers()
	if err != nil {
		return row{}, fmt.Errorf("%s: %w", mode, err)
	}
	aggAt, err := waitFleet()
	if err != nil {
		return row{}, fmt.Errorf("%s aggregated status: %w", mode, err)
	}
	procstat.PrintCPU(os.Stdout, title, cpu, procstat.SampleCPU(b.pids()), time.Since(began), time.Second)
	profiled()
	after, err := requests(ctx, servers)
	if err != nil {
		return row{}, err
	}
	if now, err := schedulerStats(ctx, b.f.Karmada.SchedulerMetricsURL()); err == nil {
		fmt.Printf("%s %s\n", title, now.since(sched, time.Since(began)))
	}
	printTopRequests(title, before, after, n, 8)
	r := summarize(mode, n, created, readyAt, before, after)
	agg := latencies(created, aggAt)
	r.aggregated = agg[len(agg)*99/100]
	return r, nil
}

// create makes n TrellisServices of replicas replicas, 8 at a time, and
// returns when each create was sent.
func create(ctx context.Context, c client.Client, ns string, n int, replicas int32) (map[string]time.Time, error) {
	out := make(map[string]time.Time, n)
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				s := gen.Service(fmt.Sprintf("svc-%04d", i), gen.WithNamespace(ns), gen.WithReplicas(replicas))
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

// watchReady starts watching the clusters' TrellisServices in ns, and
// returns a wait for the time each of n services is Ready with want
// replicas (at its observed generation) in every cluster: the time the
// watch event arrived, not a poll's. Start it before the creates.
func watchReady(ctx context.Context, clusters map[string]client.WithWatch, ns string, n int, want int32) func() (map[string]time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	var mu sync.Mutex
	readyIn := map[string]map[string]bool{}
	out := map[string]time.Time{}
	done := make(chan struct{})
	errs := make(chan error, len(clusters))
	see := func(cluster string, s *v1alpha1.TrellisService, at time.Time) {
		if !meta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.ConditionReady) || s.Status.ReadyReplicas != want || s.Status.ObservedGeneration != s.Generation {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if readyIn[s.Name] == nil {
			readyIn[s.Name] = map[string]bool{}
		}
		readyIn[s.Name][cluster] = true
		if _, ok := out[s.Name]; !ok && len(readyIn[s.Name]) == len(clusters) {
			out[s.Name] = at
			if len(out) == n {
				close(done)
			}
		}
	}
	for name, c := range clusters {
		go func() {
			for ctx.Err() == nil {
				l := &v1alpha1.TrellisServiceList{}
				if err := c.List(ctx, l, client.InNamespace(ns)); err != nil {
					errs <- fmt.Errorf("%s: %w", name, err)
					return
				}
				now := time.Now()
				for i := range l.Items {
					see(name, &l.Items[i], now)
				}
				w, err := c.Watch(ctx, &v1alpha1.TrellisServiceList{}, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: l.ResourceVersion}})
				if err != nil {
					errs <- fmt.Errorf("%s: %w", name, err)
					return
				}
				for ev := range w.ResultChan() {
					if s, ok := ev.Object.(*v1alpha1.TrellisService); ok {
						see(name, s, time.Now())
					}
				}
				w.Stop()
			}
		}()
	}
	return func() (map[string]time.Time, error) {
		defer cancel()
		select {
		case <-done:
			mu.Lock()
			defer mu.Unlock()
			return maps.Clone(out), nil
		case err := <-errs:
			return nil, err
		case <-ctx.Done():
			mu.Lock()
			defer mu.Unlock()
			return nil, fmt.Errorf("%d of %d services Ready: %w", len(out), n, ctx.Err())
		}
	}
}

func latencies(created, ready map[string]time.Time) []time.Duration {
	var out []time.Duration
	for name, at := range ready {
		out = append(out, at.Sub(created[name]))
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func summarize(mode string, n int, created, ready map[string]time.Time, before, after requestCounts) row {
	l := latencies(created, ready)
	r := row{mode: mode, n: n, p50: l[len(l)/2], p99: l[len(l)*99/100], max: l[len(l)-1], requests: map[string]float64{}}
	for k := range after {
		r.requests[k] = (after.total(k) - before.total(k)) / float64(n)
	}
	return r
}

// requests is apiserver_request_total summed, per apiserver.
func requests(ctx context.Context, servers map[string]*rest.Config) (requestCounts, error) {
	out := requestCounts{}
	for name, cfg := range servers {
		c, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		body, err := c.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s /metrics: %w", name, err)
		}
		out[name] = map[string]float64{}
		for _, line := range strings.Split(string(body), "\n") {
			labels, ok := strings.CutPrefix(line, "apiserver_request_total{")
			if !ok {
				continue
			}
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err == nil {
				out[name][requestKind(labels)] += v
			}
		}
	}
	return out, nil
}

// requestCounts are an apiserver's requests so far, by server and then
// by verb and resource.
type requestCounts map[string]map[string]float64

func (c requestCounts) total(server string) float64 {
	t := 0.0
	for _, v := range c[server] {
		t += v
	}
	return t
}

// requestKind is "VERB resource[/subresource] [code if not 2xx]" from a request metric's labels.
func requestKind(labels string) string {
	get := func(k string) string {
		_, v, ok := strings.Cut(labels, k+`="`)
		if !ok {
			return ""
		}
		v, _, _ = strings.Cut(v, `"`)
		return v
	}
	kind := get("verb") + " " + get("resource")
	if sub := get("subresource"); sub != "" {
		kind += "/" + sub
	}
	if code := get("code"); code != "" && code[0] != '2' {
		kind += " " + code
	}
	return kind
}

// printTopRequests prints each server's most frequent requests between two
// counts, per workload.
func printTopRequests(title string, before, after requestCounts, n, top int) {
	servers := make([]string, 0, len(after))
	for s := range after {
		servers = append(servers, s)
	}
	sort.Strings(servers)
	fmt.Printf("%s most frequent requests per workload:\n", title)
	for _, s := range servers {
		kinds := make([]string, 0, len(after[s]))
		for k := range after[s] {
			if after[s][k] > before[s][k] {
				kinds = append(kinds, k)
			}
		}
		d := func(k string) float64 { return (after[s][k] - before[s][k]) / float64(n) }
		sort.Slice(kinds, func(i, j int) bool { return d(kinds[i]) > d(kinds[j]) })
		var parts []string
		for _, k := range kinds[:min(top, len(kinds))] {
			parts = append(parts, fmt.Sprintf("%s %.1f", k, d(k)))
		}
		fmt.Printf("  %-8s %s\n", s, strings.Join(parts, ", "))
	}
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
	if _, err := watchReady(ctx, map[string]client.WithWatch{"west": west}, ns, n, 2)(); err != nil {
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

// profile starts the apiservers' CPU profiles over the next 20 s when
// profiles are asked for; the returned func waits for them.
func (b *bench) profile(ctx context.Context, run string, servers map[string]*controlplane.ControlPlane) func() {
	if b.profiles == "" {
		return func() {}
	}
	var wg sync.WaitGroup
	for name, cp := range servers {
		wg.Go(func() {
			path := filepath.Join(b.profiles, fmt.Sprintf("%s-%s.pprof", run, name))
			if err := cp.APIServerProfile(ctx, path, 20*time.Second); err != nil {
				fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
			}
		})
	}
	return wg.Wait
}

// pids are every process of the bench's clusters, named by cluster and
// component, and the bench's own (the load generator and watchers).
func (b *bench) pids() map[string]int {
	out := map[string]int{"bench (load, watches)": os.Getpid()}
	for name, pid := range b.f.Karmada.PIDs() {
		out["karmada "+name] = pid
	}
	for _, m := range append([]*localfleet.Member{b.direct}, b.f.Members...) {
		for name, pid := range m.PIDs() {
			out[m.Name+" "+name] = pid
		}
	}
	return out
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
	direct, both := map[int]row{}, map[int]row{}
	for _, r := range rows {
		switch r.mode {
		case "direct":
			direct[r.n] = r
		case bothDirectly:
			both[r.n] = r
		}
	}
	for _, r := range rows {
		d := direct[r.n]
		switch r.mode {
		case "direct":
		case bothDirectly:
			fmt.Printf("%d services: %s p99 / direct p99 = %.2f (the members' own work on their CPUs)\n", r.n, r.mode, float64(r.p99)/float64(d.p99))
		default:
			fmt.Printf("%d services: %s p99 / direct p99 = %.2f (goal <= 2)\n", r.n, r.mode, float64(r.p99)/float64(d.p99))
		}
		if b, ok := both[r.n]; ok && r.mode == "fleet, divided" {
			fmt.Printf("%d services: %s p99 / %s p99 = %.2f (the fleet's layer over the same members' work)\n", r.n, r.mode, bothDirectly, float64(r.p99)/float64(b.p99))
		}
	}
}
