// Command scale is the platform-size scale test (`make bench-scale`): the
// real control plane from `make tools` with the tuning clusters/prod-us-east-1
// renders, kwok simulating 2,500 nodes, 35,000 pods created through
// TrellisServices and TrellisJobSets by the real trellis-controller, and a
// sample of ZooKeeper registrars (one per sampled node) against a real
// ZooKeeper. It reports the time to 35,000 Running pods, the controller's
// reconcile throughput, apiserver QPS by client and verb and the p99 latency
// of mutating calls (from the audit log), each component's peak memory and
// etcd's database size, and writes a PNG plot of QPS and latency over the
// run. Then, on the full cluster, the same node-agent read load served by
// informer caches and by a naive lister, and a 3x pod surge into one
// namespace against its quota.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/addons"
	v1alpha1 "github.com/trellis-dev/trellis/api/v1alpha1"
	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/controller"
	"github.com/trellis-dev/trellis/daemons/zkregistrar"
	karmadaaddon "github.com/trellis-dev/trellis/fleet/karmada/addon"
	"github.com/trellis-dev/trellis/internal/controlplane"
	"github.com/trellis-dev/trellis/internal/procstat"
	"github.com/trellis-dev/trellis/internal/serverset"
	zktest "github.com/trellis-dev/trellis/internal/testutil/zookeeper"
	"github.com/trellis-dev/trellis/test/loadtest"
)

type options struct {
	nodes, services, replicas, jobsets, shards, registrars int
	kwok, controller, definition, out                      string
	timeout                                                time.Duration
	flowcontrol                                            bool
}

func main() {
	var o options
	flag.IntVar(&o.nodes, "nodes", 2500, "kwok nodes")
	flag.IntVar(&o.services, "services", 475, "TrellisServices")
	flag.IntVar(&o.replicas, "replicas", 70, "replicas per TrellisService")
	flag.IntVar(&o.jobsets, "jobsets", 25, "TrellisJobSets")
	flag.IntVar(&o.shards, "shards", 70, "shards (pods) per TrellisJobSet")
	flag.IntVar(&o.registrars, "registrars", 25, "ZooKeeper registrars, one per sampled node")
	flag.StringVar(&o.kwok, "kwok", "", "directory with kwok and its stages.yaml (hack/build-kwok.sh prints it)")
	flag.StringVar(&o.controller, "controller", "bin/trellis-controller", "trellis-controller binary")
	flag.StringVar(&o.definition, "definition", "clusters/prod-us-east-1.yaml", "the cluster definition whose control-plane tuning the apiserver runs with")
	flag.StringVar(&o.out, "out", "_output/bench-scale", "where the plot and the report go")
	flag.DurationVar(&o.timeout, "timeout", 60*time.Minute, "give up waiting for Running pods after this long")
	flag.BoolVar(&o.flowcontrol, "flowcontrol", true, "apply the trellis-flowcontrol addon (false: Kubernetes' default APF configuration, for comparison)")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "scale: %v\n", err)
		os.Exit(1)
	}
}

const (
	observerUA = "bench-observer"
	loaderUA   = "bench-loader"
	fakeNode   = "kwok.x-k8s.io/node"
)

