package main

import (
	"context"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/internal/controlplane"
	"github.com/trellis-dev/trellis/internal/procstat"
	"github.com/trellis-dev/trellis/internal/testutil/gen"
)

// phase is one timed phase of a round: its time, and the CPU all processes
// spent in it.
type phase struct {
	wall time.Duration
	cpu  time.Duration
	// rsAtEnd and podsAtEnd are the ReplicaSets and pods that existed in
	// the phase's namespace when its clock stopped.
	rsAtEnd, podsAtEnd int64
	// quietAt is when, after the phase's start, the control plane was
	// back at its idle rate; quietCPU is the CPU all processes spent until
	// then, above that rate (quiet.go).
	quietAt, quietCPU time.Duration
	// byProc is the phase's CPU by process; rss each control-plane
	// process's resident memory (KiB) and heap this process's heap in use
	// (bytes; HeapAlloc, so garbage not yet collected too) when the
	// phase's clock stopped: what builds up across rounds, if anything.
	byProc procstat.CPUSample
	rss    map[string]int
	heap   uint64
}

// bench holds what the extra rounds need.
type bench struct {
	cp *controlplane.ControlPlane
	c  client.Client
	w  cache.Cache
	n  int
	// idle is the CPU (cores) all processes spend with nothing to do.
	idle float64
}

// rounds runs rounds 2..total after the first (bundle, then Trellis, whose
// results are given), each in namespaces of its own, alternating which
// phase goes first so that neither always runs on the cluster the other
// left. It prints each round's ratio and their median.
func (b bench) rounds(ctx context.Context, total int, first [2]phase) error {
	results := [][2]phase{first}
	for r := 2; r <= total; r++ {
		order := []string{"bundle", "trellis"}
		if r%2 == 0 {
			order = []string{"trellis", "bundle"}
		}
		var res [2]phase
		for _, which := range order {
			ns := fmt.Sprintf("%s-%d", which, r)
			var t timed
			var err error
			if which == "bundle" {
				t, err = b.bundlePhase(ctx, ns, phaseOpts{})
				res[0] = t.phase
			} else {
				t, err = b.trellisPhase(ctx, ns, phaseOpts{})
				res[1] = t.phase
			}
			if err != nil {
				return fmt.Errorf("round %d, %s phase: %w", r, which, err)
			}
		}
		results = append(results, res)
		fmt.Printf("round %d of %d done (%s first)\n", r, total, order[0])
	}
	fmt.Printf("rounds (bundle first in odd rounds, Trellis first in even ones):\n")
	var ratios, quietRatios, bundles, trellises []float64
	for i, res := range results {
		ratio := res[1].wall.Seconds() / res[0].wall.Seconds()
		ratios = append(ratios, ratio)
		quietRatios = append(quietRatios, res[1].quietCPU.Seconds()/res[0].quietCPU.Seconds())
		bundles = append(bundles, res[0].wall.Seconds())
		trellises = append(trellises, res[1].wall.Seconds())
		fmt.Printf("  round %d: bundle %.2fs (%.1f CPU-s; %d ReplicaSets, %d pods at its end), trellis %.2fs (%.1f CPU-s; %d, %d): ratio %.2f\n",
			i+1, res[0].wall.Seconds(), res[0].cpu.Seconds(), res[0].rsAtEnd, res[0].podsAtEnd,
			res[1].wall.Seconds(), res[1].cpu.Seconds(), res[1].rsAtEnd, res[1].podsAtEnd, ratio)
		fmt.Printf("           CPU to quiet, above idle: bundle %.1f CPU-s (quiet %.1fs after its start), trellis %.1f CPU-s (%.1fs): ratio %.2f\n",
			res[0].quietCPU.Seconds(), res[0].quietAt.Seconds(), res[1].quietCPU.Seconds(), res[1].quietAt.Seconds(), quietRatios[i])
		printProcs("bundle ", res[0])
		printProcs("trellis", res[1])
	}
	fmt.Printf("median of %d rounds: bundle %.2fs, trellis %.2fs; median ratio trellis/bundle %.2f (goal <= 1.15)\n",
		len(results), median(bundles), median(trellises), median(ratios))
	fmt.Printf("median ratio of the CPU to quiet, above idle (%.2f cores): %.2f\n", b.idle, median(quietRatios))
	return nil
}

