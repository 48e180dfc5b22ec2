package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/trellis-dev/trellis/awsloop/nodeprovider"
	"github.com/trellis-dev/trellis/bench/internal/rollbench"
	"github.com/trellis-dev/trellis/bootstrap/rollout"
)

// kindCluster is the local kind cluster whose node image the instance
// node images are built from.
const kindCluster = "trellis-local"

// roll registers a new node image and rolls the group onto it with one
// tool, counting calls from the start of the roll (kops: the launch
// template's new version is made first, as `kops update cluster` would,
// and not counted), then waits until every instance node is Ready with
// the runtime again, so that the next roll starts from the same place.
func (b *bench) roll(ctx context.Context, tool string, s setting) (result, error) {
	b.n++
	base, err := nodeprovider.KindNodeImage(ctx, kindCluster)
	if err != nil {
		return result{}, err
	}
	ami, _, err := nodeprovider.RegisterNodeImage(ctx, b.images.EC2, base, fmt.Sprintf("bench-%d-%d", time.Now().Unix(), b.n))
	if err != nil {
		return result{}, err
	}
	before, _, err := b.cloud.Instances(ctx, b.o.group)
	if err != nil {
		return result{}, err
	}
	var res result
	switch tool {
	default:
		return result{}, fmt.Errorf("unknown tool %q: trellis or kops", tool)
	case "trellis":
		st, err := rollout.NewVFSStore(store, b.name)
		if err != nil {
			return result{}, err
		}
		kctx, cancel := context.WithCancel(ctx)
		defer cancel()
		kube, err := rollout.NewKubeCluster(kctx, b.kc)
		if err != nil {
			return result{}, err
		}
		b.proxy.ResetCalls()
		b.counter.reset()
		start := time.Now()
		final, err := rollout.New(b.cloud, kube, st, rollout.Options{Image: ami, Groups: map[string]rollout.Strategy{b.o.group: s.trellis},
			GateTimeout: 15 * time.Minute, Drain: rollout.DrainOptions{Timeout: 15 * time.Minute}, Owner: "bench", Poll: s.poll}, nil).Start(ctx, b.name)
		res.wall = time.Since(start)
		if err != nil {
			return result{}, err
		}
		res.replaced = len(final.Groups[b.o.group].Replaced)
	case "kops":
		if _, err := b.cloud.SetImage(ctx, b.o.group, ami); err != nil {
			return result{}, err
		}
		b.proxy.ResetCalls()
		b.counter.reset()
		start := time.Now()
		n, err := rollbench.KopsRoll{Store: store, Name: b.name, Group: b.o.group, Cloud: b.aws, Settings: s.kops, Kube: b.kc, Config: b.cfg,
			Interval: s.interval, PostDrain: s.postDrain, Tick: s.tick, Success: s.success, Validations: s.validations}.Run(ctx)
		res.wall = time.Since(start)
		if err != nil {
			return result{}, err
		}
		res.replaced = n
	}
	res.reads, res.writes = b.counter.reset()
	res.cloud, res.store, res.byAction = rollbench.ByAction(b.proxy.Calls())
	spans, err := b.spans(ctx, before)
	if err != nil {
		return result{}, err
	}
	res.spans = spans
	if err := rollbench.CheckReplaced(ctx, b.images, b.o.group+"."+b.name, before, ami); err != nil {
		return result{}, err
	}
	if err := awaitNodes(ctx, b.watch, b.total, "the bench's own roll"); err != nil {
		return result{}, err
	}
	return res, awaitWorkload(ctx, b.watch, b.replicas)
}

// spans waits until every old node has left the cluster and sums up how
// long each spent between its cordon and going: "mean / max".
func (b *bench) spans(ctx context.Context, before []rollout.Instance) (string, error) {
	var ds []time.Duration
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(context.Context) (bool, error) {
		ds = ds[:0]
		for _, in := range before {
			d, ok := b.nodes.span(in.ID)
			if !ok {
				return false, nil
			}
			ds = append(ds, d)
		}
		return true, nil
	})
	if err != nil {
		return "", fmt.Errorf("old nodes not seen cordoned and gone: %w", err)
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return fmt.Sprintf("%s / %s", (sum / time.Duration(len(ds))).Round(100*time.Millisecond), slices.Max(ds).Round(100*time.Millisecond)), nil
}
