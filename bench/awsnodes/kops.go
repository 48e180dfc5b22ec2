package main

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kops/pkg/apis/kops"
	"k8s.io/kops/pkg/instancegroups"
	"k8s.io/kops/pkg/validation"

	"github.com/trellis-dev/trellis/bench/internal/rollbench"
)

// kops rolls the group with kops's own rolling update, as `kops
// rolling-update cluster --yes --instance-group <group>` does on a live
// cluster: the stored cluster and instance groups, kops's cloud groups
// matched to the nodes, its drain, and its cluster validation after each
// node. Validation covers the node groups only: in the local AWS loop the
// control-plane instances are not nodes (the kind control plane is).
func (b *bench) kops(ctx context.Context, s setting) (int, error) {
	st, err := rollbench.Load(ctx, store, b.name, b.o.group, s.kops)
	if err != nil {
		return 0, err
	}
	nodes, err := b.kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	groups, err := b.aws.GetCloudGroups(st.Spec.Cluster, st.Rolled, false, nodes.Items)
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
	validator, err := validation.NewClusterValidator(st.Spec.Cluster, b.aws, st.All,
		func(ig *kops.InstanceGroup) bool { return ig.Spec.Role == kops.InstanceGroupRoleNode }, nil, b.cfg, b.kc)
	if err != nil {
		return 0, err
	}
	ru := &instancegroups.RollingUpdateCluster{
		Clientset: st.Clientset, Cluster: st.Spec.Cluster, Cloud: b.aws, ClusterName: b.name, K8sClient: b.kc, ClusterValidator: validator,
		MasterInterval: s.interval, NodeInterval: s.interval, BastionInterval: s.interval, PostDrainDelay: s.postDrain,
		FailOnDrainError: true, FailOnValidate: true, ValidationTimeout: 15 * time.Minute, DrainTimeout: 15 * time.Minute,
		ValidateTickDuration: s.tick, ValidateSuccessDuration: s.success, ValidateCount: s.validations,
	}
	ru.Options.InitDefaults()
	if err := ru.RollingUpdate(ctx, groups, st.All); err != nil {
		return 0, fmt.Errorf("kops rolling update: %w", err)
	}
	return need, nil
}
