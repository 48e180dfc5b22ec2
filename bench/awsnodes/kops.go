package main

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kops/pkg/apis/kops"
	"k8s.io/kops/pkg/instancegroups"
	"k8s.io/kops/pkg/validation"

	"github.com/trellis-dev/trellis/bootstrap"
	"github.com/trellis-dev/trellis/bootstrap/statestore"
)

// kops rolls the group with kops's own rolling update, as `kops
// rolling-update cluster --yes --instance-group <group>` does on a live
// cluster: the stored cluster and instance groups, kops's cloud groups
// matched to the nodes, its drain, and its cluster validation after each
// node. Validation covers the node groups only: in the local AWS loop the
// control-plane instances are not nodes (the kind control plane is).
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
		if ig.Name == b.o.group {
			ig.Spec.RollingUpdate = s.kops
			igs = append(igs, ig)
		}
		list.Items = append(list.Items, *ig)
	}
	nodes, err := b.kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	groups, err := b.aws.GetCloudGroups(stored.Cluster, igs, false, nodes.Items)
	if err != nil {
		return 0, fmt.Errorf("kops cloud groups: %w", err)
	}
	need := 0
	for _, g := range groups {
		need += len(g.NeedUpdate)
	}
	if need == 0 {
		return 0, fmt.Errorf("kops sees no instance of %s to update", b.o.group)
	}
	validator, err := validation.NewClusterValidator(stored.Cluster, b.aws, list,
		func(ig *kops.InstanceGroup) bool { return ig.Spec.Role == kops.InstanceGroupRoleNode }, nil, b.cfg, b.kc)
	if err != nil {
		return 0, err
	}
	ru := &instancegroups.RollingUpdateCluster{
		Clientset: cs, Cluster: stored.Cluster, Cloud: b.aws, ClusterName: b.name, K8sClient: b.kc, ClusterValidator: validator,
		MasterInterval: s.interval, NodeInterval: s.interval, BastionInterval: s.interval, PostDrainDelay: s.postDrain,
		FailOnDrainError: true, FailOnValidate: true, ValidationTimeout: 15 * time.Minute, DrainTimeout: 15 * time.Minute,
		ValidateTickDuration: s.tick, ValidateSuccessDuration: s.success, ValidateCount: s.validations,
	}
	ru.Options.InitDefaults()
	if err := ru.RollingUpdate(ctx, groups, list); err != nil {
		return 0, fmt.Errorf("kops rolling update: %w", err)
	}
	return need, nil
}
