package bootstrap

import (
	"context"
	"fmt"
	"io"

	"k8s.io/kops/upup/pkg/fi/cloudup/awsup"

	"github.com/trellis-dev/trellis/bootstrap/definition"
	"github.com/trellis-dev/trellis/bootstrap/rollout"
)

// roll relaunches every instance group of an upgraded cluster onto its
// newest launch-template version with the rollout engine: each
// control-plane group alone, in place, one instance at a time (phases 0..n-1),
// then the node groups together with their definition's strategies
// (phase n). Control-plane groups whose instances are not nodes of the
// cluster, and every group without a client, roll cloud-only.
func roll(ctx context.Context, p *Prepared, def *definition.ClusterDefinition, opts UpgradeOptions, reason string, store rollout.Store, res *UpgradeResult, replaceAll map[string]bool) error {
	out := opts.Out
	if out == nil {
		out = io.Discard
	}
	name := p.Spec.Cluster.Name
	aws, ok := p.Cloud.(awsup.AWSCloud)
	if !ok {
		return fmt.Errorf("rolling %s needs its AWS cloud, not %T", name, p.Cloud)
	}
	stored, err := Stored(ctx, p.Clientset, name)
	if err != nil {
		return err
	}
	cloud := &rollout.AWSCloud{AWS: aws, Cluster: name, Clientset: p.Clientset}
	var cluster rollout.Cluster
	var kube *rollout.KubeCluster
	if opts.K8sClient != nil {
		if kube, err = rollout.NewKubeCluster(ctx, opts.K8sClient); err != nil {
			return err
		}
		cluster = kube
	}
	groups, err := Strategies(def, StrategyOverrides{MaxSurge: -1, MaxUnavailable: -1, Canary: true, BakeTime: opts.Interval})
	if err != nil {
		return err
	}
	order := rollOrder(stored.InstanceGroups)
	for name, s := range groups {
		s.Phase, s.CloudOnly, s.ReplaceAll = len(order.controlPlane), kube == nil, replaceAll[name]
		groups[name] = s
	}
	for i, cp := range order.controlPlane {
		s := rollout.Strategy{MaxUnavailable: 1, Phase: i, CloudOnly: kube == nil, ReplaceAll: replaceAll[cp]}
		if kube != nil {
			nodes, err := hasNodes(ctx, cloud, kube, cp)
			if err != nil {
				return err
			}
			if !nodes {
				s.CloudOnly = true
				fmt.Fprintf(out, "Control-plane group %s: its instances are not nodes of the cluster; it rolls cloud-only.\n", cp)
			}
		}
		groups[cp] = s
	}
	ro := opts.Roll
	ro.Image, ro.Relaunch, ro.Reason, ro.Groups = "", true, reason, groups
	st, err := rollout.New(cloud, cluster, store, ro, nil).Start(ctx, name)
	res.Rollout = st
	if st != nil {
		res.Rolled = st.GroupNames()
	}
	if err != nil {
		return fmt.Errorf("rolling %s: %w", name, err)
	}
	if st.Status != rollout.StatusDone {
		return fmt.Errorf("rolling %s: rollout %s is %s %s", name, st.ID, st.Status, st.Message)
	}
	return nil
}

// rollTarget is what Upgrade and ApplyAndRoll start from: the prepared
// definition, the stored cluster's version, and its rollout store with the
// rollout it holds (nil when there is none).
type rollTarget struct {
	p        *Prepared
	from     string
	store    *rollout.VFSStore
	inflight *rollout.State
}

func prepareRoll(ctx context.Context, def *definition.ClusterDefinition, opts ApplyOptions) (*rollTarget, error) {
	p, err := Prepare(ctx, def, opts)
	if err != nil {
		return nil, err
	}
	stored, err := Stored(ctx, p.Clientset, p.Spec.Cluster.Name)
	if err != nil {
		return nil, err
	}
	store, err := rollout.NewVFSStore(opts.StateStore, p.Spec.Cluster.Name)
	if err != nil {
		return nil, err
	}
	inflight, err := store.Load(ctx)
	if err != nil {
		return nil, err
	}
	return &rollTarget{p: p, from: stored.Cluster.Spec.KubernetesVersion, store: store, inflight: inflight}, nil
}

// hasNodes reports whether any instance of the group is a node.
func hasNodes(ctx context.Context, cloud rollout.Cloud, kube rollout.Cluster, group string) (bool, error) {
	insts, _, err := cloud.Instances(ctx, group)
	if err != nil {
		return false, err
	}
	for _, in := range insts {
		n, err := kube.Node(ctx, in.ID)
		if err != nil {
			return false, err
		}
		if n != nil {
			return true, nil
		}
	}
	return false, nil
}
