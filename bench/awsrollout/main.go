// Command awsrollout rolls the same instance group on the AWS API emulator
// (moto, through the real AWS SDK) with the Trellis rollout engine and with
// kops's own instancegroups.RollingUpdateCluster, one after the other, and
// prints for each tool and setting the wall time and the AWS API calls per
// replaced node, counted by action at the emulator's proxy. Both roll
// cloud-only (kops's --cloudonly): the emulator's instances are not nodes
// here, so this measures the cloud side of a rollout; the node-backed run
// is `make e2e-aws`.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"k8s.io/kops/pkg/apis/kops"
	"k8s.io/kops/upup/pkg/fi/cloudup/awsup"

	"github.com/trellis-dev/trellis/bench/internal/rollbench"
	"github.com/trellis-dev/trellis/bootstrap"
	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/bootstrap/render"
	"github.com/trellis-dev/trellis/bootstrap/rollout"
	"github.com/trellis-dev/trellis/internal/awsemu"
	"github.com/trellis-dev/trellis/internal/logs"
)

const (
	bucket = "trellis-bench"
	store  = "s3://" + bucket + "/clusters"
	group  = "general"
)

func main() {
	file := flag.String("f", "clusters/local-aws.yaml", "cluster definition (its images must be ssm: parameters)")
	nodes := flag.Int("nodes", 6, "instances in the rolled group")
	defaults := flag.Bool("defaults", true, "also roll at each tool's defaults (kops sleeps --node-interval 15s after each instance)")
	flag.Parse()
	if err := run(context.Background(), *file, *nodes, *defaults); err != nil {
		fmt.Fprintf(os.Stderr, "awsrollout: %v\n", err)
		os.Exit(1)
	}
}

// setting is one comparison: the same surge settings for both tools.
type setting struct {
	name     string
	trellis  rollout.Strategy
	kops     *kops.RollingUpdate // nil: kops's defaults
	interval time.Duration       // kops's --node-interval
}

