// Command fleet benchmarks the fleet against applying to one cluster
// directly: N TrellisServices applied at the Karmada apiserver (each
// divided over two members) against the same N applied straight to a
// standalone member, on loopback control planes with kwok nodes and the
// real trellis-controller. It prints apply -> Ready p50/p99, requests per
// workload to each apiserver, the fleet control plane's memory, and the
// failover time of a member whose apiserver is killed (production
// defaults: 30s failure threshold, 30s toleration). With -pin the fleet's
// control plane runs on CPUs of its own, as in production.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/fleet/karmada"
	"github.com/trellis-dev/trellis/fleet/localfleet"
)

type options struct {
	counts     []int
	nodes      int
	controller string
	failover   bool
	// evictionRate is karmada-controller-manager's --resource-eviction-rate.
	evictionRate float64
	// resourceModels is karmada.Options.ResourceModels.
	resourceModels bool
	// profiles, when set, is where each apiserver's CPU profile over the
	// first 20 s of each run goes.
	profiles string
	// gogc is karmada.Options.GOGC.
	gogc int
	// pin: the fleet's control plane on half the CPUs, the clusters on
	// the other half (bench.pin).
	pin bool
}

func main() {
	var o options
	var counts string
	flag.StringVar(&counts, "n", "100,1000", "comma-separated numbers of TrellisServices")
	flag.IntVar(&o.nodes, "nodes", 20, "kwok nodes per member (64 cores, 110 pods each); raised to what the runs' pods need")
	flag.StringVar(&o.controller, "controller", "bin/trellis-controller", "the trellis-controller binary")
	flag.BoolVar(&o.failover, "failover", true, "kill a member's apiserver after the first count and time the failover")
	flag.BoolVar(&o.resourceModels, "resource-models", false, "karmada-scheduler estimates free replicas from Karmada's resource models (its default) instead of the members' resource summaries")
	flag.Float64Var(&o.evictionRate, "eviction-rate", float64(karmada.DefaultEvictionRate), "karmada-controller-manager's --resource-eviction-rate (Karmada's own default: 0.5)")
	flag.IntVar(&o.gogc, "gogc", karmada.DefaultGOGC, "GOGC of the fleet's control plane's processes (Go's default: 100)")
	flag.BoolVar(&o.pin, "pin", false, "run the fleet's control plane on the first half of the CPUs and the clusters on the rest (production's topology: the fleet's control plane on machines of its own); the direct run then has the members' CPUs only")
	flag.StringVar(&o.profiles, "profiles", "", "a directory for the apiservers' CPU profiles over each run's first 20 s (go tool pprof)")
	flag.Parse()
	for _, c := range strings.Split(counts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "fleet: bad -n %q\n", counts)
			os.Exit(2)
		}
		o.counts = append(o.counts, n)
	}
	// east holds every run's services placed on it alone (2 pods each),
	// its half of the divided ones and one replica of those applied to
	// east and west directly: 4 pods a service, none deleted between
	// runs; 110 pods a node, one node spare.
	total := 0
	for _, n := range o.counts {
		total += n
	}
	o.nodes = max(o.nodes, (4*total+109)/110+1)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintf(os.Stderr, "fleet: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	var split cpuSplit
	if o.pin {
		var err error
		if split, err = planeCPUs(); err != nil {
			return err
		}
	}
	dir, err := os.MkdirTemp("", "trellis-bench-fleet-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	lo := localfleet.Options{
		Members: []*definition.ClusterDefinition{
			{Name: "east", Cloud: definition.CloudKind, Region: "us-east-1", Zones: []string{"us-east-1a"}},
			{Name: "west", Cloud: definition.CloudKind, Region: "us-west-2", Zones: []string{"us-west-2a"}},
		},
		Nodes: o.nodes, NodeCPU: "64", NodeMemory: "512Gi", ControllerBinary: o.controller, Log: log,
		// Production's cluster health periods (Karmada's defaults).
		Karmada: karmada.Options{Failover: true, EvictionRate: float32(o.evictionRate), ResourceModels: o.resourceModels, GOGC: o.gogc},
	}
	began := time.Now()
	f, err := localfleet.Up(ctx, filepath.Join(dir, "fleet"), lo)
	if err != nil {
		return err
	}
	defer f.Stop()
	direct, err := localfleet.StartMember(ctx, filepath.Join(dir, "direct"), &definition.ClusterDefinition{Name: "direct", Cloud: definition.CloudKind}, "10.140.0.0/16", lo)
	if err != nil {
		return err
	}
	defer direct.Stop()
	fmt.Printf("fleet of 2 members (%d kwok nodes each) and a standalone member up in %s\n", o.nodes, time.Since(began).Round(time.Second))

	b := &bench{f: f, direct: direct, profiles: o.profiles, cpus: split}
	if o.pin {
		fmt.Printf("pinned: the fleet's control plane on CPUs %v, the clusters on CPUs %v\n", split.fleet, split.members)
	}
	var rows []row
	for i, n := range o.counts {
		r, err := b.compare(ctx, n)
		if err != nil {
			return err
		}
		rows = append(rows, r...)
		printRows(rows)
		if i == 0 && o.failover {
			d, err := b.failover(ctx, fmt.Sprintf("fleet-%d", n), n)
			if err != nil {
				return err
			}
			fmt.Printf("\nfailover: east's apiserver SIGKILLed -> all %d services' replicas Ready in west in %s (failure threshold 30s + toleration 30s + eviction at %g bindings/s per worker + rescheduling)\n", n, d.Round(100*time.Millisecond), o.evictionRate)
			if err := b.restore(ctx); err != nil {
				return err
			}
		}
	}
	mem, err := b.memory()
	if err != nil {
		return err
	}
	fmt.Printf("\nfleet control plane memory (peak RSS): %s\n", mem)
	return nil
}
