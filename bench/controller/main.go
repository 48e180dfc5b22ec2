// Command controller measures the workload controller on a real control
// plane (etcd, kube-apiserver, kube-controller-manager from `make tools`):
//
//  1. native: N Deployments created at once, until kube-controller-manager
//     has made every ReplicaSet;
//  2. bundle: the N Deployments, Services and PDBs that N TrellisServices
//     become, created directly, until every ReplicaSet exists: the same
//     native objects without the controller;
//  3. trellis: N TrellisServices created at once, until every owned object
//     exists and every status reports Ready or Progressing;
//  4. resync: every object re-delivered from the cache, nothing changed.
//
// Each phase's namespace is deleted, with everything in it, before the next
// phase starts: every phase creates its objects on a cluster holding none
// of the earlier phases'. Then -rounds minus one more rounds (default 5 in
// all) of the bundle and Trellis phases follow the resync window, in
// alternating order, and the median of the rounds' Trellis/bundle ratios is
// printed (goal: at most 1.15): two phases of one run differ by as much as
// that goal's margin.
//
// API cost is counted from the apiserver's audit log by user agent. It prints
// the numbers and the Trellis/native time ratio (goal: at most 1.5).
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

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/controller"
	"github.com/trellis-dev/trellis/controller/inject"
	"github.com/trellis-dev/trellis/controller/trellisservice"
	"github.com/trellis-dev/trellis/internal/controlplane"
	"github.com/trellis-dev/trellis/internal/testutil/gen"
	"github.com/trellis-dev/trellis/test/loadtest"
)

const (
	controllerUA = "trellis-controller"
	loaderUA     = "trellis-bench-loader"
)