func run(ctx context.Context, file string, nodes int, defaults bool) error {
	_ = logs.Setup(0, io.Discard)
	l, err := definition.Load(file)
	if err != nil {
		return err
	}
	def := l.ClusterDefinition
	for i := range def.InstanceGroups {
		if def.InstanceGroups[i].Name == group {
			def.InstanceGroups[i].MinSize, def.InstanceGroups[i].MaxSize = new(int32(nodes)), new(int32(2*nodes))
		}
	}
	emu, err := awsemu.Start(ctx, awsemu.Options{Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer emu.Stop()
	proxy, err := awsemu.NewFaultProxy(emu.URL)
	if err != nil {
		return err
	}
	defer proxy.Close()
	if err := (bootstrap.Env{Emulator: proxy.URL, Region: def.Region}).Setup(); err != nil {
		return err
	}
	c := awsemu.NewClients(emu.URL, def.Region)
	if err := c.Bucket(ctx, bucket); err != nil {
		return err
	}
	ami, err := c.Image(ctx, "bench-node-0", "x86_64")
	if err != nil {
		return err
	}
	if err := c.Parameter(ctx, strings.TrimPrefix(def.InstanceGroups[0].Image, "ssm:"), ami); err != nil {
		return err
	}
	if err := c.Parameter(ctx, strings.TrimPrefix(def.ControlPlane.Image, "ssm:"), ami); err != nil {
		return err
	}
	start := time.Now()
	if _, err := bootstrap.Create(ctx, def, bootstrap.ApplyOptions{StateStore: store, Yes: true, Out: io.Discard}); err != nil {
		return err
	}
	name := render.ClusterName(def)
	fmt.Printf("emulator: moto at %s; %s created in %s; group %s: %d instances; both tools cloud-only\n", emu.URL, name, time.Since(start).Round(time.Millisecond), group, nodes)
	fmt.Println("kops --cloudonly neither surges nor waits for replacements (it terminates, then sleeps --node-interval); Trellis waits for each new instance in service and persists every step in the state store (S3), which is what makes it resumable.")
	b, err := newBench(ctx, c, name, def.Region)
	if err != nil {
		return err
	}
	settings := []setting{
		{name: "surge 1", trellis: rollout.Strategy{MaxSurge: 1}, kops: &kops.RollingUpdate{MaxSurge: rollbench.IntOrStr(1), MaxUnavailable: rollbench.IntOrStr(0)}},
		{name: "in place, 1 unavailable", trellis: rollout.Strategy{MaxUnavailable: 1}, kops: &kops.RollingUpdate{MaxSurge: rollbench.IntOrStr(0), MaxUnavailable: rollbench.IntOrStr(1)}},
	}
	if defaults {
		s, err := bootstrap.Strategies(def, bootstrap.StrategyOverrides{Groups: []string{group}, MaxSurge: -1, MaxUnavailable: -1, Canary: true})
		if err != nil {
			return err
		}
		settings = append(settings, setting{name: "each tool's defaults", trellis: s[group], interval: 15 * time.Second})
	}
	fmt.Printf("%-24s %-8s %9s %6s %14s %14s  %s\n", "SETTING", "TOOL", "WALL", "NODES", "EC2+ASG/NODE", "S3 STATE/NODE", "CALLS BY ACTION")
	for _, s := range settings {
		for _, tool := range []string{"trellis", "kops"} {
			res, err := b.roll(ctx, proxy, tool, s)
			if err != nil {
				return fmt.Errorf("%s, %s: %w", s.name, tool, err)
			}
			per := func(n int) float64 { return float64(n) / float64(max(res.replaced, 1)) }
			fmt.Printf("%-24s %-8s %9s %6d %14.1f %14.1f  %s\n", s.name, tool, res.wall.Round(time.Millisecond), res.replaced, per(res.cloud), per(res.store), res.byAction)
		}
	}
	return nil
}

// bench holds the cluster both tools roll.
type bench struct {
	c     *awsemu.Clients
	name  string
	aws   awsup.AWSCloud
	cloud *rollout.AWSCloud
	n     int // images registered so far
}

func newBench(ctx context.Context, c *awsemu.Clients, name, region string) (*bench, error) {
	aws, cloud, err := rollbench.Clouds(ctx, store, region, name)
	if err != nil {
		return nil, err
	}
	return &bench{c: c, name: name, aws: aws, cloud: cloud}, nil
}

type result struct {
	wall         time.Duration
	replaced     int
	cloud, store int // EC2/Auto Scaling calls; S3 (state store) calls
	byAction     string
}

// roll registers a new image and rolls the group onto it with one tool,
// counting the calls from the launch-template version on (kops: the
// version is made first, as `kops update cluster` would, and not counted).
func (b *bench) roll(ctx context.Context, proxy *awsemu.FaultProxy, tool string, s setting) (result, error) {
	b.n++
	ami, err := b.c.Image(ctx, fmt.Sprintf("bench-node-%d", b.n), "x86_64")
	if err != nil {
		return result{}, err
	}
	before, _, err := b.cloud.Instances(ctx, group)
	if err != nil {
		return result{}, err
	}
	var res result
	switch tool {
	case "trellis":
		st, err := rollout.NewVFSStore(store, b.name)
		if err != nil {
			return result{}, err
		}
		strategy := s.trellis
		strategy.CloudOnly = true
		proxy.ResetCalls()
		start := time.Now()
		final, err := rollout.New(b.cloud, nil, st, rollout.Options{Image: ami, Groups: map[string]rollout.Strategy{group: strategy}, Owner: "bench", Poll: 500 * time.Millisecond}, nil).Start(ctx, b.name)
		res.wall = time.Since(start)
		if err != nil {
			return result{}, err
		}
		res.replaced = len(final.Groups[group].Replaced)
	case "kops":
		if _, err := b.cloud.SetImage(ctx, group, ami); err != nil {
			return result{}, err
		}
		proxy.ResetCalls()
		start := time.Now()
		n, err := rollbench.KopsRoll{Store: store, Name: b.name, Group: group, Cloud: b.aws, Settings: s.kops, Interval: s.interval}.Run(ctx)
		res.wall = time.Since(start)
		if err != nil {
			return result{}, err
		}
		res.replaced = n
	}
	res.cloud, res.store, res.byAction = rollbench.ByAction(proxy.Calls())
	return res, rollbench.CheckReplaced(ctx, b.c, group+"."+b.name, before, ami)
}