func run(o options) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	def, err := definition.Load(o.definition)
	if err != nil {
		return err
	}
	cpt := def.ControlPlane
	apiFlags := []string{
		fmt.Sprintf("--max-requests-inflight=%d", cpt.APIServer.MaxRequestsInflight),
		fmt.Sprintf("--max-mutating-requests-inflight=%d", cpt.APIServer.MaxMutatingRequestsInflight),
	}
	if len(cpt.APIServer.WatchCacheSizes) > 0 {
		apiFlags = append(apiFlags, "--watch-cache-sizes="+strings.Join(cpt.APIServer.WatchCacheSizes, ","))
	}
	dir, err := os.MkdirTemp("", "trellis-scale-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cp, err := controlplane.Start(dir, controlplane.Options{
		ControllerManager: true, Scheduler: true, AuditLog: true, APIServerFlags: apiFlags,
		ControllerManagerFlags: []string{fmt.Sprintf("--kube-api-qps=%d", cpt.ControllerManager.QPS), fmt.Sprintf("--kube-api-burst=%d", cpt.ControllerManager.Burst)},
		SchedulerFlags:         []string{fmt.Sprintf("--kube-api-qps=%d", cpt.Scheduler.QPS), fmt.Sprintf("--kube-api-burst=%d", cpt.Scheduler.Burst)},
	})
	if err != nil {
		return err
	}
	defer cp.Stop()
	fmt.Printf("control plane %s with %s's tuning: %s; controller-manager and scheduler QPS %d/%d\n",
		controlplane.KubernetesVersion, def.Name, strings.Join(apiFlags, " "), cpt.ControllerManager.QPS, cpt.Scheduler.QPS)
	pids := cp.PIDs()
	if out, err := cp.Kubectl(ctx, "apply", "--server-side", "-f", "config/crd/"); err != nil {
		return fmt.Errorf("install CRDs: %v: %s", err, out)
	}
	if out, err := cp.Kubectl(ctx, "wait", "--for=condition=Established", "--timeout=60s", "crd", "--all"); err != nil {
		return fmt.Errorf("CRDs: %v: %s", err, out)
	}
	// The cluster's API Priority and Fairness configuration, as the addon
	// bundle applies it.
	if o.flowcontrol {
		if err := applyAddon(ctx, cp, def, "trellis-flowcontrol"); err != nil {
			return err
		}
	} else {
		fmt.Println("addon trellis-flowcontrol not applied: Kubernetes' default API Priority and Fairness configuration")
	}

	// kwok: the simulated kubelets. Its default of 4 pod status updates
	// in flight (each waiting on a loaded apiserver) would make kwok, not
	// the control plane, the bottleneck. Node leases are renewed every 10s,
	// as kubelets do: 250 updates/s for 2,500 nodes, which needs many in
	// flight. Without leases (a config file that does not set their
	// duration turns them off), the lease-based heartbeat stage leaves
	// nodes to go NotReady and back, and the node controller's churn of
	// pod, endpoint and workload status was most of the steady-state load.
	kwokCfg := filepath.Join(o.out, "kwok-config.yaml")
	if err := os.WriteFile(kwokCfg, []byte(kwokConfiguration), 0o644); err != nil {
		return err
	}
	kwok := exec.CommandContext(ctx, filepath.Join(o.kwok, "kwok"), "--config="+filepath.Join(o.kwok, "stages.yaml"), "--config="+kwokCfg, "--kubeconfig="+cp.Kubeconfig, "--manage-nodes-with-annotation-selector="+fakeNode+"=fake",
		"--cidr=10.128.0.0/10", "--node-ip=10.255.255.1", "--server-address=127.0.0.1:0", "--v=WARN")
	kwokLog, err := os.Create(filepath.Join(o.out, "kwok.log"))
	if err != nil {
		return err
	}
	defer kwokLog.Close()
	kwok.Stdout, kwok.Stderr = kwokLog, kwokLog
	kwok.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := kwok.Start(); err != nil {
		return fmt.Errorf("start kwok: %w", err)
	}
	pids["kwok"] = kwok.Process.Pid

	loader := clientset(cp.Config, loaderUA, 500)
	start := time.Now()
	if err := createNodes(ctx, loader, o.nodes); err != nil {
		return err
	}
	if err := waitFor(ctx, 10*time.Minute, func() (bool, error) {
		n, err := readyNodes(ctx, loader)
		return n >= o.nodes, err
	}); err != nil {
		return fmt.Errorf("kwok nodes Ready: %w", err)
	}
	fmt.Printf("%d kwok nodes Ready in %s\n", o.nodes, time.Since(start).Round(time.Second))

	// The controller, as its own process (its memory is its own).
	metricsPort := freePort()
	ctrl := exec.CommandContext(ctx, o.controller, "--kubeconfig="+cp.Kubeconfig, "--leader-elect=false", "--webhook-port=0",
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metricsPort), "--health-probe-bind-address=0",
		"--kube-api-qps=100", "--kube-api-burst=200", "--workers=8")
	ctrlLog, err := os.Create(filepath.Join(o.out, "trellis-controller.log"))
	if err != nil {
		return err
	}
	defer ctrlLog.Close()
	ctrl.Stdout, ctrl.Stderr = ctrlLog, ctrlLog
	ctrl.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := ctrl.Start(); err != nil {
		return fmt.Errorf("start trellis-controller: %w", err)
	}
	pids["trellis-controller"] = ctrl.Process.Pid

	// A sample of registrars, one per sampled node, against a real ZooKeeper.
	zh := &zktest.Standalone{}
	defer zh.Close()
	zks := zktest.Start(zh, 1)
	regWrites := startRegistrars(ctx, cp.Config, zks.Addrs(), o)

	// The observer: one pod informer (a watch) counting Running pods.
	obs := clientset(cp.Config, observerUA, 50)
	var running, succeeded atomic.Int64
	factory := informers.NewSharedInformerFactory(obs, 0)
	pinf := factory.Core().V1().Pods().Informer()
	count := func(p *corev1.Pod, delta int64) {
		switch p.Status.Phase {
		case corev1.PodRunning:
			running.Add(delta)
		case corev1.PodSucceeded:
			succeeded.Add(delta)
		}
	}
	_, _ = pinf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) { count(o.(*corev1.Pod), 1) },
		UpdateFunc: func(old, o any) {
			count(old.(*corev1.Pod), -1)
			count(o.(*corev1.Pod), 1)
		},
		DeleteFunc: func(o any) {
			if p, ok := o.(*corev1.Pod); ok {
				count(p, -1)
			}
		},
	})
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	// The workloads.
	total := o.services*o.replicas + o.jobsets*o.shards
	c, err := client.New(rest.CopyConfig(withUA(cp.Config, loaderUA, 50)), client.Options{Scheme: controller.Scheme()})
	if err != nil {
		return err
	}
	fmt.Printf("creating %d TrellisServices x %d replicas and %d TrellisJobSets x %d shards: %d pods\n", o.services, o.replicas, o.jobsets, o.shards, total)
	sliStart, err := loadtest.ScrapeSLI(ctx, cp.Config)
	if err != nil {
		return err
	}
	runStart := time.Now()
	var series []sample
	stopSampling := make(chan struct{})
	samplingDone := make(chan struct{})
	go func() {
		defer close(samplingDone)
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-t.C:
				series = append(series, sample{t: time.Since(runStart), running: running.Load() + succeeded.Load()})
			}
		}
	}()
	if err := createWorkloads(ctx, c, o); err != nil {
		return err
	}
	created := time.Since(runStart)
	fmt.Printf("workloads created in %s\n", created.Round(time.Second))
	last := time.Now()
	lastN := int64(0)
	if err := waitFor(ctx, o.timeout, func() (bool, error) {
		n := running.Load() + succeeded.Load()
		if time.Since(last) > time.Minute {
			fmt.Printf("  %s: %d of %d pods Running (%.0f/s)\n", time.Since(runStart).Round(time.Second), n, total, float64(n-lastN)/time.Since(last).Seconds())
			last, lastN = time.Now(), n
		}
		return n >= int64(total), nil
	}); err != nil {
		return fmt.Errorf("%d of %d pods Running: %w", running.Load()+succeeded.Load(), total, err)
	}
	toRunning := time.Since(runStart)
	runEnd := time.Now()
	sliEnd, err := loadtest.ScrapeSLI(ctx, cp.Config)
	if err != nil {
		return err
	}
	close(stopSampling)
	<-samplingDone
	fmt.Printf("\n%d pods Running (or, for shards, done) %s after the first create (%.0f pods/s)\n", total, toRunning.Round(time.Second), float64(total)/toRunning.Seconds())

	rep := &report{}
	if err := rep.fromAudit(cp, runStart, runEnd); err != nil {
		return err
	}
	rep.print(os.Stdout, toRunning)
	sli := loadtest.Window(sliStart, sliEnd)
	fmt.Printf("the SLO over the run (p99 <= 1s per verb and resource, apiserver_request_sli_duration_seconds, >= 100 calls): met: %v; worst:\n", sli.Met(100))
	sli.Print(os.Stdout, 8, 100)
	reconciles, err := reconcileTotals(metricsPort)
	if err != nil {
		return err
	}
	var recTotal float64
	for k, v := range reconciles {
		fmt.Printf("controller reconciles %-22s %8.0f (%.1f/s)\n", k, v, v/toRunning.Seconds())
		recTotal += v
	}
	fmt.Printf("controller reconciles total           %8.0f (%.1f/s)\n", recTotal, recTotal/toRunning.Seconds())
	fmt.Printf("ZooKeeper registrars (%d sampled nodes): %d znode writes\n", o.registrars, regWrites.Load())
	printMemory(pids)
	if size, err := etcdDBSize(cp.EtcdURL); err == nil {
		fmt.Printf("etcd database size: %.1f MiB\n", float64(size)/(1<<20))
	} else {
		fmt.Printf("etcd database size: %v\n", err)
	}
	plotPath := filepath.Join(o.out, "scale.png")
	if err := plotRun(plotPath, rep, series, total); err != nil {
		return err
	}
	fmt.Printf("plot: %s\n", plotPath)

	// On the full cluster: the same reads two ways, then a surge.
	if err := readsAtScale(ctx, cp, o); err != nil {
		return err
	}
	if err := surgeAtScale(ctx, cp, o.flowcontrol); err != nil {
		return err
	}
	printMemory(pids)
	return nil
}