// timed is a phase run: its result, its clock (start, the creates' end,
// the end, and for a deleted namespace when the deletion began), and the
// CPU samples around it.
type timed struct {
	phase
	start, end, settled time.Time
	created             time.Duration
	cpu0, cpu1          procstat.CPUSample
	// profiled waits for the phase's profiles (round 1, keep).
	profiled func()
}

// phaseOpts: the first round profiles its phases (suffix for
// startProfiles) and keeps the Trellis phase's namespace for the resync
// window.
type phaseOpts struct {
	profile bool
	suffix  string
	keep    bool
}

// bundlePhase creates a TrellisService's native objects directly in ns,
// until every ReplicaSet exists; then waits for the pods and deletes ns.
func (b bench) bundlePhase(ctx context.Context, ns string, o phaseOpts) (timed, error) {
	var rs, pods atomic.Int64
	unwatch, err := b.watchNew(ctx, ns, []watched{{&appsv1.ReplicaSet{}, &rs, nil}, {&corev1.Pod{}, &pods, nil}})
	if err != nil {
		return timed{}, err
	}
	defer unwatch()
	objs, err := bundleObjects(b.n, ns)
	if err != nil {
		return timed{}, err
	}
	t, err := b.begin(ctx, o)
	if err != nil {
		return timed{}, err
	}
	if err := createAll(ctx, len(objs), func(i int) client.Object { return objs[i] }, b.c); err != nil {
		return timed{}, err
	}
	t.created = time.Since(t.start)
	if err := waitFor(ctx, ns+"'s ReplicaSets", func() bool { return rs.Load() >= int64(b.n) }); err != nil {
		return timed{}, err
	}
	b.finish(&t)
	t.rsAtEnd, t.podsAtEnd = rs.Load(), pods.Load()
	// As in the Trellis phase, the quiet is looked for from the end on.
	if err := b.waitQuiet(ctx, &t); err != nil {
		return timed{}, err
	}
	if podsExpected() {
		if err := waitFor(ctx, ns+"'s pods", func() bool { return pods.Load() >= int64(b.n) }); err != nil {
			return timed{}, err
		}
	}
	return t, b.clear(ctx, ns, &t)
}

// trellisPhase creates TrellisServices in ns, until the controller has
// made every owned object and written every status; then deletes ns,
// unless o.keep.
func (b bench) trellisPhase(ctx context.Context, ns string, o phaseOpts) (timed, error) {
	var deploys, svcs, pdbs, statuses, rs, pods atomic.Int64
	written := func(o any) bool {
		ts := o.(*v1alpha1.TrellisService)
		return meta.IsStatusConditionTrue(ts.Status.Conditions, v1alpha1.ConditionReady) ||
			meta.IsStatusConditionTrue(ts.Status.Conditions, v1alpha1.ConditionProgressing)
	}
	unwatch, err := b.watchNew(ctx, ns, []watched{
		{&appsv1.Deployment{}, &deploys, nil}, {&corev1.Service{}, &svcs, nil},
		{&policyv1.PodDisruptionBudget{}, &pdbs, nil}, {&v1alpha1.TrellisService{}, &statuses, written},
		{&appsv1.ReplicaSet{}, &rs, nil}, {&corev1.Pod{}, &pods, nil},
	})
	if err != nil {
		return timed{}, err
	}
	defer unwatch()
	t, err := b.begin(ctx, o)
	if err != nil {
		return timed{}, err
	}
	// The bench process's own profile covers the phase, not the wait for
	// a quiet control plane before it.
	stopSelf := func() {}
	if o.profile && selfProfile != "" {
		stop, err := startCPUProfile(selfProfile)
		if err != nil {
			return timed{}, err
		}
		stopSelf = sync.OnceFunc(stop)
		defer stopSelf()
	}
	if err := createAll(ctx, b.n, func(i int) client.Object {
		return gen.Service(fmt.Sprintf("svc-%04d", i), gen.WithNamespace(ns))
	}, b.c); err != nil {
		return timed{}, err
	}
	t.created = time.Since(t.start)
	if err := waitFor(ctx, ns+"'s owned objects and statuses", func() bool {
		return min(deploys.Load(), svcs.Load(), pdbs.Load(), statuses.Load()) >= int64(b.n)
	}); err != nil {
		return timed{}, err
	}
	stopSelf()
	b.finish(&t)
	t.rsAtEnd, t.podsAtEnd = rs.Load(), pods.Load()
	if err := b.waitQuiet(ctx, &t); err != nil {
		return timed{}, err
	}
	if o.keep {
		return t, nil
	}
	return t, b.clear(ctx, ns, &t)
}

