package main

import (
	"context"
	"fmt"
	"time"

	"k8s.io/kops/pkg/apis/kops"
	"k8s.io/kops/pkg/instancegroups"

	"github.com/trellis-dev/trellis/bench/internal/rollbench"
)

// kops rolls the group with kops's own rolling update, as `kops
// rolling-update cluster --cloudonly --yes --instance-group general` does:
// the stored cluster and instance groups, kops's cloud groups (which
// instances need an update), the group's rolling-update settings, and
// --node-interval.
func (b *bench) kops(ctx context.Context, s setting) (int, error) {
	st, err := rollbench.Load(ctx, store, b.name, group, s.kops)
	if err != nil {
		return 0, err
	}
	// Only the rolled group, as `--instance-group` gives kops.
	list := &kops.InstanceGroupList{}
	for _, ig := range st.Rolled {
		list.Items = append(list.Items, *ig)
	}
	groups, err := b.aws.GetCloudGroups(st.Spec.Cluster, st.Rolled, false, nil)
	if err != nil {
		return 0, fmt.Errorf("kops cloud groups: %w", err)
	}
	need := 0
	for _, g := range groups {
		need += len(g.NeedUpdate)
	}
	if need == 0 {
		return 0, fmt.Errorf("kops sees no instance of %s to update", group)
	}
	ru := &instancegroups.RollingUpdateCluster{
		Clientset: st.Clientset, Cluster: st.Spec.Cluster, Cloud: b.aws, ClusterName: b.name, CloudOnly: true,
		MasterInterval: s.interval, NodeInterval: s.interval, BastionInterval: s.interval,
		FailOnDrainError: true, FailOnValidate: true, ValidationTimeout: 15 * time.Minute, DrainTimeout: 15 * time.Minute,
	}
	ru.Options.InitDefaults()
	if err := ru.RollingUpdate(ctx, groups, list); err != nil {
		return 0, fmt.Errorf("kops rolling update: %w", err)
	}
	return need, nil
}