func main() {
	n := flag.Int("n", 1000, "objects per phase")
	workers := flag.Int("workers", 16, "controller workers")
	flag.IntVar(&qps, "qps", 200, "controller client QPS (burst is twice that)")
	dir := flag.String("dir", "", "work directory (default: a temp dir, removed)")
	flag.StringVar(&kcmControllers, "kcm-controllers", "", "kube-controller-manager --controllers, for diagnosis (default: all)")
	flag.StringVar(&profile, "apiserver-profile", "", "write a kube-apiserver CPU profile of the Trellis phase's start to this file, and of the bundle phase's to this file + .bundle")
	flag.StringVar(&kcmProfile, "kcm-profile", "", "write a kube-controller-manager CPU profile of the Trellis phase's start to this file, and of the bundle phase's to this file + .bundle")
	flag.DurationVar(&profileFor, "apiserver-profile-for", 20*time.Second, "how long each -apiserver-profile and -kcm-profile runs, from its phase's start")
	flag.StringVar(&selfProfile, "self-profile", "", "write a CPU profile of the bench process (controller, loader, watcher) over the Trellis phase to this file")
	flag.StringVar(&crTrafficMode, "cr-traffic", "", "first run a diagnostic phase, before the controller starts: the TrellisService requests the Trellis phase adds (create, owner read, status patch) sent by the loader, nothing created for them; alone, or with-bundle (at the same time as the bundle phase's objects, in a namespace of their own)")
	flag.IntVar(&rounds, "rounds", 5, "rounds of the bundle and Trellis phases (1: one of each); rounds after the first run after the resync window, in namespaces of their own, in alternating order, and are compared by their median ratio")
	flag.Parse()
	if err := run(*n, *workers, *dir); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

var (
	qps        int
	profile    string
	kcmProfile string
	// rounds is how many rounds of the bundle and Trellis phases run.
	rounds int
	// crTrafficMode, when set, runs the diagnostic cr-traffic phase first.
	crTrafficMode string
	profileFor    time.Duration
	// selfProfile, when set, is where the bench process's CPU profile of
	// the Trellis phase goes.
	selfProfile string
	// kcmControllers, when set, is kube-controller-manager's --controllers.
	kcmControllers string
)

func run(n, workers int, dir string) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if dir == "" {
		d, err := os.MkdirTemp("", "trellis-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	opts := controlplane.Options{ControllerManager: true, AuditLog: true}
	if kcmControllers != "" {
		opts.ControllerManagerFlags = []string{"--controllers=" + kcmControllers}
	}
	cp, err := controlplane.Start(dir, opts)
	if err != nil {
		return err
	}
	defer cp.Stop()
	if out, err := cp.Kubectl(ctx, "apply", "--server-side", "-f", "config/crd/"); err != nil {
		return fmt.Errorf("install CRDs: %v: %s", err, out)
	}
	if out, err := cp.Kubectl(ctx, "wait", "--for=condition=Established", "--timeout=60s", "crd", "--all"); err != nil {
		return fmt.Errorf("CRDs: %v: %s", err, out)
	}
	loaderCfg := rest.CopyConfig(cp.Config)
	loaderCfg.UserAgent, loaderCfg.QPS, loaderCfg.Burst = loaderUA, 1000, 2000
	c, err := client.New(loaderCfg, client.Options{Scheme: controller.Scheme()})
	if err != nil {
		return err
	}
	for _, ns := range []string{"trellis-system", "native"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
	}
	// A watcher with its own cache tells when each phase is done.
	w, err := cache.New(loaderCfg, cache.Options{Scheme: controller.Scheme()})
	if err != nil {
		return err
	}
	go func() { _ = w.Start(ctx) }()
	counts := map[string]*atomic.Int64{}
	for _, kind := range []string{"rs-native", "pods-native"} {
		counts[kind] = &atomic.Int64{}
	}
	if _, err := watchCount(ctx, w, &appsv1.ReplicaSet{}, "native", counts["rs-native"], nil); err != nil {
		return err
	}
	if _, err := watchCount(ctx, w, &corev1.Pod{}, "native", counts["pods-native"], nil); err != nil {
		return err
	}
	// Every watch the phases count with is open from the start, so each
	// phase pays for the same watches (the Trellis phase's kinds would
	// otherwise be watched only from the first Trellis phase on).
	for _, o := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}, &policyv1.PodDisruptionBudget{}, &v1alpha1.TrellisService{}} {
		if _, err := w.GetInformer(ctx, o); err != nil {
			return fmt.Errorf("informer for %T: %w", o, err)
		}
	}
	w.WaitForCacheSync(ctx)

	if crTrafficMode != "" {
		if err := crTraffic(ctx, cp, c, w, n, crTrafficMode); err != nil {
			return err
		}
		time.Sleep(5 * time.Second)
	}

	ctrl.SetLogger(logr.Discard())
	// The controller runs from the start, so its watches are warm for both
	// phases, like a controller in a live cluster.
	mgr, err := controller.New(cp.Config, controller.Config{UserAgent: controllerUA, QPS: float32(qps), Burst: 2 * qps, Workers: workers, SyncPeriod: 45 * time.Second})
	if err != nil {
		return err
	}
	go func() { _ = mgr.Start(ctx) }()
	mgr.GetCache().WaitForCacheSync(ctx)

	fmt.Printf("objects per phase: %d, controller workers: %d, control plane: %s on %s\n", n, workers, controlplane.KubernetesVersion, "2 cores")
	time.Sleep(2 * time.Second)
	idle, err := measureIdle(cp, 10*time.Second)
	if err != nil {
		return err
	}
	fmt.Printf("idle control plane (controller and watches running): %.3f cores\n", idle)

	// Phase 1: native.
	cpu0 := sampleCPU(cp)
	start := time.Now()
	if err := createAll(ctx, n, func(i int) client.Object { return nativeDeployment(i) }, c); err != nil {
		return err
	}
	created := time.Since(start)
	if err := waitFor(ctx, "the native ReplicaSets", func() bool { return counts["rs-native"].Load() >= int64(n) }); err != nil {
		return err
	}
	native := time.Since(start)
	nativeStart, nativeEnd := start, time.Now()
	cpu1 := sampleCPU(cp)
	fmt.Printf("native:  %d Deployments -> ReplicaSets by kube-controller-manager: %.2fs (creates took %.2fs)\n", n, native.Seconds(), created.Seconds())
	// Let kube-controller-manager finish the native phase's pods, so the
	// Trellis phase starts on a quiet apiserver too.
	if podsExpected() {
		if err := waitFor(ctx, "the native pods", func() bool { return counts["pods-native"].Load() >= int64(n) }); err != nil {
			return err
		}
	}
	// Each later phase starts on a cluster without the earlier phases'
	// objects: costs that grow with what the cluster holds (the
	// processes' heaps and caches, the ClusterIP allocator's walk of every
	// Service) must not weigh on the Trellis phase, which runs last, more
	// than on the bundle phase.
	time.Sleep(5 * time.Second)
	nativeSettled := time.Now()
	if err := deleteNamespace(ctx, c, "native"); err != nil {
		return err
	}
	time.Sleep(5 * time.Second)

	// Phase 2: the same native objects a TrellisService becomes, created
	// by hand: what the controller's work is compared with.
	b := bench{cp: cp, c: c, w: w, n: n, idle: idle}
	bt, err := b.bundlePhase(ctx, "bundle", phaseOpts{profile: true, suffix: ".bundle"})
	if err != nil {
		return err
	}
	bundled, bundleStart, bundleEnd, bundleSettled := bt.wall, bt.start, bt.end, bt.settled
	fmt.Printf("bundle:  %d x the Deployment+Service+PDB a TrellisService becomes, created directly -> ReplicaSets: %.2fs (creates took %.2fs)\n", n, bundled.Seconds(), bt.created.Seconds())

	// Phase 3: Trellis, its objects kept for the resync window.
	tt, err := b.trellisPhase(ctx, "trellis", phaseOpts{profile: true, keep: true})
	if err != nil {
		return err
	}
	trellis, start, end, created := tt.wall, tt.start, tt.end, tt.created
	fmt.Printf("trellis: %d TrellisServices -> Deployment+Service+PDB each, status written: %.2fs (creates took %.2fs)\n", n, trellis.Seconds(), created.Seconds())
	fmt.Printf("ratio trellis/native: %.2f (goal <= 1.5)\n", trellis.Seconds()/native.Seconds())
	fmt.Printf("ratio trellis/bundle: %.2f (the controller against creating the same objects directly)\n", trellis.Seconds()/bundled.Seconds())
	fmt.Printf("CPU to quiet, above idle: bundle %.1f CPU-s (quiet %.1fs after its start), trellis %.1f CPU-s (%.1fs): ratio %.2f\n",
		bt.quietCPU.Seconds(), bt.quietAt.Seconds(), tt.quietCPU.Seconds(), tt.quietAt.Seconds(), tt.quietCPU.Seconds()/bt.quietCPU.Seconds())
	printCPU("native phase", cpu0, cpu1, native)
	printCPU("bundle phase", bt.cpu0, bt.cpu1, bundled)
	printCPU("trellis phase", tt.cpu0, tt.cpu1, trellis)
	// Both phases are bound by the apiserver's write rate on this machine:
	// the write counts of all clients bound the time ratio from below.
	time.Sleep(2 * time.Second) // the audit log is written asynchronously
	nw, nativeWrites, err := writes(cp, nativeStart, nativeEnd)
	if err != nil {
		return err
	}
	tw, trellisWrites, err := writes(cp, start, end)
	if err != nil {
		return err
	}
	fmt.Printf("apiserver writes in each phase, all clients: native %d (%.1f per Deployment, %.0f/s), trellis %d (%.1f per TrellisService, %.0f/s); write ratio %.2f\n",
		nw, float64(nw)/float64(n), float64(nw)/native.Seconds(), tw, float64(tw)/float64(n), float64(tw)/trellis.Seconds(), float64(tw)/float64(nw))
	_, bundleWrites, err := writes(cp, bundleStart, bundleEnd)
	if err != nil {
		return err
	}
	printWrites("native phase writes", nativeWrites, n)
	printWrites("bundle phase writes", bundleWrites, n)
	printWrites("trellis phase writes", trellisWrites, n)

	// Let the Deployment controller's status updates settle, then count the
	// controller's requests over the whole creation phase.
	time.Sleep(10 * time.Second)
	settled := time.Now()
	evs, err := cp.ReadAudit(controllerUA, start, settled)
	if err != nil {
		return err
	}
	printCounts("controller requests during creation (until settled)", evs, n)
	// Each phase's window runs until 5s after its pods exist (its
	// ReplicaSets, with -kcm-controllers=...,-replicaset-controller), when
	// its namespace is deleted (the Trellis phase's until settled, now): the
	// status updates of its creation, not those of its deletion.
	for _, ph := range []struct {
		name     string
		from, to time.Time
	}{{"native", nativeStart, nativeSettled}, {"bundle", bundleStart, bundleSettled}, {"trellis", start, settled}} {
		ok, conflicts, err := deploymentStatusUpdates(cp, ph.from, ph.to)
		if err != nil {
			return err
		}
		fmt.Printf("deployment-controller status updates per Deployment until settled, %-7s: %.2f (%.2f more lost a conflict)\n", ph.name, float64(ok)/float64(n), float64(conflicts)/float64(n))
	}
	var lastCreate, firstStatus time.Time
	for _, e := range evs {
		if e.Verb == "create" && e.Received.After(lastCreate) {
			lastCreate = e.Received
		}
		if e.Verb == "patch" && e.Resource() == "trellisservices/status" && (firstStatus.IsZero() || e.Received.Before(firstStatus)) {
			firstStatus = e.Received
		}
	}
	fmt.Printf("  last owned-object create at %.2fs, first status write at %.2fs\n", lastCreate.Sub(start).Seconds(), firstStatus.Sub(start).Seconds())
	_ = end

	// Phase 4: resync. SyncPeriod is 45s; watch a window that holds one.
	fmt.Printf("resync: waiting 50s for the controller's periodic resync of %d objects...\n", n)
	from := time.Now()
	time.Sleep(50 * time.Second)
	evs, err = cp.ReadAudit(controllerUA, from, time.Now())
	if err != nil {
		return err
	}
	printCounts("controller requests during a resync window", evs, n)
	tt.profiled()
	if rounds < 2 {
		return nil
	}
	// The later rounds start on a cluster without the first round's objects.
	if err := deleteNamespace(ctx, c, "trellis"); err != nil {
		return err
	}
	time.Sleep(5 * time.Second)
	return b.rounds(ctx, rounds, [2]phase{bt.phase, tt.phase})
}

