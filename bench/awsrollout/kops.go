package main

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/kops/pkg/apis/kops"
	"k8s.io/kops/pkg/instancegroups"

	"github.com/trellis-dev/trellis/bootstrap"
	"github.com/trellis-dev/trellis/bootstrap/statestore"
)

func intOrStr(n int) *intstr.IntOrString { v := intstr.FromInt32(int32(n)); return &v }

// kops rolls the group with kops's own rolling update, as `kops
// rolling-update cluster --cloudonly --yes --instance-group general` does:
// the stored cluster and instance groups, kops's cloud groups (which
// instances need an update), the group's rolling-update settings, and
// --node-interval.
func (b *bench) kops(ctx context.Context, s setting) (int, error) {
	cs, err := statestore.Open(ctx, store)
	if err != nil {
		return 0, err
	}
	stored, err := bootstrap.Stored(ctx, cs, b.name)
	if err != nil {
		return 0, err
	}
	list := &kops.InstanceGroupList{}
	var igs []*kops.InstanceGroup
	for _, ig := range stored.InstanceGroups {
		if ig.Name != group {
			continue
		}
		ig.Spec.RollingUpdate = s.kops
		igs = append(igs, ig)
		list.Items = append(list.Items, *ig)
	}
	groups, err := b.aws.GetCloudGroups(stored.Cluster, igs, false, nil)
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
		Clientset: cs, Cluster: stored.Cluster, Cloud: b.aws, ClusterName: b.name, CloudOnly: true,
		MasterInterval: s.interval, NodeInterval: s.interval, BastionInterval: s.interval,
		FailOnDrainError: true, FailOnValidate: true, ValidationTimeout: 15 * time.Minute, DrainTimeout: 15 * time.Minute,
	}
	ru.Options.InitDefaults()
	if err := ru.RollingUpdate(ctx, groups, list); err != nil {
		return 0, fmt.Errorf("kops rolling update: %w", err)
	}
	return need, nil
}