const kwokConfiguration = `apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  podPlayStageParallelism: 32
  nodePlayStageParallelism: 8
  nodeLeaseDurationSeconds: 40
  nodeLeaseParallelism: 256
`

type sample struct {
	t       time.Duration
	running int64
}

func withUA(cfg *rest.Config, ua string, qps float32) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.UserAgent, c.QPS, c.Burst = ua, qps, int(2*qps)
	return c
}

func clientset(cfg *rest.Config, ua string, qps float32) kubernetes.Interface {
	return loadtest.Client(cfg, ua, qps)
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// waitFor polls f every second until it is true, fails or times out.
func waitFor(ctx context.Context, timeout time.Duration, f func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := f()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// createNodes creates kwok's nodes: each looks like an m6i.8xlarge node.
func createNodes(ctx context.Context, c kubernetes.Interface, n int) error {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("128Gi"), corev1.ResourcePods: resource.MustParse("110"),
	}
	return parallel(ctx, n, 32, func(i int) error {
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        fmt.Sprintf("kwok-node-%04d", i),
				Annotations: map[string]string{fakeNode: "fake", "node.alpha.kubernetes.io/ttl": "0"},
				Labels:      map[string]string{"type": "kwok", "kubernetes.io/hostname": fmt.Sprintf("kwok-node-%04d", i), "kops.k8s.io/instancegroup": fmt.Sprintf("nodes-%d", i%4)},
			},
			Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
		}
		_, err := c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		return err
	})
}