// writes counts create, update, patch and delete requests of every client
// received in [from, to), in all and by client, verb and resource.
func writes(cp *controlplane.ControlPlane, from, to time.Time) (int, map[string]int, error) {
	evs, err := cp.ReadAudit("", from, to)
	if err != nil {
		return 0, nil, err
	}
	n := 0
	byClient := map[string]int{}
	for _, e := range evs {
		if loadtest.MutatingVerbs[e.Verb] {
			n++
			byClient[fmt.Sprintf("%-28s %-7s %s %d", loadtest.ClientName(e.UserAgent), e.Verb, e.Resource(), e.Code())]++
		}
	}
	return n, byClient, nil
}

// deploymentStatusUpdates counts kube-controller-manager's Deployment
// status updates received in [from, to): those that succeeded and those
// that lost a conflict.
func deploymentStatusUpdates(cp *controlplane.ControlPlane, from, to time.Time) (ok, conflicts int, err error) {
	evs, err := cp.ReadAudit("", from, to)
	if err != nil {
		return 0, 0, err
	}
	for _, e := range evs {
		if e.Verb != "update" || e.Resource() != "deployments/status" || !strings.Contains(e.UserAgent, "deployment-controller") {
			continue
		}
		if e.Code() == 409 {
			conflicts++
		} else {
			ok++
		}
	}
	return ok, conflicts, nil
}