// begin waits until the control plane is quiet (whatever the phase before
// left, a deletion's garbage collection among it, is not the phase's), then
// starts the phase's clock, its CPU sample and, when asked, its profiles.
func (b bench) begin(ctx context.Context, o phaseOpts) (timed, error) {
	if _, _, err := b.quiet(ctx, "before the phase"); err != nil {
		return timed{}, err
	}
	t := timed{profiled: func() {}}
	if o.profile {
		t.profiled = startProfiles(ctx, b.cp, o.suffix)
	}
	t.cpu0 = sampleCPU(b.cp)
	t.start = time.Now()
	return t, nil
}

// finish stops a phase's clock.
func (b bench) finish(t *timed) {
	t.end = time.Now()
	t.cpu1 = sampleCPU(b.cp)
	t.wall = t.end.Sub(t.start)
	t.cpu = cpuSpent(t.cpu0, t.cpu1)
	t.byProc = procstat.CPUSample{}
	for name, d := range t.cpu1 {
		t.byProc[name] = d - t.cpu0[name]
	}
	t.rss = map[string]int{}
	for name, pid := range b.cp.PIDs() {
		t.rss[name], _ = procstat.RSS(pid)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.heap = ms.HeapAlloc
}

// printProcs prints a phase's CPU by process and what it held at its end.
func printProcs(name string, p phase) {
	names := slices.Sorted(maps.Keys(p.byProc))
	fmt.Printf("           %s CPU-s:", name)
	for _, n := range names {
		fmt.Printf(" %s %.1f", short(n), p.byProc[n].Seconds())
	}
	fmt.Printf("; at its end RSS MiB:")
	for _, n := range slices.Sorted(maps.Keys(p.rss)) {
		fmt.Printf(" %s %.0f", short(n), float64(p.rss[n])/1024)
	}
	fmt.Printf(", bench heap %.0f MiB\n", float64(p.heap)/(1<<20))
}

// short names a process in one word.
func short(name string) string {
	name, _, _ = strings.Cut(name, " ")
	return strings.TrimPrefix(name, "kube-")
}

type watched struct {
	obj client.Object
	n   *atomic.Int64
	ok  func(any) bool
}

// watchNew counts objects appearing in namespace ns, then creates it. The
// returned function removes the counting handlers.
func (b bench) watchNew(ctx context.Context, ns string, ws []watched) (unwatch func(), err error) {
	var removes []func()
	unwatch = func() {
		for _, r := range removes {
			r()
		}
	}
	for _, w := range ws {
		remove, err := watchCount(ctx, b.w, w.obj, ns, w.n, w.ok)
		if err != nil {
			unwatch()
			return nil, err
		}
		removes = append(removes, remove)
	}
	if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		unwatch()
		return nil, fmt.Errorf("create namespace %s: %w", ns, err)
	}
	return unwatch, nil
}

// clear lets the phase's last writes settle (the phase waited for a quiet
// control plane; at least 5s after its end), waits for its profiles,
// deletes its namespace, and leaves the cluster a moment before the next
// phase.
func (b bench) clear(ctx context.Context, ns string, t *timed) error {
	time.Sleep(time.Until(t.end.Add(5 * time.Second)))
	t.settled = time.Now()
	t.profiled()
	if err := deleteNamespace(ctx, b.c, ns); err != nil {
		return err
	}
	time.Sleep(5 * time.Second)
	return nil
}

func cpuSpent(from, to procstat.CPUSample) time.Duration {
	var d time.Duration
	for name, t := range to {
		d += t - from[name]
	}
	return d
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
