package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/kops/pkg/apis/kops"
	"k8s.io/kops/upup/pkg/fi/cloudup/awsup"

	"github.com/trellis-dev/trellis/bench/internal/rollbench"
	"github.com/trellis-dev/trellis/bootstrap"
	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/bootstrap/render"
	"github.com/trellis-dev/trellis/bootstrap/rollout"
	"github.com/trellis-dev/trellis/internal/awsemu"
)

// store is `trellis local aws`'s state store (its --state default).
const store = "s3://trellis-state/clusters"

type options struct {
	file, group, trellis, kubeconfig, tools string
	defaults                                bool
}

// setting is one comparison: the same surge for both tools, or each
// tool's defaults.
type setting struct {
	name    string
	trellis rollout.Strategy
	poll    time.Duration       // the engine's gate and drain poll (0: its default, 2 s)
	kops    *kops.RollingUpdate // nil: kops's defaults
	// kops's waits: --node-interval, --post-drain-delay, the validation
	// tick and the pause between two successful validations, and how many.
	interval, postDrain, tick, success time.Duration
	validations                        int
}

func run(ctx context.Context, o options) error {
	l, err := definition.Load(o.file)
	if err != nil {
		return err
	}
	def := l.ClusterDefinition
	name := render.ClusterName(def)
	total, size := 0, 0
	for _, g := range def.InstanceGroups {
		if g.MinSize != nil {
			total += int(*g.MinSize)
			if g.Name == o.group {
				size = int(*g.MinSize)
			}
		}
	}
	if size == 0 {
		return fmt.Errorf("%s: no instance group %q with a minSize", o.file, o.group)
	}
	dir, err := os.MkdirTemp("", "trellis-bench-awsnodes-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w (run `make local` first)", o.kubeconfig, err)
	}
	watch, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	la, err := startLocalAWS(o, dir)
	if err != nil {
		return err
	}
	defer la.stop()
	if err := la.awaitEmulator(ctx); err != nil {
		return err
	}
	start := time.Now()
	if err := awaitNodes(ctx, watch, total, la.log); err != nil {
		return err
	}
	fmt.Printf("local AWS loop: emulator %s, %s, %d instance nodes Ready with the runtime after %s; rolling group %s (%d nodes)\n",
		la.url, name, total, time.Since(start).Round(time.Second), o.group, size)
	replicas := int32(2 * size)
	remove, err := startWorkload(ctx, watch, o.group, replicas)
	if remove != nil {
		defer remove()
	}
	if err != nil {
		return err
	}
	fmt.Printf("workload: %d hello pods on the group's nodes, a PDB allowing 1 unavailable\n", replicas)

	// Both tools reach AWS through a proxy that counts calls by action,
	// and Kubernetes through a client that counts requests.
	proxy, err := awsemu.NewFaultProxy(la.url)
	if err != nil {
		return err
	}
	defer proxy.Close()
	if err := (bootstrap.Env{Emulator: proxy.URL, Region: def.Region}).Setup(); err != nil {
		return err
	}
	b, err := newBench(ctx, o, def.Region, name, la.url, cfg, watch, proxy)
	if err != nil {
		return err
	}
	b.total, b.replicas = total, replicas
	settings := []setting{{
		name: "surge 1", trellis: rollout.Strategy{MaxSurge: 1},
		kops: &kops.RollingUpdate{MaxSurge: rollbench.IntOrStr(1), MaxUnavailable: rollbench.IntOrStr(0)}, tick: 2 * time.Second, validations: 1,
	}}
	if o.defaults {
		s, err := bootstrap.Strategies(def, bootstrap.StrategyOverrides{Groups: []string{o.group}, MaxSurge: -1, MaxUnavailable: -1, Canary: true})
		if err != nil {
			return err
		}
		settings = append(settings, setting{name: "each tool's defaults", trellis: s[o.group],
			interval: 15 * time.Second, postDrain: 5 * time.Second, tick: 30 * time.Second, success: 10 * time.Second, validations: 2})
	}
	fmt.Println("Both tools drain real kubelets (PDBs honoured) and wait for each new node: Trellis until its runtime daemons are Ready, kops until `kops validate cluster` passes for the node groups (the local loop's control-plane instances are not nodes).")
	fmt.Printf("%-22s %-8s %9s %5s %9s %9s %11s %17s  %s\n", "SETTING", "TOOL", "WALL", "NODES", "AWS/NODE", "S3/NODE", "KUBE R+W/NODE", "CORDON→GONE", "AWS CALLS BY ACTION")
	for _, s := range settings {
		for _, tool := range strings.Split(o.tools, ",") {
			res, err := b.roll(ctx, tool, s)
			if err != nil {
				return fmt.Errorf("%s, %s: %w", s.name, tool, err)
			}
			per := func(n int) float64 { return float64(n) / float64(max(res.replaced, 1)) }
			fmt.Printf("%-22s %-8s %9s %5d %9.1f %9.1f %6.1f+%-6.1f %17s  %s\n", s.name, tool, res.wall.Round(time.Second), res.replaced,
				per(res.cloud), per(res.store), per(res.reads), per(res.writes), res.spans, res.byAction)
		}
	}
	return nil
}

// bench holds the cluster both tools roll and the counters.
type bench struct {
	o        options
	name     string
	images   *awsemu.Clients // the emulator itself: registering images is not counted
	aws      awsup.AWSCloud
	cloud    *rollout.AWSCloud
	cfg      *rest.Config // counted
	kc       kubernetes.Interface
	counter  *counting
	watch    kubernetes.Interface
	nodes    *nodeTimes
	proxy    *awsemu.FaultProxy
	total, n int
	replicas int32
}

func newBench(ctx context.Context, o options, region, name, emulator string, cfg *rest.Config, watch kubernetes.Interface, proxy *awsemu.FaultProxy) (*bench, error) {
	aws, cloud, err := rollbench.Clouds(ctx, store, region, name)
	if err != nil {
		return nil, err
	}
	counter := &counting{}
	counted := rest.CopyConfig(cfg)
	counted.Wrap(func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter })
	kc, err := kubernetes.NewForConfig(counted)
	if err != nil {
		return nil, err
	}
	nodes, err := watchNodes(ctx, watch)
	if err != nil {
		return nil, err
	}
	return &bench{o: o, name: name, images: awsemu.NewClients(emulator, region), aws: aws, cloud: cloud,
		cfg: counted, kc: kc, counter: counter, watch: watch, nodes: nodes, proxy: proxy}, nil
}

type result struct {
	wall                        time.Duration
	replaced                    int
	cloud, store, reads, writes int
	spans, byAction             string
}