func printWrites(title string, byClient map[string]int, n int) {
	keys := make([]string, 0, len(byClient))
	for k := range byClient {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return byClient[keys[i]] > byClient[keys[j]] })
	fmt.Printf("%s, by client:\n", title)
	for _, k := range keys {
		if byClient[k] < n/20 {
			break
		}
		fmt.Printf("  %-70s %6d  (%.2f per object)\n", k, byClient[k], float64(byClient[k])/float64(n))
	}
}

func printCounts(title string, evs []controlplane.AuditEvent, n int) {
	byVerb := map[string]int{}
	byVerbRes := map[string]int{}
	for _, e := range evs {
		byVerb[e.Verb]++
		byVerbRes[e.Verb+" "+e.Resource()]++
	}
	keys := make([]string, 0, len(byVerbRes))
	for k := range byVerbRes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Printf("%s: %d total\n", title, len(evs))
	for _, k := range keys {
		fmt.Printf("  %-40s %6d  (%.2f per CR)\n", k, byVerbRes[k], float64(byVerbRes[k])/float64(n))
	}
	writes := byVerb["create"] + byVerb["update"] + byVerb["patch"] + byVerb["delete"]
	reads := byVerb["get"] + byVerb["list"]
	fmt.Printf("  writes: %d, non-watch reads: %d, watches: %d\n", writes, reads, byVerb["watch"])
}