func readyNodes(ctx context.Context, c kubernetes.Interface) (int, error) {
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "type=kwok", ResourceVersion: "0"})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, nd := range nodes.Items {
		for _, cond := range nd.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				n++
			}
		}
	}
	return n, nil
}

// parallel runs f(0..n-1) on workers goroutines; the first error wins.
func parallel(ctx context.Context, n, workers int, f func(int) error) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := f(i); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

var teams = 25

func container() corev1.Container {
	return corev1.Container{Name: "app", Image: "registry.example/app:1", Args: []string{"--port=8080"},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		}}
}

func createWorkloads(ctx context.Context, c client.Client, o options) error {
	for t := range teams {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("team-%02d", t)}}
		if err := c.Create(ctx, ns); err != nil {
			return err
		}
	}
	err := parallel(ctx, o.services, 8, func(i int) error {
		ts := &v1alpha1.TrellisService{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("svc-%03d", i), Namespace: fmt.Sprintf("team-%02d", i%teams)},
			Spec: v1alpha1.TrellisServiceSpec{
				Replicas: new(int32(o.replicas)),
				Ports:    []v1alpha1.Port{{Name: "http", Port: 8080}},
				Template: v1alpha1.PodTemplate{Containers: []corev1.Container{container()}},
			},
		}
		return c.Create(ctx, ts)
	})
	if err != nil {
		return fmt.Errorf("create TrellisServices: %w", err)
	}
	return parallel(ctx, o.jobsets, 4, func(i int) error {
		js := &v1alpha1.TrellisJobSet{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("batch-%03d", i), Namespace: fmt.Sprintf("team-%02d", i%teams)},
			Spec: v1alpha1.TrellisJobSetSpec{
				Shards:   int32(o.shards),
				Template: v1alpha1.PodTemplate{Containers: []corev1.Container{container()}},
			},
		}
		return c.Create(ctx, js)
	})
}

// startRegistrars runs zkregistrar daemons for a sample of nodes: each
// watches its node's pods (a field-selected informer) and registers the
// Ready ones in ZooKeeper, as the DaemonSet does on every node.
func startRegistrars(ctx context.Context, cfg *rest.Config, servers []string, o options) *atomic.Int64 {
	var writes atomic.Int64
	step := max(1, o.nodes/o.registrars)
	var regs []*serverset.Registrar
	for i := 0; i < o.registrars; i++ {
		node := fmt.Sprintf("kwok-node-%04d", i*step)
		reg := serverset.New(serverset.Config{Servers: servers, SessionTimeout: 30 * time.Second, BufferSize: 256 << 10})
		regs = append(regs, reg)
		go func() {
			if err := reg.Run(ctx); err != nil && ctx.Err() == nil {
				fmt.Fprintf(os.Stderr, "registrar of %s: %v\n", node, err)
			}
		}()
		d, err := zkregistrar.New(zkregistrar.Config{NodeName: node, Client: clientset(cfg, "trellis-zk-registrar", 5), Registrar: reg})
		if err != nil {
			panic(err)
		}
		go func() {
			if err := d.Run(ctx); err != nil && ctx.Err() == nil {
				fmt.Fprintf(os.Stderr, "zk-registrar of %s: %v\n", node, err)
			}
		}()
	}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			var w int64
			for _, r := range regs {
				w += r.Writes()
			}
			writes.Store(w)
		}
	}()
	return &writes
}

// reconcileTotals reads controller_runtime_reconcile_total by controller.
func reconcileTotals(port int) (map[string]float64, error) {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err != nil {
		return nil, fmt.Errorf("controller metrics: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, "controller_runtime_reconcile_total{") {
			continue
		}
		name := between(line, `controller="`, `"`)
		f := strings.Fields(line)
		v, _ := strconv.ParseFloat(f[len(f)-1], 64)
		out[name] += v
	}
	return out, nil
}

func between(s, a, b string) string {
	i := strings.Index(s, a)
	if i < 0 {
		return ""
	}
	s = s[i+len(a):]
	if j := strings.Index(s, b); j >= 0 {
		return s[:j]
	}
	return s
}

// printMemory prints each process's peak resident memory (VmHWM).
func printMemory(pids map[string]int) {
	names := make([]string, 0, len(pids))
	for n := range pids {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Println("peak memory (VmHWM):")
	for _, n := range names {
		fmt.Printf("  %-24s %s\n", n, hwm(pids[n]))
	}
	fmt.Printf("  %-24s %s (registrar sample, observer, loaders)\n", "bench process", hwm(os.Getpid()))
}

func hwm(pid int) string {
	kib, err := procstat.PeakRSS(pid)
	if err != nil {
		return "exited"
	}
	return fmt.Sprintf("%.0f MiB", float64(kib)/1024)
}

func etcdDBSize(etcdURL string) (int64, error) {
	resp, err := http.Get(etcdURL + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "etcd_mvcc_db_total_size_in_bytes ") {
			v, err := strconv.ParseFloat(strings.Fields(line)[1], 64)
			return int64(v), err
		}
	}
	return 0, fmt.Errorf("no etcd_mvcc_db_total_size_in_bytes in etcd's metrics")
}

// applyAddon applies one addon of the definition's bundle with the bundle's
// own applier.
func applyAddon(ctx context.Context, cp *controlplane.ControlPlane, def *definition.Loaded, name string) error {
	lifecycles := []addons.Lifecycle{karmadaaddon.Lifecycle{}}
	rendered, err := addons.Render(def.ClusterDefinition, lifecycles...)
	if err != nil {
		return err
	}
	for _, r := range rendered {
		if r.Addon.Name != name {
			continue
		}
		a, err := addons.NewApplier(cp.Config, os.Stdout)
		if err != nil {
			return err
		}
		a.Lifecycles = lifecycles
		_, err = a.Apply(ctx, []addons.Rendered{r})
		return err
	}
	return fmt.Errorf("addon %s is not in %s's bundle", name, def.Name)
}