// bundleObjects are the Deployments, Services and PDBs that n
// TrellisServices become under the default runtime profile, without the
// owner references (nothing owns them).
func bundleObjects(n int, ns string) ([]client.Object, error) {
	var out []client.Object
	for i := range n {
		objs, err := trellisservice.Translate(gen.Service(fmt.Sprintf("svc-%04d", i), gen.WithNamespace(ns)), inject.DefaultProfile())
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			o.SetOwnerReferences(nil)
			out = append(out, o)
		}
	}
	return out, nil
}

// startProfiles starts the CPU profiles asked for, of the phase starting
// now, each to its file with suffix. The returned function waits for them:
// called before the phase's namespace is deleted, so that no profile of a
// phase runs into the deletion, or into the next phase's profile.
func startProfiles(ctx context.Context, cp *controlplane.ControlPlane, suffix string) (wait func()) {
	var wg sync.WaitGroup
	for _, p := range []struct {
		file string
		run  func(context.Context, string, time.Duration) error
	}{{profile, cp.APIServerProfile}, {kcmProfile, cp.ControllerManagerProfile}} {
		if p.file == "" {
			continue
		}
		wg.Go(func() {
			if err := p.run(ctx, p.file+suffix, profileFor); err != nil {
				fmt.Fprintf(os.Stderr, "bench: %v\n", err)
			}
		})
	}
	return wg.Wait
}

// podsExpected: kube-controller-manager makes pods unless the replicaset
// controller is turned off for diagnosis.
func podsExpected() bool {
	return !strings.Contains(kcmControllers, "-replicaset-controller")
}

func nativeDeployment(i int) *appsv1.Deployment {
	labels := map[string]string{"app": fmt.Sprintf("native-%04d", i)}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("native-%04d", i), Namespace: "native"},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{gen.Container("app")}},
			},
		},
	}
}

func createAll(ctx context.Context, n int, mk func(int) client.Object, c client.Client) error {
	return forAll(n, func(i int) error {
		o := mk(i)
		if err := c.Create(ctx, o); err != nil {
			return fmt.Errorf("create %T %s/%s: %w", o, o.GetNamespace(), o.GetName(), err)
		}
		return nil
	})
}

// watchCount counts objects in ns (that satisfy ok, if given) as the
// watcher's informer sees them appear.
// It returns a function that removes the counting handler.
func watchCount(ctx context.Context, w cache.Cache, obj client.Object, ns string, n *atomic.Int64, ok func(any) bool) (remove func(), err error) {
	inf, err := w.GetInformer(ctx, obj)
	if err != nil {
		return nil, fmt.Errorf("informer for %T: %w", obj, err)
	}
	var mu sync.Mutex
	seen := map[string]bool{}
	check := func(o any) {
		co, isObj := o.(client.Object)
		if !isObj || co.GetNamespace() != ns {
			return
		}
		if ok != nil && !ok(o) {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if !seen[co.GetName()] {
			seen[co.GetName()] = true
			n.Add(1)
		}
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    check,
		UpdateFunc: func(_, o any) { check(o) },
	})
	if err != nil {
		return nil, fmt.Errorf("count %T in %s: %w", obj, ns, err)
	}
	return func() { _ = inf.RemoveEventHandler(reg) }, nil
}

// deleteNamespace deletes ns and waits until the namespace controller and
// the garbage collector have removed it and everything in it.
func deleteNamespace(ctx context.Context, c client.Client, ns string) error {
	if err := c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return fmt.Errorf("delete namespace %s: %w", ns, err)
	}
	return waitFor(ctx, "namespace "+ns+" to go", func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}))
	})
}

// waitFor polls cond until it holds, for at most 15 minutes.
func waitFor(ctx context.Context, what string, cond func() bool) error {
	deadline := time.Now().Add(15 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after 15m waiting for %s", what)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}
